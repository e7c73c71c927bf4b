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
//! It never stops the VM's start (every step that fails is logged and the
//! hook goes on; it always exits 0), it logs each step to
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
use super::model::{Change, CommandStep, Effect, FileChange, Verify};

pub const HOOK: &str = "/etc/libvirt/hooks/qemu.d/vfio-assistant-single-gpu";

fn script(vm: &str) -> String {
    format!(
        r#"#!/bin/sh
# Written by vfio-assistant (tune, change single-gpu-hook): single-GPU
# passthrough for the VM '{vm}'. At its start the host's desktop lets go of
# the GPU (display manager stopped, consoles and framebuffer unbound; libvirt
# detaches the card); when it stops — or fails to start — all of it comes back.
# It never stops the VM's start: a step that fails is logged, the rest goes on.
# libvirt runs it as: vfio-assistant-single-gpu VM OPERATION SUB-OPERATION EXTRA.
# Undo: `vfio-assistant tune undo`, or delete this file.
[ "$1" = '{vm}' ] || exit 0
R="${{VFIO_ASSISTANT_ROOT:-}}"
LOG="$R/var/log/vfio-assistant-single-gpu.log"
STATE="$R/run/vfio-assistant-single-gpu.state"
log() {{ echo "$(date '+%F %T' 2>/dev/null) {vm} $*" >> "$LOG" 2>/dev/null; echo "vfio-assistant-single-gpu: $*" >&2; }}
step() {{ if "$@" 2>>"$LOG"; then log "ok: $*"; else log "FAILED (going on): $*"; fi; }}
write() {{ echo "$2" > "$1"; }}

case "$2/$3" in
prepare/begin)
    : > "$STATE"
    dm=$(systemctl show -p Id --value display-manager.service 2>/dev/null)
    if [ -n "$dm" ] && systemctl is-active --quiet display-manager.service; then
        echo "dm $dm" >> "$STATE"
        step systemctl stop display-manager.service
    else
        log "no display manager running"
    fi
    for v in "$R"/sys/class/vtconsole/vtcon*; do
        [ -e "$v/bind" ] || continue
        if [ "$(cat "$v/bind")" = 1 ]; then
            echo "vtcon ${{v##*/}}" >> "$STATE"
            step write "$v/bind" 0
        fi
    done
    for fb in efi-framebuffer simple-framebuffer; do
        for d in "$R"/sys/bus/platform/drivers/$fb/$fb.*; do
            [ -e "$d" ] || continue
            echo "fb $fb ${{d##*/}}" >> "$STATE"
            step write "$R/sys/bus/platform/drivers/$fb/unbind" "${{d##*/}}"
        done
    done
    log "the host let go of the GPU; libvirt hands it to the VM"
    ;;
release/end)
    [ -f "$STATE" ] || {{ log "nothing recorded to give back"; exit 0; }}
    while read -r kind a b; do
        case "$kind" in
            fb) step write "$R/sys/bus/platform/drivers/$a/bind" "$b" ;;
            vtcon) step write "$R/sys/class/vtconsole/$a/bind" 1 ;;
        esac
    done < "$STATE"
    dm=$(sed -n 's/^dm //p' "$STATE")
    [ -n "$dm" ] && step systemctl start "$dm"
    rm -f "$STATE"
    log "the host has its screen back"
    ;;
esac
exit 0
"#
    )
}

/// The hook for the VM `vm`; `None` when ours already says exactly this.
pub fn single_gpu_hook(f: &TuneFacts, vm: &str) -> Option<Change> {
    let after = script(vm);
    let before = f.file(HOOK).map(str::to_string);
    if before.as_deref() == Some(after.as_str()) {
        return None;
    }
    let unit = if f.markers.contains("/run/libvirt/virtqemud-sock") {
        "virtqemud.service"
    } else {
        "libvirtd.service"
    };
    let restart = |why: &str| CommandStep {
        argv: vec!["systemctl".into(), "try-restart".into(), unit.into()],
        run: true,
        why: why.into(),
    };
    Some(Change {
        id: "single-gpu-hook".into(),
        title: format!("Single-GPU passthrough for '{vm}' (libvirt hook)"),
        why: format!("The VM's GPU is the one the desktop is on: at '{vm}'s start the hook stops the display manager and lets the consoles and the boot framebuffer go of the card, so libvirt can hand it over; when '{vm}' stops, or its start fails, everything comes back and the desktop starts again. It never blocks the start and logs each step to /var/log/vfio-assistant-single-gpu.log."),
        effect: Effect::AtVmStart,
        files: vec![FileChange {
            path: HOOK.into(),
            before,
            after: Some(after),
        }],
        commands: vec![restart("libvirt finds hook scripts when its daemon starts; running VMs keep running")],
        undo_commands: vec![restart("forgets the removed hook")],
        verify: vec![Verify::Executable { path: HOOK.into() }],
        notes: vec![
            "While the VM runs the host has no screen: keep an SSH way in (the checks look for it), and test the first start from SSH.".into(),
            "initcall_blacklist=sysfb_init on the kernel command line keeps the firmware's framebuffer (simpledrm) off the card's memory; until the GPU's driver loads the screen stays dark at boot — with an encrypted disk whose driver is not in the initramfs (NVIDIA's own), type the passphrase blind or add the driver to the initramfs.".into(),
            "An AMD card with the reset bug may not come back after the VM stops (vendor-reset helps Vega and Navi 10).".into(),
        ],
        ..Change::default()
    })
}
