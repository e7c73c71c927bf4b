//! CPU idle states (`/sys/devices/system/cpu/cpuN/cpuidle/stateK/`): an idle
//! CPU sleeps in the deepest state its idle governor thinks worth it, and
//! waking from that state takes the state's exit latency. For a VM whose
//! vCPUs idle between frames or audio buffers, that wake-up is paid again and
//! again: it shows as DPC latency in the guest. Read from the first CPU that
//! has states (the kernel gives every CPU the boot CPU's table).

use super::warnings::Warnings;
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdleState {
    /// `stateK` in sysfs.
    pub index: u32,
    /// `C1`, `C1E`, `C6`, `POLL`… (as the driver names it).
    pub name: String,
    /// Worst-case wake-up time in µs (the `latency` file).
    pub exit_latency_us: u64,
    /// Turned off for this CPU (the `disable` file is 1).
    pub disabled: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuIdle {
    /// `intel_idle`, `acpi_idle`, `haltpoll`, `none`…
    pub driver: Option<String>,
    pub governor: Option<String>,
    /// The CPU the states were read from.
    pub cpu: Option<u32>,
    pub states: Vec<IdleState>,
}

impl CpuIdle {
    /// The deepest state not turned off (the largest exit latency).
    pub fn deepest_enabled(&self) -> Option<&IdleState> {
        self.states
            .iter()
            .filter(|s| !s.disabled)
            .max_by_key(|s| s.exit_latency_us)
    }
}

/// One state directory's files, or None when it is not a usable state (a
/// file missing or not a number: skipped, with the reason in `warnings`).
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
    let disabled = warnings
        .take_opt(root.read_attr_opt(&attr("disable")))
        .is_some_and(|v| v != "0");
    Some(IdleState {
        index,
        name,
        exit_latency_us,
        disabled,
    })
}

/// The idle driver, governor and states; empty when the host has no cpuidle
/// (no driver: the CPUs only halt, or poll).
pub fn read_cpuidle(root: &HostRoot, online: &[u32], warnings: &mut Warnings) -> CpuIdle {
    let attr = |f: &str| {
        warnings_free(
            root.read_attr_opt(&HostPath::sys(&format!("devices/system/cpu/cpuidle/{f}"))),
        )
    };
    let mut idle = CpuIdle {
        driver: attr("current_driver"),
        governor: attr("current_governor").or_else(|| attr("current_governor_ro")),
        ..CpuIdle::default()
    };
    for &cpu in online {
        let dir = format!("devices/system/cpu/cpu{cpu}/cpuidle");
        let Ok(entries) = root.list_dir(&HostPath::sys(&dir)) else {
            continue;
        };
        let mut indexes: Vec<u32> = entries
            .iter()
            .filter_map(|e| e.strip_prefix("state")?.parse().ok())
            .collect();
        if indexes.is_empty() {
            continue;
        }
        indexes.sort_unstable();
        idle.cpu = Some(cpu);
        idle.states = indexes
            .into_iter()
            .filter_map(|k| read_state(root, &dir, k, warnings))
            .collect();
        break;
    }
    idle
}

/// A file that may be absent or unreadable without it being worth a warning
/// (the driver and governor names only label the evidence).
fn warnings_free(r: Result<Option<String>, crate::sysroot::ReadError>) -> Option<String> {
    r.ok().flatten().filter(|v| !v.is_empty())
}
