//! The one VM every page speaks of (data only, saved with the state): its
//! name, its GPU and more devices, its memory and hugepages, its installer
//! and driver media. Its vCPUs and the host CPUs they run on are the CPU
//! page's board (`State::board`): the count is `board.vcpus`, the CPUs its
//! pins. The wizard, the Tuning page and the CPU page read and write these,
//! so a change on one page shows on the others; a page that would propose
//! something else says so beside the shared value.

use crate::ui::wizard_state::HugeChoice;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VmModel {
    pub name: String,
    /// The card that goes to the VM (its passthrough set goes with it).
    pub gpu: Option<String>,
    /// More devices to pass through (USB controllers, sound cards).
    pub devices: Vec<String>,
    /// Guest memory in GiB; 0: not chosen (the wizard proposes half the
    /// host's, `wizard_state::default_memory_gib`).
    pub memory_gib: u64,
    pub hugepages: HugeChoice,
    pub install_iso: String,
    pub virtio_iso: String,
    /// "Install Windows for me": answer media built at Define
    /// (install::for_domain), the install followed on the Monitor.
    pub unattended: bool,
    /// The Windows account the unattended install creates.
    pub win_user: String,
    /// Its password: held in memory until Define puts it on the answer
    /// media, never saved with the state.
    #[serde(skip)]
    pub win_password: crate::install::unattend::Secret,
    /// The Looking Glass host installer for the first logon (optional).
    pub lg_installer: String,
}

impl Default for VmModel {
    fn default() -> Self {
        VmModel {
            name: "win11".into(),
            gpu: None,
            devices: Vec::new(),
            memory_gib: 0,
            hugepages: HugeChoice::Auto,
            install_iso: String::new(),
            virtio_iso: String::new(),
            unattended: false,
            win_user: String::new(),
            win_password: Default::default(),
            lg_installer: String::new(),
        }
    }
}

/// What the wizard proposes for vCPUs while the board has none.
pub const SUGGESTED_VCPUS: u32 = 4;

impl VmModel {
    /// The guest memory in GiB: the chosen one, or the host's default.
    pub fn memory_for(&self, total_kib: Option<u64>) -> u64 {
        if self.memory_gib == 0 {
            crate::ui::wizard_state::default_memory_gib(total_kib)
        } else {
            self.memory_gib
        }
    }
}
