//! What the app remembers between runs: data only, `#[serde(default)]`.

use super::wizard_state::WizardState;
use crate::pinning::board::Board;
use serde::{Deserialize, Serialize};

/// Declares `Page` with its titles, in the top bar's order: one line per
/// page. Its drawing is `ui::app::page_table::draw`'s arm for it, which the
/// compiler asks for (an exhaustive match): a page is its line here, its
/// view file and that arm.
macro_rules! pages {
    ($($variant:ident => $title:literal,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        pub enum Page {
            $($variant,)*
        }

        impl Page {
            /// Every page, in the top bar's order.
            pub const ALL: &[Page] = &[$(Page::$variant,)*];

            pub fn title(self) -> &'static str {
                match self {
                    $(Page::$variant => $title,)*
                }
            }
        }
    };
}

pages! {
    Overview => "Overview",
    Devices => "Devices",
    Cpu => "CPU",
    Tuning => "Tuning",
    NewVm => "New VM",
    Monitor => "Monitor",
    Troubleshoot => "Troubleshoot",
}

impl Default for Page {
    /// The page the app opens on: the first.
    fn default() -> Page {
        Page::Overview
    }
}

impl Page {
    /// Every page, in the top bar's order.
    pub fn all() -> impl Iterator<Item = Page> {
        Page::ALL.iter().copied()
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
    /// Apply also turns on the Hyper-V enlightenments and timers (what
    /// `domain tune` does besides pinning).
    pub pin_tune_rest: bool,
    /// Where "Save board XML" writes the fragment.
    pub pin_save_path: String,
    /// The VM every page speaks of (its vCPUs and their CPUs: `board`).
    pub vm: crate::ui::vm_model::VmModel,
    /// The New VM wizard's own choices.
    pub wizard: WizardState,
    /// The Tuning page's choices.
    pub tuning: TuningChoices,
    /// The card the user picked as the VM's where the host has several
    /// (the Overview's "Choose the VM's card"); `check --gpu` is the same.
    pub vm_gpu: Option<String>,
}

/// What the Tuning page plans for: the same inputs as `tune plan`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TuningChoices {
    /// More cards bound for the VM besides its GPU (`State::vm.gpu`).
    pub gpus: Vec<String>,
    /// Hugepages for the VM's memory (`State::vm`): reserve them.
    pub reserve_hugepages: bool,
    pub hugepages_1g: bool,
    /// SR-IOV VF counts per physical function.
    pub sriov: std::collections::BTreeMap<String, u32>,
    /// Changes switched off on the page.
    pub off: Vec<String>,
    /// Dynamic isolation: the libvirt hook for this VM (empty: none).
    pub isolate_vm: String,
    /// Isolate the VM's CPUs at boot too (isolcpus, nohz_full): the host
    /// never uses them again, the VM off or on. Its own choice; off, the
    /// host keeps them at boot (`tune --no-isolcpus`).
    pub boot_isolation: bool,
    /// Looking Glass's shared memory for the New VM's resolution (MiB, 0:
    /// none), through kvmfr or /dev/shm.
    pub looking_glass_mib: u64,
    pub kvmfr: bool,
    /// QEMU runs as this user (qemu.conf's user), so that it reaches the
    /// user's sound server: its own choice (every system VM becomes the
    /// user's), named beside the Apply button.
    pub qemu_as_me: bool,
    /// Single-GPU passthrough: the VM (by name) that takes the desktop's
    /// only GPU through our hook; empty: none.
    pub single_gpu_vm: String,
    /// Shared GPU: the VM (by name) the second GPU is lent to while it
    /// runs (the desktop has it otherwise); empty: none.
    pub shared_gpu_vm: String,
    /// Units the shared-GPU hook may stop when they hold the card
    /// (space-separated `NAME.service`).
    pub shared_stop: String,
}

impl State {
    /// Drop what this host cannot have: pins to CPUs it has not online,
    /// devices (the wizard's GPU and extras, the Tuning page's devices and
    /// VF counts) it does not have. A state saved on one host (or the demo)
    /// never points the pages at another host's hardware. Returns what was
    /// dropped, in words, for the top bar.
    pub fn fit_to_host(&mut self, snap: &crate::host::HostSnapshot) -> Vec<String> {
        let mut dropped = Vec::new();
        let online: std::collections::BTreeSet<u32> = snap
            .topology
            .cpus
            .iter()
            .filter(|c| c.online)
            .map(|c| c.id)
            .collect();
        let b = &mut self.board;
        let missing_cpus: std::collections::BTreeSet<u32> = b
            .pins
            .values()
            .chain(b.emulator.iter())
            .chain(b.iothread.iter())
            .filter(|c| !online.contains(c))
            .copied()
            .collect();
        if !missing_cpus.is_empty() {
            b.pins.retain(|_, c| online.contains(c));
            b.emulator.retain(|c| online.contains(c));
            b.iothread.retain(|c| online.contains(c));
            b.planner_notes.clear();
            let list: Vec<String> = missing_cpus.iter().map(|c| c.to_string()).collect();
            dropped.push(format!(
                "pins to CPU {} (not online on this host)",
                list.join(", ")
            ));
        }
        let here = |a: &String| snap.device(a).is_some();
        let w = &mut self.vm;
        if let Some(g) = w.gpu.take_if(|g| !here(g)) {
            dropped.push(format!("the VM's GPU {g} (not on this host)"));
        }
        let before = w.devices.len();
        w.devices.retain(here);
        if w.devices.len() < before {
            dropped.push(format!(
                "{} of the VM's devices (not on this host)",
                before - w.devices.len()
            ));
        }
        let t = &mut self.tuning;
        let before = t.gpus.len() + t.sriov.len();
        t.gpus.retain(here);
        t.sriov.retain(|a, _| here(a));
        if t.gpus.len() + t.sriov.len() < before {
            dropped.push("the Tuning page's devices that are not on this host".to_string());
        }
        if let Some(g) = self.vm_gpu.take_if(|g| !here(g)) {
            dropped.push(format!(
                "the card chosen for the VM, {g} (not on this host)"
            ));
        }
        dropped
    }
}

/// The key the app's state is saved under: one per host, so that a demo
/// session or a captured host never leaves its choices on this machine's
/// pages. `identity` is what names the host (see `App::state_key`).
pub fn state_key(identity: &str) -> String {
    format!("vfio-assistant-state/{identity}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    /// Choices saved on another host (or the demo) meet a real host's scan:
    /// what it lacks is dropped and said, what it has stays.
    #[test]
    fn saved_choices_are_fitted_to_the_scanned_host() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/topology/ghw-amd-ryzen5-1600"
        );
        let snap = crate::host::scan(&crate::sysroot::HostRoot::at(p)).unwrap();
        let mut s = State::default();
        s.board.vcpus = 2;
        s.board.pins.insert(0, 3);
        s.board.pins.insert(1, 99);
        s.board.emulator.insert(200);
        // Not on this host (its cards are elsewhere).
        s.vm.gpu = Some("0000:99:00.0".into());
        s.tuning.gpus = vec!["0000:99:00.0".into()];
        let dropped = s.fit_to_host(&snap);
        assert_eq!(s.board.pins.get(&0), Some(&3), "CPU 3 is online here");
        assert!(!s.board.pins.contains_key(&1));
        assert!(s.board.emulator.is_empty());
        assert_eq!(s.vm.gpu, None);
        assert!(s.tuning.gpus.is_empty());
        assert_eq!(dropped.len(), 3, "{dropped:?}");
        assert!(dropped[0].contains("CPU 99, 200"), "{dropped:?}");
        // Nothing to drop the second time.
        assert!(s.fit_to_host(&snap).is_empty());
    }
}
