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
use super::kinds::{Ctx, Kind, PlanError, Planned, vm_name};
use super::model::Change;
use super::paths::SINGLE_GPU_HOOK as HOOK;
use crate::tuning::paths;

pub(crate) fn plan(cx: &Ctx, out: &mut Planned) -> Result<(), PlanError> {
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
    if has(paths::ETC_LIBVIRT_HOOKS, "qemu") {
        theirs.push("/etc/libvirt/hooks/qemu".to_string());
    }
    if has(paths::ETC_LIBVIRT_HOOKS_QEMU_D, vm) {
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
# card); when it stops all of it comes back. Before anything is stopped it
# looks who holds the card (by its device numbers): a holder the display
# manager's stop would not end (a system service, a session from a console
# or SSH, a container) refuses the start at once, naming it, with the
# desktop untouched. A step that fails, or a program still holding the card
# after the display manager went, fails the start: everything done is given
# back at once (and libvirt's release finds nothing left to do), so the
# screen comes back instead of a start that hangs. Every wait is bounded
# (timeout -k; what the kernel holds is left behind, not waited on).
# What it cannot see: see look() below.
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
{prelude}# The desktop's only GPU: every DRM and NVIDIA device, by the major numbers
# the kernel lists for them (DRM's is 226).
DEVS=$(awk '/^Block/ {{ exit }} $2 == "drm" || $2 ~ /^nvidia/ {{ printf "%x:* ", $1 }}' "$R/proc/devices" 2>/dev/null)
DEVS="${{DEVS:-e2:*}}"
# Who holds the GPU, as "pid:name " words; a look that did not finish in
# time answers "?" (then the start fails rather than guess).
holders() {{
    look "$DEVS" || {{ echo "? (a look at every process's open files took over ${{WAIT}}s) "; return 0; }}
    while read -r p; do who "$p"; echo; done < "$OUT" | sort -u | tr '\n' ' '
}}
# Whether the holder /proc/PID ends when the display manager ($dm) stops:
# its own unit, a session it started (logind's SERVICE is its PAM
# service), the user's manager (the graphical session's services). A
# session from a console or SSH, a system service, a container do not.
with_desktop() {{
    cg=$(cgroup_of "$1")
    case "$cg" in
    /system.slice/nvidia-persistenced.service|/system.slice/nvidia-persistenced.service/*) return 0 ;;
    /system.slice/"$dm"|/system.slice/"$dm"/*) [ -n "$dm" ] ;;
    /user.slice/*/user@*.service*) return 0 ;;
    /user.slice/*/session-*.scope*)
        s=${{cg##*/session-}}; s=${{s%%.scope*}}
        svc=$(sed -n 's/^SERVICE=//p' "$R/run/systemd/sessions/$s" 2>/dev/null)
        case "$svc" in ""|login|sshd|su|su-l|sudo|sudo-i|runuser|runuser-l|systemd-user|cron|crond) return 1 ;; esac
        return 0 ;;
    *) return 1 ;;
    esac
}}
# Give back what the state file records, newest first.
give_back() {{
    [ -f "$STATE" ] || {{ log "nothing recorded to give back"; return 0; }}
    sed -n '1!G;h;$p' "$STATE" | while read -r kind a b; do
        case "$kind" in
            fb) step put "$R/sys/bus/platform/drivers/$a/bind" "$b" ;;
            vtcon) step put "$R/sys/class/vtconsole/$a/bind" 1 ;;
            mod) step run modprobe "$a" ;;
            unit|dm) step run systemctl start -- "$a" ;;
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
    dm=
    if bounded systemctl is-active --quiet -- display-manager.service; then
        bounded systemctl show -p Id --value -- display-manager.service
        dm=$(head -n 1 "$OUT")
    fi
    # Before anything that shows the desktop is stopped: a holder the
    # display manager's stop would not end refuses the start now.
    if ! look "$DEVS"; then
        log "could not tell who holds the GPU within ${{WAIT}}s: the VM's start is refused, the desktop left as it is"
        rm -f "$STATE"
        exit 1
    fi
    stays=$(while read -r p; do with_desktop "$p" || {{ who_in "$p"; echo; }}; done < "$OUT" | sort -u | tr '\n' ' ')
    if [ -n "$stays" ]; then
        log "holding the GPU, and not ended by stopping the display manager (pid:name(unit)): $stays— a session started without a display manager (startx, a compositor from a TTY), a CUDA program or a container; stop it, then start the VM. The desktop was left as it is."
        rm -f "$STATE"
        exit 1
    fi
    if [ -n "$dm" ]; then
        echo "dm $dm" >> "$STATE"
        must run systemctl stop -- display-manager.service
    else
        log "no display manager running"
    fi
    for u in nvidia-persistenced.service; do
        if bounded systemctl is-active --quiet -- "$u"; then
            echo "unit $u" >> "$STATE"
            must run systemctl stop -- "$u"
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
