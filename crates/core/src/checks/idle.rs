//! CPU idle states: how long the CPUs a VM runs on take to wake from the
//! deepest sleep they are allowed. A trade (power and heat against wake-up
//! latency), so this says what it costs and how to measure it, not "wrong".
//! The CPUs judged are the isolated ones when there are any (set aside for
//! the VM), otherwise every CPU with idle states.

use super::model::{Action, Finding, Status};
use crate::host::HostSnapshot;
use crate::host::cpuidle::{IdleState, SHALLOW_IDLE_US};
use crate::parse::cpulist::format_cpulist;
use crate::sysroot::HostPath;
use std::collections::BTreeMap;

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "idle",
    ids: &[super::CheckId("cpu.idle_states")],
    run: Some(|s, _, out| check(s, out)),
};

pub fn check(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let idle = &s.system.cpuidle;
    let Some(cpu) = idle.cpu else {
        // No idle driver or states: the CPUs only halt or poll; nothing to say.
        return;
    };
    let dir = HostPath::sys(&format!("devices/system/cpu/cpu{cpu}/cpuidle"));
    let why = "An idle CPU sleeps in the deepest state it is allowed, and waking from it takes that state's exit latency. A vCPU that idles between frames or audio buffers pays it on every wake-up: it shows as DPC latency and audio crackle in the guest. Deep states save power and heat, so this is a trade, not a fault. The latencies are what the idle driver declares; the latency probe, run with shallow states only and as configured, measures what they really cost here.";
    if idle.states.is_empty() {
        out.push(
            Finding::new(
                "cpu.idle_states",
                "Could not read the CPU idle states",
                Status::Unknown,
            )
            .evidence(format!("{dir}/state*/{{name,latency}}"), "unreadable")
            .why(why),
        );
        return;
    }
    let isolated: Vec<u32> = s
        .topology
        .online_cpus()
        .filter(|c| c.isolated || c.nohz_full)
        .map(|c| c.id)
        .collect();
    let judged: Vec<u32> = idle
        .disabled
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| isolated.is_empty() || isolated.contains(c))
        .collect();
    let which = if isolated.is_empty() {
        "the CPUs"
    } else {
        "the isolated CPUs"
    };
    // CPUs grouped by the deepest state they may enter (None: they poll).
    let mut groups: BTreeMap<Option<(u64, &str)>, Vec<u32>> = BTreeMap::new();
    for &c in &judged {
        let key = idle
            .deepest_for(c)
            .map(|st: &IdleState| (st.exit_latency_us, st.name.as_str()));
        groups.entry(key).or_default().push(c);
    }
    let said: Vec<String> = groups
        .iter()
        .map(|(k, cpus)| match k {
            Some((us, name)) => format!("CPUs {}: {name} ({us} µs)", format_cpulist(cpus)),
            None => format!("CPUs {}: none (they poll)", format_cpulist(cpus)),
        })
        .collect();
    let table: Vec<String> = idle
        .states
        .iter()
        .map(|st| format!("{} {} µs", st.name, st.exit_latency_us))
        .collect();
    let mut f = Finding::new("cpu.idle_states", "", Status::Pass)
        .evidence(format!("{dir}/state*/{{name,latency}}"), table.join(", "))
        .evidence(
            HostPath::sys("devices/system/cpu/cpu*/cpuidle/state*/disable").to_string(),
            format!("deepest allowed: {}", said.join("; ")),
        )
        .why(why);
    if let Some(d) = &idle.driver {
        let gov = idle.governor.as_deref().unwrap_or("?");
        f = f.evidence(
            HostPath::sys("devices/system/cpu/cpuidle/current_driver").to_string(),
            format!("{d} (governor {gov})"),
        );
    }
    if let Some(l) = idle.qos_limit_us {
        f = f.evidence(
            HostPath::dev("cpu_dma_latency").to_string(),
            format!("{l} µs, held by a program (tuned, a game launcher, cyclictest)"),
        );
    }
    if let Some(cl) = &s.kernel.cmdline {
        for key in ["intel_idle.max_cstate", "processor.max_cstate", "idle"] {
            if let Some(v) = cl.value(key) {
                f = f.evidence(super::cmdline::path(), format!("{key}={v}"));
            }
        }
    }
    // The deepest state any judged CPU may enter.
    let deepest = groups.keys().flatten().max();
    match deepest {
        Some(&(us, name)) if us > SHALLOW_IDLE_US => {
            f.status = Status::Info;
            f.title = format!(
                "Deep CPU idle states are in use: {name} takes up to {us} µs to wake ({which})"
            );
            let disable = HostPath::sys("devices/system/cpu/cpuN/cpuidle/stateK/disable");
            f = f.fix(format!("Measure before changing anything: the latency probe on the CPUs the VM will use, as configured and with shallow idle states only. If the p99 drops a lot: keep those CPUs in shallow states while the VM runs (`tuned-adm profile latency-performance`, or write 1 to {disable} for the states slower than {SHALLOW_IDLE_US} µs on the VM's CPUs from a libvirt hook, and 0 when it stops), or for good add intel_idle.max_cstate=1 (Intel) or processor.max_cstate=1 (AMD, acpi_idle) to the kernel command line. The cost: more power and heat while idle."))
            .action(Action::MeasureLatency, "sudo vfio-assistant latency --cpus LIST --compare-idle");
        }
        Some(&(us, name)) => {
            f.title = format!(
                "CPU idle states are shallow: the deepest {which} may use, {name}, wakes in {us} µs"
            );
        }
        None => {
            f.title = format!(
                "No idle state is allowed on {which}: they poll (lowest latency, most power)"
            );
        }
    }
    out.push(f);
}
