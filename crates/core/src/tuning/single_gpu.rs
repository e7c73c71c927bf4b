//! Single-GPU passthrough as a hook of ours: when the VM's GPU is the one
//! the host shows its desktop on, a libvirt qemu hook in
//! `/etc/libvirt/hooks/qemu.d/` hands the screen over at the VM's `prepare
//! begin` — the display manager stopped (its unit recorded), the virtual
//! consoles unbound from the framebuffer, the EFI/simple framebuffer let go
//! of the card's memory — and libvirt then detaches the card itself
//! (`managed='yes'`). At `release end` — after the VM stopped, and also when
//! its start failed (libvirt runs release then too) — it gives everything
//! back in reverse and starts the display manager again.
//!
//! It fails closed: a step that fails, or a program still holding the card
//! once the display manager is gone (a session started without one, a CUDA
//! program), gives back everything it did at once and exits 1, so the start
//! fails with the reason in the log and the desktop returns — never a start
//! that hangs on a driver's usage count behind a black screen. NVIDIA's
//! `nvidia-persistenced` is stopped and its modules unloaded (then loaded
//! again); every step is bounded by `timeout` (20 s). It logs each step to
//! `/var/log/vfio-assistant-single-gpu.log`, and it keeps what it did in
//! `/run/vfio-assistant-single-gpu.state`, so the release undoes exactly that
//! (a console that was not bound is not bound back). Paths run under
//! `$VFIO_ASSISTANT_ROOT` when that is set (tests run it on a fixture
//! sysfs with stand-ins for systemctl on PATH); libvirt never sets it.
//!
//! The usual breakages (shared/research/playable-vm.md) are checked before
//! (`report::single_gpu`): something else holding /dev/dri or /dev/nvidia*,
//! simpledrm/sysfb on the card's memory (`initcall_blacklist=sysfb_init`),
//! no SSH way back.

use super::facts::TuneFacts;
use super::kinds::{Ctx, Kind, PlanError, Planned, Spec, restarts_libvirt, vm_name};
use super::model::Change;

pub const HOOK: &str = "/etc/libvirt/hooks/qemu.d/vfio-assistant-single-gpu";

pub const SPEC: Spec = Spec {
    kind: Kind::SingleGpuHook,
    name: "single-gpu-hook",
    what: "the desktop's only GPU handed to the VM at its start and back (a libvirt hook)",
    files: &[HOOK],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
    plan: Some(plan),
};

fn plan(cx: &Ctx, out: &mut Planned) -> Result<(), PlanError> {
    if !cx.req.single_gpu {
        return Ok(());
    }
    let name = vm_name(cx.req)?;
    let blacklisted = cx
        .tokens
        .iter()
        .any(|t| t == "initcall_blacklist=sysfb_init");
    out.changes.extend(single_gpu_hook(cx.facts, name).map(|mut c| {
        if !blacklisted {
            c.notes.retain(|n| !n.starts_with("initcall_blacklist"));
            c.notes.push("The card's own driver takes the firmware's framebuffer over when it loads, so no initcall blacklist is added: the boot console (a disk passphrase prompt) stays.".into());
        }
        c.notes.extend(foreign_hooks(cx.facts, name));
        c.notes.push("libvirt runs hooks from /etc/libvirt/hooks/qemu.d/ since 6.5 (Debian 11, Ubuntu 22.04, Fedora 33 and newer): an older libvirt never runs this one.".into());
        c
    }));
    Ok(())
}

/// Another single-GPU setup's hooks for the VM (a guide's dispatcher
/// `/etc/libvirt/hooks/qemu` running `qemu.d/VM/prepare/begin/*`): they
/// would run beside ours and stop (or start) the same things twice.
fn foreign_hooks(f: &TuneFacts, vm: &str) -> Vec<String> {
    let has = |d: &str, n: &str| f.dir(d).is_some_and(|names| names.iter().any(|x| x == n));
    let mut theirs = Vec::new();
    if has("/etc/libvirt/hooks", "qemu") {
        theirs.push("/etc/libvirt/hooks/qemu".to_string());
    }
    if has("/etc/libvirt/hooks/qemu.d", vm) {
        theirs.push(format!("/etc/libvirt/hooks/qemu.d/{vm}/"));
    }
    if theirs.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "Other hooks for '{vm}' are there ({}): a guide's single-GPU scripts would run beside this one and stop or start the display manager twice. Move them away before the first start.",
        theirs.join(", ")
    )]
}

fn script(vm: &str) -> String {
    format!(
        r#"#!/bin/sh
# Written by vfio-assistant (tune, change single-gpu-hook): single-GPU
# passthrough for the VM '{vm}'. At its start the host's desktop lets go of
# the GPU (display manager and nvidia-persistenced stopped, consoles and
# framebuffer unbound, NVIDIA's modules unloaded; libvirt then detaches the
# card); when it stops all of it comes back. A step that fails, or a program
# still holding the card, fails the start: everything done is given back at
# once (and libvirt's release finds nothing left to do), so the screen comes
# back instead of a start that hangs. Every wait is bounded.
# libvirt runs it as: vfio-assistant-single-gpu VM OPERATION SUB-OPERATION EXTRA.
# Undo: `sudo vfio-assistant tune undo ID` (`tune list` names it), or delete this file.
[ "$1" = '{vm}' ] || exit 0
R="${{VFIO_ASSISTANT_ROOT:-}}"
LOG="$R/var/log/vfio-assistant-single-gpu.log"
STATE="$R/run/vfio-assistant-single-gpu.state"
# The longest any one step may take, in seconds (then it counts as failed).
WAIT="${{VFIO_ASSISTANT_WAIT:-20}}"
VM='{vm}'
TAG=vfio-assistant-single-gpu
{prelude}# Processes with one of the GPU's nodes open (/dev/dri, /dev/nvidia*): one
# find over every process's fds (a desktop has thousands; a readlink each
# took minutes), itself cut after $WAIT. A look that did not finish is not
# "nobody": it answers "?", and the start fails rather than hang.
holders() {{
    found=$(timeout "$WAIT" find "$R"/proc/[0-9]*/fd -mindepth 1 -maxdepth 1 \
        \( -lname '/dev/dri/*' -o -lname '/dev/nvidia*' \) 2>/dev/null)
    if [ $? -ge 124 ]; then
        echo "? (a look at every process's open files took over ${{WAIT}}s) "
        return 0
    fi
    [ -n "$found" ] || return 0
    echo "$found" | while read -r fd; do who "${{fd%/fd/*}}"; echo; done |
        sort -u | tr '\n' ' '
}}
# Give back what the state file records, newest first.
give_back() {{
    [ -f "$STATE" ] || {{ log "nothing recorded to give back"; return 0; }}
    sed -n '1!G;h;$p' "$STATE" | while read -r kind a b; do
        case "$kind" in
            fb) step put "$R/sys/bus/platform/drivers/$a/bind" "$b" ;;
            vtcon) step put "$R/sys/class/vtconsole/$a/bind" 1 ;;
            mod) step run modprobe "$a" ;;
            unit|dm) step run systemctl start "$a" ;;
        esac
    done
    rm -f "$STATE"
    log "the host has its screen back"
}}
# A step that must work, or the start fails with the host given back.
must() {{
    step "$@" && return 0
    log "the VM's start is stopped: giving the host its screen back"
    give_back
    exit 1
}}

case "$2/$3" in
prepare/begin)
    : > "$STATE"
    dm=$(systemctl show -p Id --value display-manager.service 2>/dev/null)
    if [ -n "$dm" ] && systemctl is-active --quiet display-manager.service; then
        echo "dm $dm" >> "$STATE"
        must run systemctl stop display-manager.service
    else
        log "no display manager running"
    fi
    for u in nvidia-persistenced.service; do
        if systemctl is-active --quiet "$u" 2>/dev/null; then
            echo "unit $u" >> "$STATE"
            must run systemctl stop "$u"
        fi
    done
    # What the display manager started goes with it; wait for it, bounded
    # by the clock (not by a count of looks: each look can take seconds).
    end=$(( $(date +%s) + WAIT ))
    while [ -n "$(holders)" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 1; done
    left=$(holders)
    if [ -n "$left" ]; then
        log "still holding the GPU after ${{WAIT}}s (pid:name): $left— a session started without a display manager (startx, a compositor from a TTY), a CUDA program or a container; stop it, then start the VM"
        log "the VM's start is stopped: giving the host its screen back"
        give_back
        exit 1
    fi
    for v in "$R"/sys/class/vtconsole/vtcon*; do
        [ -e "$v/bind" ] || continue
        if [ "$(cat "$v/bind")" = 1 ]; then
            echo "vtcon ${{v##*/}}" >> "$STATE"
            must put "$v/bind" 0
        fi
    done
    for fb in efi-framebuffer simple-framebuffer; do
        for d in "$R"/sys/bus/platform/drivers/$fb/$fb.*; do
            [ -e "$d" ] || continue
            echo "fb $fb ${{d##*/}}" >> "$STATE"
            must put "$R/sys/bus/platform/drivers/$fb/unbind" "${{d##*/}}"
        done
    done
    # NVIDIA's driver keeps a usage count libvirt's detach would wait on
    # forever: its modules go, the last one first.
    for m in nvidia_uvm nvidia_drm nvidia_modeset nvidia; do
        if [ -d "$R/sys/module/$m" ]; then
            echo "mod $m" >> "$STATE"
            must run modprobe -r "$m"
        fi
    done
    # Let the card settle before libvirt resets and detaches it.
    sleep "${{VFIO_ASSISTANT_SETTLE:-2}}"
    log "the host let go of the GPU; libvirt hands it to the VM"
    ;;
release/end)
    give_back
    ;;
esac
exit 0
"#,
        prelude = super::hook::GPU_HOOK_PRELUDE,
    )
}

/// The hook for the VM `vm`; `None` when ours already says exactly this.
pub fn single_gpu_hook(f: &TuneFacts, vm: &str) -> Option<Change> {
    let base = super::hook::hook_change(f, Kind::SingleGpuHook, HOOK, script(vm))?;
    Some(Change {
        title: format!("Single-GPU passthrough for '{vm}' (libvirt hook)"),
        why: format!("The VM's GPU is the one the desktop is on: at '{vm}'s start the hook stops the display manager and makes the consoles and the boot framebuffer let go of the card, so libvirt can hand it over; when '{vm}' stops, or its start fails, everything comes back and the desktop starts again. Every step has a time limit, so the start never hangs: a step that fails, or a program still holding the card (named in the log), fails the start and gives the desktop back. Each step is logged to /var/log/vfio-assistant-single-gpu.log."),
        notes: vec![
            "While the VM runs the host has no screen: keep an SSH way in (the checks look for it), and test the first start from SSH.".into(),
            "initcall_blacklist=sysfb_init on the kernel command line keeps the firmware's framebuffer (simpledrm) off the card's memory; until the GPU's driver loads the screen stays dark at boot — with an encrypted disk whose driver is not in the initramfs (NVIDIA's own), type the passphrase blind or add the driver to the initramfs.".into(),
            "An AMD card with the reset bug may not come back after the VM stops (vendor-reset helps Vega and Navi 10).".into(),
        ],
        ..base
    })
}
