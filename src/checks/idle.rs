//! CPU idle states: how long the CPUs the VM runs on take to wake from the
//! deepest sleep they are allowed. A trade (power and heat against wake-up
//! latency), so this says what it costs and how to measure it, not "wrong".

use super::model::{Finding, Status};
use crate::host::HostSnapshot;
use crate::sysroot::HostPath;

/// Wake-up times up to this (C1/C1E class) do not show in a guest's latency.
const SHALLOW_US: u64 = 10;

pub fn check(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let idle = &s.system.cpuidle;
    let (Some(cpu), Some(deepest)) = (idle.cpu, idle.deepest_enabled()) else {
        // No idle driver or states: the CPUs only halt or poll; nothing to say.
        return;
    };
    let dir = HostPath::sys(&format!("devices/system/cpu/cpu{cpu}/cpuidle")).to_string();
    let listed: Vec<String> = idle
        .states
        .iter()
        .map(|st| {
            format!(
                "{} {} µs{}",
                st.name,
                st.exit_latency_us,
                if st.disabled { " (off)" } else { "" }
            )
        })
        .collect();
    let mut f = Finding::new(
        "cpu.idle_states",
        format!(
            "CPU idle states are shallow: the deepest in use, {}, wakes in {} µs",
            deepest.name, deepest.exit_latency_us
        ),
        Status::Pass,
    )
    .evidence(format!("{dir}/state*/{{name,latency,disable}}"), listed.join(", "))
    .why("An idle CPU sleeps in the deepest state it is allowed, and waking from it takes that state's exit latency. A vCPU that idles between frames or audio buffers pays it on every wake-up: it shows as DPC latency and audio crackle in the guest. Deep states save power and heat, so this is a trade, not a fault. The latencies are what the idle driver declares; `vfio-assistant latency --cpus LIST --compare-idle` measures what they really cost here.");
    if let Some(d) = &idle.driver {
        let gov = idle.governor.as_deref().unwrap_or("?");
        f = f.evidence(
            HostPath::sys("devices/system/cpu/cpuidle/current_driver").to_string(),
            format!("{d} (governor {gov})"),
        );
    }
    if let Some(cl) = &s.kernel.cmdline {
        for key in ["intel_idle.max_cstate", "processor.max_cstate", "idle"] {
            if let Some(v) = cl.value(key) {
                f = f.evidence(HostPath::proc("cmdline").to_string(), format!("{key}={v}"));
            }
        }
    }
    if deepest.exit_latency_us > SHALLOW_US {
        f.status = Status::Info;
        f.title = format!(
            "Deep CPU idle states are in use: {} takes up to {} µs to wake",
            deepest.name, deepest.exit_latency_us
        );
        f = f.fix("Measure before changing anything: `vfio-assistant latency --cpus LIST --compare-idle` on the CPUs the VM will use measures them as configured and held out of deep idle states. If the p99 drops a lot when held: keep those CPUs out of deep states while the VM runs (`tuned-adm profile latency-performance`, or write 1 to /sys/devices/system/cpu/cpuN/cpuidle/stateK/disable for the deep states on the VM's CPUs from a libvirt hook, and 0 when it stops), or for good add intel_idle.max_cstate=1 (Intel) or processor.max_cstate=1 (AMD, acpi_idle) to the kernel command line. The cost: more power and heat while idle.");
    }
    out.push(f);
}
