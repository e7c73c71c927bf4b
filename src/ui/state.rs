//! What the app remembers between runs: data only, `#[serde(default)]`.

use super::wizard_state::WizardState;
use crate::pinning::board::Board;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Page {
    #[default]
    Overview,
    Devices,
    Cpu,
    Troubleshoot,
    NewVm,
    Monitor,
    Tuning,
}

impl Page {
    pub const ALL: [Page; 7] = [
        Page::Overview,
        Page::Devices,
        Page::Cpu,
        Page::Tuning,
        Page::NewVm,
        Page::Monitor,
        Page::Troubleshoot,
    ];
    pub fn title(self) -> &'static str {
        match self {
            Page::Overview => "Overview",
            Page::Devices => "Devices",
            Page::Cpu => "CPU",
            Page::Troubleshoot => "Troubleshoot",
            Page::NewVm => "New VM",
            Page::Monitor => "Monitor",
            Page::Tuning => "Tuning",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    pub page: Page,
    /// The Devices page's search text.
    pub device_filter: String,
    /// Show bridges and chipset plumbing on the Devices page.
    pub show_bridges: bool,
    /// The Troubleshoot page's chosen symptom.
    pub symptom: Option<String>,
    /// The libvirt domain the Troubleshoot page reads too (empty: host only).
    pub doctor_domain: String,
    /// The libvirt domain the Monitor page follows (empty: host only).
    pub monitor_domain: String,
    /// The Monitor page's latency probe CPUs (empty: the VM's, if followed).
    pub latency_cpus: String,
    /// Monitor: run the probe again with deep idle states held off.
    pub latency_compare_idle: bool,
    /// Monitor: interrupts as a compact strip instead of over the topology.
    pub monitor_strip: bool,
    /// The CPU page's drag-to-pin board.
    pub board: Board,
    /// The domain the board's pinning is applied to.
    pub pin_domain: String,
    /// Where "Save board XML" writes the fragment.
    pub pin_save_path: String,
    /// The New VM wizard's choices.
    pub wizard: WizardState,
    /// The Tuning page's choices.
    pub tuning: TuningChoices,
}

/// What the Tuning page plans for: the same inputs as `tune plan`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TuningChoices {
    /// GPUs (and other devices) going to the VM.
    pub gpus: Vec<String>,
    /// vCPUs for the planner; 0: none given.
    pub vcpus: usize,
    /// The host CPUs from the CPU page's board instead of the planner.
    pub use_board: bool,
    /// The VM's memory for hugepages; 0: none.
    pub memory_gib: u64,
    pub hugepages_1g: bool,
    /// SR-IOV VF counts per physical function.
    pub sriov: std::collections::BTreeMap<String, u32>,
    /// Changes switched off on the page.
    pub off: Vec<String>,
}
