//! Dynamic isolation: a libvirt qemu hook that keeps the host's own tasks
//! off the VM's CPUs only while the VM runs, instead of `isolcpus` at boot
//! (the CPUs stay the host's when no VM needs them).
//!
//! The hook is one file of ours in `/etc/libvirt/hooks/qemu.d/` (libvirt ≥
//! 6.5 runs every executable there, in name order, next to the single
//! `hooks/qemu` script people may already have: neither is touched by the
//! other). At the VM's `prepare begin` it narrows `AllowedCPUs` of
//! `system.slice`, `user.slice` and `init.scope` to the housekeeping CPUs with
//! `systemctl set-property --runtime`; at `release end` it gives them every
//! CPU back. The VM's own tasks live in `machine.slice` and are not narrowed.
//! It never stops a start: a failed `systemctl` is said on stderr (libvirt
//! logs it) and the hook still exits 0.
//!
//! libvirt looks for hooks when its daemon starts (`virHookInitialize`), so
//! a hook added where there was none is found only after a daemon restart:
//! the change restarts the running daemon (`virtqemud` where the modular
//! daemons run, else `libvirtd`). Running VMs keep running through it.

use super::command::{Cmd, UnitVerb};
use super::facts::TuneFacts;
use super::kinds::{ChangeId, Ctx, Kind, PlanError, Planned, vm_name};
use super::model::{Change, CommandStep, Effect, FileChange, Verify};
use super::paths::ISOLATION_HOOK as HOOK;
use crate::parse::cpulist::format_cpulist;

/// The shell both GPU hooks (single and shared) run after their own
/// variables (`R`, `VM`, `TAG`, `LOG`, `WAIT`): a log that prints data as
/// data (`printf`, never `echo`: dash's `echo` reads backslashes, so a
/// process named `a\cb` would end the line and hide the holders after it);
/// every wait hard-bounded (`bounded`: `timeout -k`, and a step the kernel
/// holds left behind rather than waited on); holders found by the device,
/// not the path (`look`); a process's name and unit made safe to log (any
/// local user names their own processes and scopes).
pub(crate) const GPU_HOOK_PRELUDE: &str = r#"# Only the system's programs and its word splitting: libvirt starts hooks
# with a clean environment of its own; the tests (VFIO_ASSISTANT_ROOT) put
# stand-ins first on PATH.
[ -n "$R" ] || PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
unset IFS
# After $WAIT seconds a step gets TERM, then $KILL seconds more, then KILL.
KILL="${VFIO_ASSISTANT_KILL:-2}"
log() { printf '%s %s %s\n' "$(date '+%F %T' 2>/dev/null)" "$VM" "$*" >> "$LOG" 2>/dev/null; printf '%s: %s\n' "$TAG" "$*" >&2; }
# Each step's output and exit code, in a folder of root's own.
T=$(mktemp -d "$R/run/$TAG.XXXXXX") || { log "cannot make a folder in $R/run"; exit 1; }
trap 'rm -rf "$T"' EXIT
STUCK=
step() { if "$@" 2>>"$LOG"; then log "ok: $*"; else log "FAILED: $*"; return 1; fi; }
# bounded CMD…: CMD with its output in $OUT and its errors in the log, given
# $WAIT s, then TERM, then $KILL s, then KILL — `timeout -k` signals CMD's
# whole process group, so a child that ignores TERM is killed all the same.
# What cannot be killed at all (a write the kernel holds: a driver that
# never lets go) is not waited for: one second after its KILL it is left
# behind (its output goes nowhere libvirt waits on), STUCK says so, and the
# step fails with 125 — the VM's start is given up, not the host.
bounded() {
    # A name of its own (a step left behind may still write its files);
    # underscored names, not to clobber the caller's variables.
    _bf=$(mktemp "$T/step.XXXXXX") || return 1
    OUT="$_bf.out"
    # A program of its own, not a subshell: a subshell keeps the shell's
    # saved copies of its output (a function's redirection), libvirt's
    # pipe among them, and libvirt reads that pipe to its end.
    sh -c 'out=$1 rc=$2 kill=$3 wait=$4 log=$5; shift 5
        timeout -k "$kill" "$wait" "$@" > "$out" 2>> "$log" < /dev/null
        echo $? > "$rc"' bounded "$OUT" "$_bf.rc" "$KILL" "$WAIT" "$LOG" "$@" > /dev/null 2>&1 < /dev/null &
    _bpid=$!
    _bgive_up=$(( $(date +%s) + WAIT + KILL + 1 ))
    # Most steps end at once: a short first nap, then tenths.
    _bnap=0.02
    while [ ! -s "$_bf.rc" ]; do
        if [ "$(date +%s)" -gt "$_bgive_up" ]; then
            STUCK="$STUCK $1"
            log "LEFT BEHIND: '$*' had not ended $((WAIT + KILL + 1))s after it started, not even killed (the kernel holds it): not waited for"
            return 125
        fi
        sleep "$_bnap"
        _bnap=0.1
    done
    wait "$_bpid" 2>/dev/null
    return "$(cat "$_bf.rc")"
}
# A command that may not take longer than the bound.
run() { bounded "$@"; }
# A sysfs write that may not take longer than the bound.
put() { bounded sh -c 'printf "%s\n" "$2" > "$1"' put "$1" "$2"; }
# Text a process chose (its name, its scope) as one loggable word.
word() { tr -d '\n' | tr -c '[:alnum:]._:@+-' '_'; }
# /proc/PID → "PID:program".
who() { printf '%s:%s' "${1##*/}" "$(head -c 64 "$1/comm" 2>/dev/null | word)"; }
# /proc/PID → its cgroup (cgroup v2's line, or v1's systemd one).
cgroup_of() { sed -n 's|^0::||p; s|^[0-9]*:name=systemd:||p' "$1/cgroup" 2>/dev/null | head -n 1; }
# /proc/PID → "PID:program(unit)", the unit or scope it runs in.
who_in() { _wu=$(cgroup_of "$1"); _wu=${_wu##*/}; printf '%s(%s)' "$(who "$1")" "$(printf '%s' "${_wu:-?}" | word)"; }
# look DEVS: the processes holding one of DEVS — device numbers as stat
# prints them (hex major:minor; "e2:*" is every minor of 226) — one
# "/proc/PID" a line in $OUT. Found by the device, not the path: every
# process's open files (fd) and mappings (map_files: mapped, its fd closed
# since) are followed to the file itself and matched by its device number,
# whatever its name, whatever mount namespace it was opened in; a node of
# the same name that is not the device (a tmpfs /dev made up in a user
# namespace) is not it. One find over every process, cut by the bound:
# a look that did not finish fails (nobody can say who holds the card).
# What it cannot see: a buffer shared as a dma-buf fd (no node), a GEM
# object mapped through shmem, the kernel's own users (fbcon, another
# driver importing the card's buffers), an fd in flight in a unix socket,
# processes outside this PID namespace; and a process that opens the card
# after the look.
look() {
    bounded sh -c 'find -L "$@" -mindepth 1 -maxdepth 1 -type c -exec stat -L -c "%t:%T %n" {} + 2>/dev/null; exit 0' \
        look "$R"/proc/[0-9]*/fd "$R"/proc/[0-9]*/map_files || return 1
    while read -r _ld _lp; do
        case " $1 " in *" $_ld "*|*" ${_ld%%:*}:* "*) echo "${_lp%/*/*}" ;; esac
    done < "$OUT" | sort -u > "$T/held"
    OUT="$T/held"
}
"#;

pub(crate) fn plan(cx: &Ctx, out: &mut Planned) -> Result<(), PlanError> {
    if !cx.req.isolation_hook {
        return Ok(());
    }
    let name = vm_name(cx.req)?;
    if cx.vm.is_empty() || cx.hk.is_empty() {
        return Err(PlanError::Hook("the isolation hook: it needs the VM's CPUs (its vCPUs; or in a terminal: --vcpus N or --cpus LIST) and at least one CPU left to the host".into()));
    }
    if !cx.systemd {
        return Err(PlanError::Hook(
            "the isolation hook: it needs systemd (AllowedCPUs), and this host does not run it"
                .into(),
        ));
    }
    out.changes
        .extend(isolation_hook(cx.facts, name, cx.vm, cx.hk));
    Ok(())
}

/// The units whose tasks are the host's own.
const UNITS: &str = "system.slice user.slice init.scope";

pub use super::kinds::valid_vm_name;

fn script(vm: &str, vm_cpus: &str, host_cpus: &str, all_cpus: &str) -> String {
    format!(
        r#"#!/bin/sh
# Written by vfio-assistant (tune, change isolation-hook): dynamic isolation.
# While the VM '{vm}' runs, the host's own tasks ({UNITS})
# may use only CPUs {host_cpus}, which leaves CPUs {vm_cpus} to the VM; when it
# has stopped they get every CPU ({all_cpus}) back.
# libvirt runs it as: vfio-assistant-isolate VM OPERATION SUB-OPERATION EXTRA.
# Undo: `sudo vfio-assistant tune undo ID` (`tune list` names it), or delete this file.
[ "$1" = '{vm}' ] || exit 0
case "$2/$3" in
    prepare/begin) cpus='{host_cpus}' ;;
    release/end) cpus='{all_cpus}' ;;
    *) exit 0 ;;
esac
for unit in {UNITS}; do
    systemctl set-property --runtime -- "$unit" "AllowedCPUs=$cpus" ||
        echo "vfio-assistant-isolate: could not set AllowedCPUs=$cpus on $unit" >&2
done
# Never stop the VM's start: isolation is a help, not a condition.
exit 0
"#
    )
}

/// The hook change for the VM `vm` on CPUs `vm_cpus`, the host keeping
/// `hk`; `None` when our hook already says exactly this.
pub fn isolation_hook(f: &TuneFacts, vm: &str, vm_cpus: &[u32], hk: &[u32]) -> Option<Change> {
    let mut all: Vec<u32> = vm_cpus.iter().chain(hk).copied().collect();
    all.sort_unstable();
    all.dedup();
    let (v, h, a) = (
        format_cpulist(vm_cpus),
        format_cpulist(hk),
        format_cpulist(&all),
    );
    let base = hook_change(f, Kind::IsolationHook, HOOK, script(vm, &v, &h, &a))?;
    Some(Change {
        title: format!("Isolate CPUs {v} only while '{vm}' runs (libvirt hook)"),
        why: format!("A libvirt hook narrows the host's own tasks to CPUs {h} when '{vm}' starts and gives them all CPUs back when it stops: the VM's CPUs are quiet while it runs and the host's when it does not, without isolcpus at boot (nohz_full and rcu_nocbs still need a boot)."),
        fixes: vec!["cpu.isolation".into()],
        notes: vec![
            "Needs the cpuset controller of cgroup v2 (the check cgroup.controllers says whether it is there).".into(),
            format!("While '{vm}' runs, desktop programs get only CPUs {h}."),
        ],
        ..base
    })
}

/// A hook of ours as a change: the script at `path` (`None` when it already
/// says `after`), found by libvirt's daemon after a restart (running VMs
/// keep running), checked executable, gone with the restart again on undo.
/// The kind's planner adds its title, why and notes.
pub(super) fn hook_change(f: &TuneFacts, kind: Kind, path: &str, after: String) -> Option<Change> {
    let before = f.file(path).map(str::to_string);
    if before.as_deref() == Some(after.as_str()) {
        return None;
    }
    let unit = super::play::daemon(f);
    let restart = |why: &str| {
        CommandStep::new(
            Cmd::Systemctl {
                verb: UnitVerb::TryRestart,
                unit,
            },
            why,
        )
    };
    Some(Change {
        id: ChangeId::of(kind),
        effect: Effect::AtVmStart,
        files: vec![FileChange {
            path: path.into(),
            before,
            after: Some(after),
        }],
        commands: vec![restart(
            "libvirt finds hook scripts when its daemon starts; running VMs keep running",
        )],
        undo_commands: vec![restart("forgets the removed hook")],
        verify: vec![Verify::Executable { path: path.into() }],
        ..Change::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_break_out_of_the_script_are_refused() {
        assert!(valid_vm_name("win11"));
        assert!(valid_vm_name("Win-11_gaming.2+x"));
        for bad in [
            "",
            "a b",
            "x'y",
            "$(reboot)",
            "-x",
            "a;b",
            "ä",
            &"n".repeat(65),
        ] {
            assert!(!valid_vm_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_script_narrows_and_gives_back_and_never_fails_a_start() {
        let f = TuneFacts::default();
        let c = isolation_hook(&f, "win11", &[2, 3, 4, 5], &[0, 1, 6, 7]).unwrap();
        let s = c.files[0].after.as_deref().unwrap();
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("prepare/begin) cpus='0-1,6-7'"));
        assert!(s.contains("release/end) cpus='0-7'"));
        assert!(s.contains("[ \"$1\" = 'win11' ] || exit 0"));
        assert!(s.trim_end().ends_with("exit 0"));
        assert_eq!(
            c.commands[0].argv(),
            ["systemctl", "try-restart", "libvirtd.service"]
        );
        // Written already: nothing to do.
        let mut f2 = TuneFacts::default();
        f2.files.insert(HOOK.into(), Some(s.to_string()));
        f2.markers.insert("/run/libvirt/virtqemud-sock".into());
        assert!(isolation_hook(&f2, "win11", &[2, 3, 4, 5], &[0, 1, 6, 7]).is_none());
        let c = isolation_hook(&f2, "win10", &[2, 3, 4, 5], &[0, 1, 6, 7]).unwrap();
        assert_eq!(c.commands[0].argv()[2], "virtqemud.service");
    }

    /// The script runs as libvirt would run it, with a `systemctl` of ours
    /// on PATH that records its arguments.
    #[test]
    fn the_script_runs_under_sh() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let fake = dir.path().join("systemctl");
        std::fs::write(
            &fake,
            format!("#!/bin/sh\necho \"$@\" >> '{}'\n", log.display()),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let hook = dir.path().join("hook");
        let c = isolation_hook(&TuneFacts::default(), "win11", &[1], &[0]).unwrap();
        std::fs::write(&hook, c.files[0].after.as_deref().unwrap()).unwrap();
        let run = |args: &[&str]| {
            std::process::Command::new("sh")
                .arg(&hook)
                .args(args)
                .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
                .status()
                .unwrap()
        };
        assert!(run(&["other", "prepare", "begin", "-"]).success());
        assert!(!log.exists(), "another VM's start changes nothing");
        assert!(run(&["win11", "prepare", "begin", "-"]).success());
        assert!(run(&["win11", "started", "begin", "-"]).success());
        assert!(run(&["win11", "release", "end", "-"]).success());
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert_eq!(
            lines[0],
            "set-property --runtime -- system.slice AllowedCPUs=0"
        );
        assert_eq!(
            lines[5],
            "set-property --runtime -- init.scope AllowedCPUs=0-1"
        );
        // A failing systemctl does not stop the start.
        std::fs::write(&fake, "#!/bin/sh\nexit 1\n").unwrap();
        assert!(run(&["win11", "prepare", "begin", "-"]).success());
    }
}
