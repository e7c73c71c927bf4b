//! Windows' own settings that decide how a passthrough VM plays, read
//! through the guest agent: the power plan (Balanced parks cores and lowers
//! clocks on vCPUs that are the host's dedicated CPUs), the system timer's
//! resolution (what games ask for, 1 ms, must be there), and, in a VM with
//! Looking Glass, its host service running and the last error in its log.

use crate::checks::model::{Finding, Status};
use crate::guest::Agent;
use crate::guest::windows::{
    ServiceState, active_scheme, last_log_error, service_state, timer_resolution,
};
use std::time::Duration;

const POWERCFG: &str = "C:\\Windows\\System32\\powercfg.exe";
const SC: &str = "C:\\Windows\\System32\\sc.exe";
const POWERSHELL: &str = "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe";
const WAIT: Duration = Duration::from_secs(20);
/// The Looking Glass host's Windows service and its log.
pub const LG_SERVICE: &str = "Looking Glass (host)";
const LG_LOG: &str = "C:\\ProgramData\\Looking Glass (host)\\looking-glass-host.txt";
/// ntdll's NtQueryTimerResolution, printed as `MIN MAX CURRENT`.
pub const TIMER_QUERY: &str = "Add-Type -Namespace VfioA -Name Timer -MemberDefinition '[DllImport(\"ntdll.dll\")] public static extern int NtQueryTimerResolution(out uint min, out uint max, out uint cur);'; $a=0; $b=0; $c=0; [void][VfioA.Timer]::NtQueryTimerResolution([ref]$a, [ref]$b, [ref]$c); \"$a $b $c\"";

const HIGH_PERFORMANCE: &str = "8c5e7fda-e8bf-4a96-9a85-a6e23a8c635c";
const ULTIMATE: &str = "e9a42b02-d5df-448d-aa00-03f14749eb61";

fn unknown(id: &str, title: &str, what: &str, e: impl std::fmt::Display) -> Finding {
    Finding::new(id, title, Status::Unknown)
        .evidence(
            what,
            e.to_string().lines().next().unwrap_or_default().to_string(),
        )
        .why("The check runs a program in Windows through the guest agent.")
}

/// The power plan.
pub fn power_finding(agent: &Agent) -> Finding {
    let title = "Windows' power plan could not be read";
    let out = match agent.exec(POWERCFG, &["/getactivescheme"], WAIT) {
        Ok(o) => o,
        Err(e) => return unknown("guest.power", title, "powercfg /getactivescheme", e),
    };
    let Some((guid, name)) = active_scheme(&out.stdout) else {
        return unknown(
            "guest.power",
            title,
            "powercfg /getactivescheme",
            out.stdout.trim(),
        );
    };
    let f = |t: String, s| {
        Finding::new("guest.power", t, s)
            .evidence("powercfg /getactivescheme", format!("{guid} ({name})"))
            .why("Under Balanced or Power saver Windows parks cores and lowers clocks between bursts; in a VM whose vCPUs are host CPUs set aside for it, that only adds wake-up latency (stutter) and saves no power.")
    };
    if guid == HIGH_PERFORMANCE || guid == ULTIMATE {
        f(format!("Windows runs the {name} power plan"), Status::Pass)
    } else {
        f(format!("Windows runs the {name} power plan"), Status::Warn)
            .fix("In Windows, as administrator: powercfg /setactive SCHEME_MIN (High performance), or choose it under Control Panel → Power Options.")
    }
}

/// The system timer's resolution.
pub fn timer_finding(agent: &Agent) -> Finding {
    let title = "Windows' timer resolution could not be read";
    let what = "NtQueryTimerResolution (PowerShell)";
    let out = match agent.exec(
        POWERSHELL,
        &["-NoProfile", "-NonInteractive", "-Command", TIMER_QUERY],
        WAIT,
    ) {
        Ok(o) => o,
        Err(e) => return unknown("guest.timer", title, what, e),
    };
    let Some((coarsest, finest, current)) = timer_resolution(&out.stdout) else {
        return unknown(
            "guest.timer",
            title,
            what,
            format!("{} {}", out.stdout.trim(), out.stderr.trim()),
        );
    };
    let ms = |n: u32| format!("{:.3} ms", f64::from(n) / 10_000.0);
    let evidence = format!(
        "now {}, finest {}, coarsest {}",
        ms(current),
        ms(finest),
        ms(coarsest)
    );
    let f = Finding::new("guest.timer", format!("Windows' timer runs at {} (finest {})", ms(current), ms(finest)), if finest <= 10_000 { Status::Pass } else { Status::Warn })
        .evidence(what, evidence)
        .why("Games and audio ask Windows for a 1 ms timer; each tick is an interrupt the host delivers, cheap with the Hyper-V synthetic timer (stimer) and the hypervclock the VM is given.");
    if finest > 10_000 {
        f.fix("The guest cannot reach 1 ms: give the VM the Hyper-V synthetic timers (the Tuning of the domain adds stimer and hypervclock), then restart Windows.")
    } else {
        f
    }
}

/// The Looking Glass host service and its log's last error.
pub fn looking_glass_finding(agent: &Agent) -> Finding {
    let what = format!("sc query \"{LG_SERVICE}\"");
    let out = match agent.exec(SC, &["query", LG_SERVICE], WAIT) {
        Ok(o) => o,
        Err(e) => {
            return unknown(
                "guest.looking_glass",
                "The Looking Glass host service could not be read",
                &what,
                e,
            );
        }
    };
    let why = "The Looking Glass client on the host shows what the host application in Windows captures: without its service running, the client waits on a blank window.";
    let log_error = || {
        agent
            .exec(
                POWERSHELL,
                &[
                    "-NoProfile",
                    "-NonInteractive",
                    "-Command",
                    &format!("Get-Content -Tail 200 -LiteralPath '{LG_LOG}'"),
                ],
                WAIT,
            )
            .ok()
            .and_then(|o| last_log_error(&o.stdout))
    };
    match service_state(&format!("{}\n{}", out.stdout, out.stderr)) {
        Some(Some(ServiceState::Running)) => {
            let f = Finding::new("guest.looking_glass", "The Looking Glass host service runs in Windows", Status::Pass)
                .evidence(what, "RUNNING")
                .why(why);
            match log_error() {
                Some(e) => f.evidence(LG_LOG, format!("last error: {e}")),
                None => f,
            }
        }
        Some(Some(ServiceState::Other(state))) => {
            let last = log_error().unwrap_or_else(|| "no [E] line in its log".into());
            Finding::new("guest.looking_glass", format!("The Looking Glass host service is {}", state.to_lowercase()), Status::Fail)
                .evidence(what, state)
                .evidence(LG_LOG, last)
                .why(why)
                .fix("In Windows: Services → Looking Glass (host) → Start; its log's last error above says why it stopped (an IVSHMEM device missing: the VM's shared memory; a capture error: the GPU's driver).")
        }
        Some(None) => Finding::new("guest.looking_glass", "The Looking Glass host is not installed in Windows", Status::Fail)
            .evidence(what, "FAILED 1060: no such service")
            .why(why)
            .fix("Install the Looking Glass host in Windows, the same version as the client on this host (its installer's /S installs it silently; an unattended install does it at the first logon when given the installer)."),
        None => unknown("guest.looking_glass", "The Looking Glass host service could not be read", &what, out.stdout.trim()),
    }
}
