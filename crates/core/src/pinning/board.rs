//! The drag-to-pin board on the CPU page: which host CPU each vCPU chip sits
//! on, and where the emulator and iothread chips are. Data only (persisted
//! with the app's state); it turns into a `Pinning` for the validator and into
//! a `PinPlan` for the XML, the kernel line and `domain tune`.

use super::model::{GuestTopology, KernelArgs, PinPlan};
use super::validate::Pinning;
use crate::host::topology::Topology;
use crate::parse::cpulist::format_cpulist;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A chip the user places on a host CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Chip {
    Vcpu(u32),
    Emulator,
    Iothread,
}

impl Chip {
    pub fn label(self) -> String {
        match self {
            Chip::Vcpu(v) => format!("vCPU {v}"),
            Chip::Emulator => "emulator".into(),
            Chip::Iothread => "iothread".into(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Board {
    pub vcpus: u32,
    /// vCPU → the host CPU it is pinned to.
    pub pins: BTreeMap<u32, u32>,
    pub emulator: BTreeSet<u32>,
    pub iothread: BTreeSet<u32>,
    /// Why the planner placed the chips so (its reasons, then its warnings as
    /// `! …`), from the last fill; cleared when a chip is moved by hand.
    pub planner_notes: Vec<String>,
}

impl Board {
    /// The planner's answer, on the board.
    pub fn from_plan(p: &PinPlan) -> Board {
        Board {
            vcpus: u32::try_from(p.vcpus).unwrap_or(u32::MAX),
            pins: p.vcpupin.iter().copied().collect(),
            emulator: p.emulatorpin.iter().copied().collect(),
            iothread: p.iothreadpin.iter().copied().collect(),
            planner_notes: p
                .reasons
                .iter()
                .cloned()
                .chain(p.warnings.iter().map(|w| format!("! {w}")))
                .collect(),
        }
    }

    /// Put a chip on a CPU: a vCPU moves there (one CPU per vCPU); the emulator
    /// and iothread chips may cover several CPUs, so they are added.
    pub fn place(&mut self, chip: Chip, cpu: u32) {
        self.planner_notes.clear();
        match chip {
            Chip::Vcpu(v) if v < self.vcpus => {
                self.pins.insert(v, cpu);
            }
            Chip::Vcpu(_) => {}
            Chip::Emulator => {
                self.emulator.insert(cpu);
            }
            Chip::Iothread => {
                self.iothread.insert(cpu);
            }
        }
    }

    /// Take a chip off (from `cpu`, or everywhere when `None`).
    pub fn unplace(&mut self, chip: Chip, cpu: Option<u32>) {
        self.planner_notes.clear();
        let take = |set: &mut BTreeSet<u32>| match cpu {
            Some(c) => {
                set.remove(&c);
            }
            None => set.clear(),
        };
        match chip {
            Chip::Vcpu(v) => {
                self.pins.remove(&v);
            }
            Chip::Emulator => take(&mut self.emulator),
            Chip::Iothread => take(&mut self.iothread),
        }
    }

    pub fn set_vcpus(&mut self, n: u32) {
        self.planner_notes.clear();
        self.vcpus = n;
        self.pins.retain(|v, _| *v < n);
    }

    /// The chips on one host CPU.
    pub fn chips_on(&self, cpu: u32) -> Vec<Chip> {
        let mut out: Vec<Chip> = self
            .pins
            .iter()
            .filter(|(_, c)| **c == cpu)
            .map(|(v, _)| Chip::Vcpu(*v))
            .collect();
        if self.emulator.contains(&cpu) {
            out.push(Chip::Emulator);
        }
        if self.iothread.contains(&cpu) {
            out.push(Chip::Iothread);
        }
        out
    }

    /// The vCPUs not on any CPU yet.
    pub fn unpinned(&self) -> Vec<u32> {
        (0..self.vcpus)
            .filter(|v| !self.pins.contains_key(v))
            .collect()
    }

    /// The guest topology the board can honestly claim: threads=2 when every
    /// vCPU pair (2k, 2k+1) sits on the two threads of one host core.
    pub fn guest(&self, t: &Topology) -> GuestTopology {
        let sibling_pairs = self.vcpus >= 2
            && self.vcpus.is_multiple_of(2)
            && (0..self.vcpus / 2).all(|k| {
                match (self.pins.get(&(2 * k)), self.pins.get(&(2 * k + 1))) {
                    (Some(a), Some(b)) if a != b => t
                        .cores
                        .iter()
                        .any(|c| c.cpus.len() == 2 && c.cpus.contains(a) && c.cpus.contains(b)),
                    _ => false,
                }
            });
        let threads = if sibling_pairs { 2 } else { 1 };
        GuestTopology {
            sockets: 1,
            dies: 1,
            cores: (self.vcpus / threads).max(1),
            threads,
        }
    }

    /// What the validator checks.
    pub fn pinning(&self, t: &Topology) -> Pinning {
        Pinning {
            vcpus: self
                .pins
                .iter()
                .map(|(v, c)| (*v, BTreeSet::from([*c])))
                .collect(),
            emulator: self.emulator.clone(),
            guest: Some(self.guest(t)),
        }
    }

    /// The board as a plan: XML, kernel line, and what `domain tune` applies.
    /// Unpinned vCPUs stay unpinned; the emulator defaults to the CPUs no vCPU
    /// uses, the iothread to the emulator's CPUs.
    pub fn to_plan(&self, t: &Topology, amd: bool) -> PinPlan {
        let vm_cpus: BTreeSet<u32> = self.pins.values().copied().collect();
        let housekeeping: Vec<u32> = t
            .online_cpus()
            .map(|c| c.id)
            .filter(|c| !vm_cpus.contains(c))
            .collect();
        let emulator: Vec<u32> = if self.emulator.is_empty() {
            housekeeping.clone()
        } else {
            self.emulator.iter().copied().collect()
        };
        let iothread: Vec<u32> = if self.iothread.is_empty() {
            emulator.clone()
        } else {
            self.iothread.iter().copied().collect()
        };
        let guest = self.guest(t);
        let numa: BTreeSet<u32> = vm_cpus
            .iter()
            .filter_map(|c| t.cpu(*c).and_then(|x| x.numa_node))
            .collect();
        let vm: Vec<u32> = vm_cpus.iter().copied().collect();
        let vm_list = format_cpulist(&vm);
        let hk_list = format_cpulist(&housekeeping);
        PinPlan {
            vcpus: self.vcpus as usize,
            vcpupin: self.pins.iter().map(|(v, c)| (*v, *c)).collect(),
            emulatorpin: emulator,
            iothreadpin: iothread,
            guest,
            topoext: amd && guest.threads > 1,
            numa_nodes: numa.into_iter().collect(),
            vcpusched_fifo: false,
            vm_cpus: vm,
            housekeeping_cpus: housekeeping,
            kernel: KernelArgs::for_cpus(&vm_list, &hk_list),
            allowed_cpus_host: hk_list,
            reasons: vec![format!(
                "Pinned by hand: {} of {} vCPUs placed; the guest claims {} thread(s) per core because {}.",
                self.pins.len(),
                self.vcpus,
                guest.threads,
                if guest.threads == 2 {
                    "every vCPU pair sits on one core's two threads"
                } else {
                    "not every vCPU pair sits on one core's two threads"
                }
            )],
            warnings: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::scan;
    use crate::sysroot::HostRoot;

    fn ryzen() -> Topology {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/topology/ghw-amd-ryzen5-1600"
        );
        scan(&HostRoot::at(p))
            .map(|s| s.topology)
            .unwrap_or_default()
    }

    #[test]
    fn the_guest_claims_threads_only_for_true_sibling_pairs() {
        let t = ryzen();
        let mut b = Board {
            vcpus: 4,
            ..Board::default()
        };
        for (v, c) in [(0, 1), (1, 7), (2, 2), (3, 8)] {
            b.place(Chip::Vcpu(v), c);
        }
        assert_eq!(b.guest(&t).threads, 2);
        b.place(Chip::Vcpu(3), 3); // 2 and 3 are different cores
        assert_eq!(b.guest(&t).threads, 1);
        assert_eq!(b.guest(&t).cores, 4);
        // Fewer vCPUs drop the pins beyond; defaults fill emulator and iothread.
        b.set_vcpus(2);
        assert_eq!(b.pins.len(), 2);
        let p = b.to_plan(&t, true);
        assert_eq!(p.vm_cpus, vec![1, 7]);
        assert!(!p.emulatorpin.contains(&1) && p.emulatorpin.contains(&0));
        assert_eq!(p.iothreadpin, p.emulatorpin);
        assert!(p.topoext, "AMD with threads=2");
        assert_eq!(p.kernel.nohz_full, "1,7");
        b.place(Chip::Emulator, 0);
        b.place(Chip::Emulator, 6);
        b.unplace(Chip::Emulator, Some(0));
        assert_eq!(b.chips_on(6), vec![Chip::Emulator]);
        b.place(Chip::Vcpu(9), 0);
        assert!(b.chips_on(0).is_empty(), "no vCPU 9 on a 2-vCPU board");
    }
}
