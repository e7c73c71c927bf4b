//! Shared GPU: the second card is the desktop's while the VM is off, and
//! the VM's while it runs — without a reboot or a logout. It stays on its
//! own driver at boot (nothing binds it to vfio-pci then); a libvirt qemu
//! hook of ours lends it at the VM's `prepare begin` and takes it back at
//! `release end` (libvirt runs that after a stop, and after a start that
//! failed). The desktop is kept off the card beforehand (`shared_desktop.rs`),
//! so that handing it over never tears the session down.
//!
//! At `prepare begin` the hook stops the units it was allowed to stop
//! (`nvidia-persistenced`, and those the user named) when they run, waits
//! (bounded) for the card's nodes to be let go — its `/dev/dri` card and
//! render nodes, NVIDIA's `/dev/nvidia*` — and refuses the start, naming
//! every holder (pid, program, systemd unit), when something still holds
//! them: an unbind under a holder hangs NVIDIA's driver in an unkillable
//! write. Then each function (the audio first, the GPU last) goes from its
//! driver to vfio-pci (`driver_override`, unbind, bind), each write bounded
//! by `timeout`; libvirt finds the card on vfio-pci (`managed='yes'` has
//! nothing left to do). At `release end` each function goes back to the
//! driver it had, the units come back, and the card's health is read and
//! logged: its config space answers (not all ones), its power state is D0,
//! its driver is the one it had. A step that fails gives back what was done
//! and fails the start: the card stays with the host. Everything is logged
//! to `/var/log/vfio-assistant-shared-gpu.log`; what was done is kept in
//! `/run/vfio-assistant-shared-gpu.state` so the release undoes exactly that.
//! Paths run under `$VFIO_ASSISTANT_ROOT` when that is set (tests).

use super::facts::TuneFacts;
use super::kinds::{Ctx, Kind, PlanError, Planned, vm_name};
use super::model::{Change, Request};
use super::paths::{SHARED_GPU_HOOK as HOOK, SHARED_GPU_LOG as LOG};

/// Units the hook may always stop: NVIDIA's persistence daemon keeps every
/// NVIDIA card open and is made to be stopped and started.
pub const ALWAYS_STOPPED: &[&str] = &["nvidia-persistenced.service"];

/// Units `--shared-stop` may name even when the plan did not see them
/// holding the card (they may not run, or not have it open, right now),
/// each because holding a GPU is what it is for and stopping it for a while
/// costs nothing but its own work:
/// * `nvidia-persistenced` — keeps every NVIDIA card open by design;
/// * `nvidia-powerd` — NVIDIA's Dynamic Boost daemon (laptops), which keeps
///   `/dev/nvidia*` open;
/// * `nvidia-dcgm` — NVIDIA's GPU monitoring daemon, open on every card;
/// * `ollama` — the Ollama server, which keeps a model loaded on the GPU
///   (CUDA or ROCm) between requests.
///
/// Any other unit must be one the plan saw holding the card
/// (`TuneFacts::card_holders`, found by the card's device numbers).
pub const KNOWN_HOLDERS: &[&str] = &[
    "nvidia-persistenced.service",
    "nvidia-powerd.service",
    "nvidia-dcgm.service",
    "ollama.service",
];

/// A unit name the hook may be told to stop: systemd's characters only,
/// starting with a letter or digit (never an option), a `.service` (a
/// process holding the card runs in one), and none the host needs while the
/// VM runs, even if it held the card: libvirt's own daemons (a hook that
/// stops them deadlocks the start), the display managers (that is single
/// GPU), the system bus, logind and the rest of systemd, polkit, the
/// network and its firewall, the audit log and the MAC policy, SSH, the
/// logins on consoles and serial lines, a user's own manager.
pub fn valid_unit(name: &str) -> bool {
    /// Families, by how their names start.
    const NEVER_PREFIX: &[&str] = &[
        "systemd-",
        "dbus",
        "libvirt",
        "virt",
        "ssh",
        "polkit",
        "display-manager",
        "gdm",
        "sddm",
        "lightdm",
        "NetworkManager",
        "getty",
        "serial-getty",
        "console-getty",
        "container-getty",
        "autovt",
        "user@",
        "user-runtime-dir@",
    ];
    /// Whole names (before any `@instance`).
    const NEVER_NAME: &[&str] = &[
        "lxdm",
        "xdm",
        "greetd",
        "ly",
        "networking",
        "network",
        "wpa_supplicant",
        "iwd",
        "firewalld",
        "nftables",
        "iptables",
        "ip6tables",
        "ufw",
        "auditd",
        "apparmor",
        "selinux-autorelabel",
    ];
    let Some(stem) = name.strip_suffix(".service") else {
        return false;
    };
    let base = stem.split('@').next().unwrap_or(stem);
    stem.starts_with(|c: char| c.is_ascii_alphanumeric())
        && stem.len() <= 200
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@._:-".contains(c))
        && !NEVER_PREFIX.iter().any(|n| stem.starts_with(n))
        && !NEVER_NAME.contains(&base)
}

/// Whether the hook may stop `unit` for the card `gpu`: a name
/// `valid_unit` allows, and one of `KNOWN_HOLDERS` or a system service the
/// plan saw holding the card. `Ok(None)`: yes; `Ok(Some(note))`: yes for
/// now — this is not root and could not see every process's open files —
/// and the helper, root, decides; `Err(why)`: no (the plan's error).
fn may_stop(cx: &Ctx, gpu: &str, unit: &str) -> Result<Option<String>, PlanError> {
    if !valid_unit(unit) {
        return Err(PlanError::Shared(format!(
            "{unit:?} is not a unit it may stop (a name ending in .service, systemd's characters only, starting with a letter or digit, and not one the host needs while the VM runs: libvirt, a display manager, D-Bus, systemd's own, polkit, SSH, the network, its firewall, audit, AppArmor or SELinux, a getty, a user's manager)"
        )));
    }
    let seen: Vec<&str> = cx
        .facts
        .card_holders
        .get(gpu)
        .into_iter()
        .flatten()
        .filter_map(|h| h.system_unit())
        .collect();
    if KNOWN_HOLDERS.contains(&unit) || seen.contains(&unit) {
        return Ok(None);
    }
    if cx.facts.holders_partial {
        return Ok(Some(format!(
            "{unit} was not seen holding {gpu}, but not every process's open files could be read here: the helper (root) looks again when you apply, and refuses it unless it holds the card then."
        )));
    }
    let seen = if seen.is_empty() {
        "none".to_string()
    } else {
        seen.join(", ")
    };
    Err(PlanError::Shared(format!(
        "{unit} does not hold {gpu} (found by the card's device numbers in every process's open files and mappings): the hook stops only units seen holding the card (now: {seen}) and {} — start the unit so that it holds the card, then plan again",
        KNOWN_HOLDERS.join(", ")
    )))
}

pub(crate) fn plan(cx: &Ctx, out: &mut Planned) -> Result<(), PlanError> {
    if !cx.req.shared_gpu {
        return Ok(());
    }
    if cx.req.single_gpu {
        return Err(PlanError::Shared(
            "single-GPU and shared modes are two ways to use one card: choose one".into(),
        ));
    }
    let name = vm_name(cx.req)?;
    let funcs = functions(cx)?;
    let gpu = funcs.last().map(String::as_str).unwrap_or("");
    let mut notes = Vec::new();
    for u in &cx.req.shared_stop_units {
        if let Some(note) = may_stop(cx, gpu, u)? {
            notes.push(note);
        }
    }
    let mut units: Vec<String> = ALWAYS_STOPPED.iter().map(|s| s.to_string()).collect();
    for u in &cx.req.shared_stop_units {
        if !units.contains(u) {
            units.push(u.clone());
        }
    }
    out.changes.extend(
        shared_gpu_hook(cx.facts, name, &funcs, &units).map(|mut c| {
            c.notes.extend(notes);
            c
        }),
    );
    Ok(())
}

/// Why `gpu` cannot be shared with the desktop on this host (`None`: it
/// can): it is the card the host boots on and shows its desktop on, or
/// there is no other GPU for the desktop. What the Tuning page, the
/// Overview and the Devices page offer the mode by.
pub fn misfit(snap: &crate::host::HostSnapshot, gpu: &str) -> Option<String> {
    let gpu = crate::host::pci::full_address(gpu.trim());
    let entry = snap.device(&gpu)?;
    if entry.device.boot_vga == Some(true) {
        return Some(format!(
            "{gpu} is the GPU the host boots on and shows its desktop on: lending it would take the screen away (that is single-GPU mode)"
        ));
    }
    let slot = |a: &str| a.rsplit_once('.').map(|(s, _)| s.to_string());
    if !snap.gpus().any(|e| slot(&e.device.address) != slot(&gpu)) {
        return Some(
            "shared mode needs a second GPU for the desktop; with only one, use single-GPU mode"
                .into(),
        );
    }
    None
}

/// The card's functions, the display function last (the audio goes first
/// and comes back last); refused when the card is the one the host boots
/// on (that is single GPU) or there is no other GPU for the desktop.
fn functions(cx: &Ctx) -> Result<Vec<String>, PlanError> {
    let card = super::devices::card_functions(cx.snap, cx.req)?;
    let Some(gpu) = card.first() else {
        return Err(PlanError::Shared(
            "shared mode needs the VM's GPU (choose it; or in a terminal: --gpu ADDRESS)".into(),
        ));
    };
    if let Some(why) = misfit(cx.snap, gpu) {
        return Err(PlanError::Shared(why));
    }
    let mut funcs: Vec<String> = card.iter().filter(|a| *a != gpu).cloned().collect();
    funcs.push(gpu.clone());
    Ok(funcs)
}

/// The hook for `vm`, lending `funcs` (the display function last) and
/// allowed to stop `units`; `None` when ours already says exactly this.
pub fn shared_gpu_hook(
    f: &TuneFacts,
    vm: &str,
    funcs: &[String],
    units: &[String],
) -> Option<Change> {
    let base = super::hook::hook_change(f, Kind::SharedGpuHook, HOOK, script(vm, funcs, units))?;
    let gpu = funcs.last().map(String::as_str).unwrap_or("the card");
    Some(Change {
        title: format!("Shared GPU {gpu} for '{vm}' (libvirt hook)"),
        why: format!("{gpu} stays the desktop's while '{vm}' is off (games, CUDA, render offload on Linux). At '{vm}'s start the hook stops {} if they run, checks that nothing else holds the card — and refuses the start, naming who does, when something does, rather than hang on a driver's usage count — then moves it to vfio-pci with every step time-limited; at the stop it gives the card back to its driver, starts what it stopped and logs whether the card came back healthy (config space, power state, driver) to {LOG}.", units.join(", ")),
        notes: vec![
            format!("A program that holds the card at the VM's start (a game, a CUDA job, ollama, a browser that opened every GPU) makes the start fail with its name in {LOG}: close it, or let the hook stop its unit (the page's \"may stop\" field; or in a terminal: --shared-stop UNIT)."),
            "NVIDIA: /dev/nvidiactl and nvidia-uvm are shared by every NVIDIA card, so a CUDA program on another NVIDIA card counts as a holder too.".into(),
            "AMD: cards from before RDNA (Polaris, Vega, Navi 10/12/14) may not reset after the VM (the reset bug): vendor-reset fixes those; the health line in the log says when a card did not come back.".into(),
        ],
        ..base
    })
}

/// The request's shared-mode part, said plainly (the plan's note).
pub fn describe(req: &Request) -> Option<String> {
    req.shared_gpu.then(|| "Shared GPU: the card stays on its own driver at boot (the desktop uses it while the VM is off); the hook lends it to the VM at its start and gives it back at its stop, without a reboot or a logout.".to_string())
}

fn script(vm: &str, funcs: &[String], units: &[String]) -> String {
    let funcs = funcs.join(" ");
    let gpu = funcs.rsplit(' ').next().unwrap_or("").to_string();
    let units = units.join(" ");
    format!(
        r#"#!/bin/sh
# Written by vfio-assistant (tune, change shared-gpu-hook): the GPU {gpu}
# is the desktop's while the VM '{vm}' is off and the VM's while it runs.
# At its start: the allowed units stopped, nobody else may hold the card
# (found by its device numbers in every process's open files and mappings;
# else the start fails, naming who does), each function moved to vfio-pci.
# At its stop (or a failed start): each function back on its driver, the
# units started again, the card's health logged. Every wait is bounded
# (timeout -k); a write the kernel holds is left behind, the start fails
# and the card is left where it is. What it cannot see: see look() below.
# libvirt runs it as: vfio-assistant-shared-gpu VM OPERATION SUB-OPERATION EXTRA.
# Undo: `sudo vfio-assistant tune undo ID` (`tune list` names it), or delete this file.
[ "$1" = '{vm}' ] || exit 0
R="${{VFIO_ASSISTANT_ROOT:-}}"
LOG="$R{LOG}"
STATE="$R/run/vfio-assistant-shared-gpu.state"
FUNCS='{funcs}'
GPU='{gpu}'
UNITS='{units}'
WAIT="${{VFIO_ASSISTANT_WAIT:-10}}"
VM='{vm}'
TAG=vfio-assistant-shared-gpu
SYS="$R/sys/bus/pci"
{prelude}driver_of() {{ d=$(readlink "$SYS/devices/$1/driver" 2>/dev/null) && echo "${{d##*/}}"; }}
# A sysfs `dev` file ("226:1") as stat prints it ("e2:1").
hexdev() {{ [ -r "$1" ] && IFS=: read -r ma mi < "$1" && printf '%x:%x ' "$ma" "$mi"; }}
# The card's device numbers: its DRM card and render nodes (sysfs says
# them), and NVIDIA's: its own /dev/nvidiaN (every one's when the driver
# does not say its minor) and nvidiactl and nvidia-modeset, shared by every
# NVIDIA card (major 195).
card_devs() {{
    for n in "$SYS/devices/$GPU"/drm/card* "$SYS/devices/$GPU"/drm/renderD*; do hexdev "$n/dev"; done
    if [ "$(driver_of "$GPU")" = nvidia ]; then
        mi=$(sed -n 's/^Device Minor:[[:space:]]*//p' "$R/proc/driver/nvidia/gpus/$GPU/information" 2>/dev/null)
        case "$mi" in ''|*[!0-9]*) printf 'c3:* ' ;; *) printf 'c3:%x ' "$mi" ;; esac
        printf 'c3:fe c3:ff '
    fi
}}
# The other functions' sound nodes (the card's HDMI audio).
sound_devs() {{
    for f in $FUNCS; do
        [ "$f" = "$GPU" ] && continue
        for n in "$SYS/devices/$f"/sound/card*/controlC* "$SYS/devices/$f"/sound/card*/pcmC*; do hexdev "$n/dev"; done
    done
}}
DEVS=$(card_devs)
# Who holds the card, as "pid:program(unit)" words; a look cut short by
# the bound answers "?" (then the start fails rather than guess).
holders() {{
    [ -n "$DEVS" ] || return 0
    look "$DEVS" || {{ echo "? (a look at every process's open files took over ${{WAIT}}s)"; return 0; }}
    while read -r p; do who_in "$p"; echo; done < "$OUT" | sort -u | tr '\n' ' '
}}
# Who has the other functions' sound nodes open (a sound server on the
# card's HDMI audio): said, not refused — ALSA's removal waits until they
# close, which a sound server does when the card goes (the unbind is
# time-limited all the same).
sound_holders() {{
    snd=$(sound_devs)
    [ -n "$snd" ] && look "$snd" || return 0
    while read -r p; do who "$p"; echo; done < "$OUT" | sort -u | tr '\n' ' '
}}
health() {{
    for f in $FUNCS; do
        cfg=$(od -An -N4 -tx4 "$SYS/devices/$f/config" 2>/dev/null | tr -d ' ')
        ps=$(cat "$SYS/devices/$f/power_state" 2>/dev/null || echo "?")
        drv=$(driver_of "$f")
        want=$(sed -n "s/^drv $f //p" "$STATE" 2>/dev/null)
        # sysfs wakes a runtime-suspended card to read it: all ones is a
        # card that does not answer. A driver back on it manages its power
        # itself (an idle card may sleep); without one, D3cold is stuck.
        if [ -z "$cfg" ] || [ "$cfg" = ffffffff ]; then
            log "NOT HEALTHY: $f config space ${{cfg:-unreadable}} (the card did not come back from its reset; vfio-assistant check --device $f says what helps)"
        elif [ -n "$want" ] && [ "$want" != none ] && [ "$drv" != "$want" ]; then
            log "NOT HEALTHY: $f on ${{drv:-no driver}}, not $want (power state $ps)"
        elif [ -z "$drv" ] && [ "$ps" = D3cold ]; then
            log "NOT HEALTHY: $f has no driver and is stuck in D3cold"
        else
            log "healthy: $f on ${{drv:-no driver}} ($ps, config space $cfg)"
        fi
    done
}}
# Give back what the state file records, newest first. After a write the
# kernel holds (STUCK) the card is not touched again — each write would
# hang the same way — and is left where it is until a reboot.
give_back() {{
    [ -f "$STATE" ] || {{ log "nothing recorded to give back"; return 0; }}
    sed -n '1!G;h;$p' "$STATE" | while read -r kind a b; do
        case "$kind" in
        drv)
            if [ -n "$STUCK" ]; then
                log "$a is left as it is (on $(driver_of "$a" || echo no driver)): a write to it is stuck in the kernel; a reboot frees it"
                continue
            fi
            step put "$SYS/devices/$a/driver_override" "" || true
            if [ "$(driver_of "$a")" = vfio-pci ]; then step put "$SYS/drivers/vfio-pci/unbind" "$a" || true; fi
            if [ "$b" != none ] && [ "$(driver_of "$a")" != "$b" ]; then
                step put "$SYS/drivers/$b/bind" "$a" || step put "$SYS/drivers_probe" "$a" || true
            fi
            ;;
        unit) step run systemctl start -- "$a" || true ;;
        esac
    done
    [ -n "$STUCK" ] || health
    rm -f "$STATE"
    log "the card is the desktop's again"
}}
fail() {{
    log "$1"
    log "the VM's start is stopped: the card stays with the host"
    give_back
    exit 1
}}

case "$2/$3" in
prepare/begin)
    : > "$STATE" || {{ log "cannot write $STATE"; exit 1; }}
    for u in $UNITS; do
        if bounded systemctl is-active --quiet -- "$u"; then
            echo "unit $u" >> "$STATE"
            step run systemctl stop -- "$u" || fail "could not stop $u within ${{WAIT}}s"
        fi
    done
    end=$(( $(date +%s) + WAIT ))
    while [ -n "$(holders)" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 1; done
    left=$(holders)
    [ -z "$left" ] || fail "still holding the GPU after ${{WAIT}}s (pid:program(unit)): $left— close it, or allow its unit to be stopped (tune --shared-stop UNIT, a unit seen holding the card)"
    snd=$(sound_holders)
    [ -z "$snd" ] || log "the card's HDMI audio is open (pid:program): $snd— a sound server lets go when the card goes"
    [ -d "$SYS/drivers/vfio-pci" ] || step run modprobe vfio-pci || fail "vfio-pci could not be loaded"
    for f in $FUNCS; do
        d=$(driver_of "$f")
        echo "drv $f ${{d:-none}}" >> "$STATE"
        [ "$d" = vfio-pci ] && continue
        step put "$SYS/devices/$f/driver_override" vfio-pci || fail "$f: driver_override"
        if [ -n "$d" ]; then
            step put "$SYS/devices/$f/driver/unbind" "$f" || fail "$f: $d did not let go within ${{WAIT}}s"
        fi
        step put "$SYS/drivers/vfio-pci/bind" "$f" || fail "$f: vfio-pci did not take it"
        [ "$(driver_of "$f")" = vfio-pci ] || fail "$f is on $(driver_of "$f"), not vfio-pci"
    done
    log "lent to the VM: $FUNCS on vfio-pci"
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

#[cfg(test)]
mod tests {
    use super::valid_unit;

    #[test]
    fn units_the_host_needs_are_never_stopped() {
        for ok in [
            "ollama.service",
            "nvidia-persistenced.service",
            "docker.service",
        ] {
            assert!(valid_unit(ok), "{ok}");
        }
        for bad in [
            "libvirtd.service",
            "virtqemud.service",
            "sshd.service",
            "gdm.service",
            "systemd-logind.service",
            "dbus.service",
            "x;reboot.service",
            "ollama",
            ".service",
            // Issue 41: none of these may be stopped at a VM's start.
            "firewalld.service",
            "nftables.service",
            "auditd.service",
            "apparmor.service",
            "networking.service",
            "wpa_supplicant.service",
            "wpa_supplicant@wlan0.service",
            "greetd.service",
            "user-runtime-dir@1000.service",
            "serial-getty@ttyS0.service",
            "-x.service",
            "--no-block.service",
            "@x.service",
        ] {
            assert!(!valid_unit(bad), "{bad}");
        }
    }
}
