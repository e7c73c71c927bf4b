//! CPU idle states (`/sys/devices/system/cpu/cpuN/cpuidle/stateK/`): an idle
//! CPU sleeps in the deepest state its idle governor thinks worth it, and
//! waking from that state takes the state's exit latency. For a VM whose
//! vCPUs idle between frames or audio buffers, that wake-up is paid again and
//! again: it shows as DPC latency in the guest.
//!
//! The state table is read from the first online CPU that has one (on x86
//! every CPU has the boot CPU's table; ARM clusters may differ, and then the
//! first cluster's table stands for all); which states are turned off is read
//! per CPU, since users turn them off on the VM's CPUs only. A program
//! holding `/dev/cpu_dma_latency` (tuned, cyclictest) limits every CPU to the
//! states that wake within its value.

use super::warnings::Warnings;
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;

/// Wake-up times up to this (C1/C1E class) do not show in a guest's latency;
/// "shallow idle only" means states within it.
pub const SHALLOW_IDLE_US: u64 = 10;

/// The PM QoS default: no limit.
const NO_QOS_LIMIT: i32 = 2_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdleState {
    /// `stateK` in sysfs.
    pub index: u32,
    /// `C1`, `C1E`, `C6`, `POLL`… (as the driver names it).
    pub name: String,
    /// Worst-case wake-up time in µs (the `latency` file).
    pub exit_latency_us: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuIdle {
    /// `intel_idle`, `acpi_idle`, `haltpoll`, `none`…
    pub driver: Option<String>,
    pub governor: Option<String>,
    /// The CPU the state table was read from (None: no CPU has one).
    pub cpu: Option<u32>,
    pub states: Vec<IdleState>,
    /// Each CPU with idle states and the state indexes turned off on it.
    pub disabled: Vec<(u32, Vec<u32>)>,
    /// The limit a program holds on `/dev/cpu_dma_latency`, in µs (None: no
    /// limit, or not readable: root only).
    pub qos_limit_us: Option<u64>,
}

impl CpuIdle {
    /// The deepest state `cpu` may enter: not turned off there and within the
    /// PM QoS limit. None when it has no idle states or may use none (polls).
    pub fn deepest_for(&self, cpu: u32) -> Option<&IdleState> {
        let off = self
            .disabled
            .iter()
            .find(|(c, _)| *c == cpu)
            .map(|(_, d)| d.as_slice())?;
        self.states
            .iter()
            .filter(|s| !off.contains(&s.index))
            .filter(|s| self.qos_limit_us.is_none_or(|l| s.exit_latency_us <= l))
            .max_by_key(|s| s.exit_latency_us)
    }
}

/// One state's name and exit latency, or None when either file is missing or
/// not a number (skipped, with the reason in `warnings`).
fn read_state(
    root: &HostRoot,
    dir: &str,
    index: u32,
    warnings: &mut Warnings,
) -> Option<IdleState> {
    let attr = |f: &str| HostPath::sys(&format!("{dir}/state{index}/{f}"));
    let name = warnings.take(root.read_attr(&attr("name")))?;
    let exit_latency_us =
        warnings.take_opt(root.read_parsed(&attr("latency"), |t| t.parse::<u64>()))?;
    Some(IdleState {
        index,
        name,
        exit_latency_us,
    })
}

/// The `stateK` indexes under a CPU's cpuidle directory, sorted; None when it
/// has none.
fn state_indexes(root: &HostRoot, dir: &str) -> Option<Vec<u32>> {
    let entries = root.list_dir(&HostPath::sys(dir)).ok()?;
    let mut indexes: Vec<u32> = entries
        .iter()
        .filter_map(|e| e.strip_prefix("state")?.parse().ok())
        .collect();
    indexes.sort_unstable();
    (!indexes.is_empty()).then_some(indexes)
}

/// The idle driver, governor, state table, what is turned off per CPU and
/// the PM QoS limit; empty when the host has no cpuidle (the CPUs only halt,
/// or poll).
pub fn read_cpuidle(root: &HostRoot, online: &[u32], warnings: &mut Warnings) -> CpuIdle {
    let attr = |f: &str| {
        root.read_attr_opt(&HostPath::sys(&format!("devices/system/cpu/cpuidle/{f}")))
            .ok()
            .flatten()
            .filter(|v| !v.is_empty())
    };
    let mut idle = CpuIdle {
        driver: attr("current_driver"),
        governor: attr("current_governor").or_else(|| attr("current_governor_ro")),
        ..CpuIdle::default()
    };
    for &cpu in online {
        let dir = format!("devices/system/cpu/cpu{cpu}/cpuidle");
        let Some(indexes) = state_indexes(root, &dir) else {
            continue;
        };
        if idle.cpu.is_none() {
            idle.cpu = Some(cpu);
            idle.states = indexes
                .iter()
                .filter_map(|&k| read_state(root, &dir, k, warnings))
                .collect();
        }
        // `disable` is world-readable; an unreadable one counts as on.
        let off: Vec<u32> = indexes
            .into_iter()
            .filter(|k| {
                root.read_attr(&HostPath::sys(&format!("{dir}/state{k}/disable")))
                    .is_ok_and(|v| v != "0")
            })
            .collect();
        idle.disabled.push((cpu, off));
    }
    // Root only; a capture holds an empty placeholder: then no limit known.
    if let Ok(b) = root.read_bytes(&HostPath::dev("cpu_dma_latency"), 4)
        && let Ok(raw) = <[u8; 4]>::try_from(b.as_slice())
    {
        let v = i32::from_ne_bytes(raw);
        idle.qos_limit_us = (0..NO_QOS_LIMIT)
            .contains(&v)
            .then(|| u64::from(v.unsigned_abs()));
    }
    idle
}
