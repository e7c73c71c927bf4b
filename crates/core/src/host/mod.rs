//! The read-only model of a host, built from a `HostRoot`. `scan` reads
//! everything; each submodule owns one part and turns odd or missing files into
//! warnings instead of failing.

pub mod cpu;
pub mod cpuidle;
pub mod cpuset;
pub mod firmware;
pub mod freq;
pub mod gpu_kind;
pub mod hex;
pub mod holders;
pub mod hybrid;
pub mod initramfs;
pub mod input;
pub mod iommu;
pub mod kernel;
pub mod numa;
pub mod pci;
pub mod pci_addr;
pub mod pci_names;
pub mod signing;
pub mod system;
pub mod topology;
pub mod uki;
pub mod usage;
pub mod usb;
pub mod warnings;

use crate::sysroot::HostRoot;
use cpu::CpuSummary;
use firmware::FirmwareState;
use iommu::{IommuGroup, PassthroughVerdict, VerdictKind};
use kernel::KernelState;
use pci::PciDevice;
use serde::Serialize;
use std::collections::BTreeMap;
use topology::Topology;
use warnings::{Warning, Warnings};

/// Version of the JSON document `scan --json` prints (see docs/scan-json.md).
pub const SCAN_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IommuSummary {
    /// Groups exist: the kernel has an IOMMU driving DMA remapping.
    pub active: bool,
    pub groups: usize,
}

/// A PCI device with its passthrough verdict, as `scan` reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PciEntry {
    #[serde(flatten)]
    pub device: PciDevice,
    pub passthrough: PassthroughVerdict,
}

/// Everything we know about a host after one scan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostSnapshot {
    pub schema_version: u32,
    pub root: String,
    pub cpu: CpuSummary,
    pub topology: Topology,
    pub iommu: IommuSummary,
    pub iommu_groups: Vec<IommuGroup>,
    pub pci_devices: Vec<PciEntry>,
    pub kernel: KernelState,
    pub firmware: FirmwareState,
    /// Everything else the prerequisite checks read.
    pub system: system::SystemState,
    /// What could not be read, with the path and why. Partial data is still data.
    pub warnings: Vec<Warning>,
}

impl HostSnapshot {
    /// The device at `address`, in sysfs form (`0000:01:00.0`) or as users
    /// type it (`01:00.0`).
    pub fn device(&self, address: &str) -> Option<&PciEntry> {
        let address = address.trim();
        let full;
        let address = if address.len() == 7 {
            full = pci::full_address(address);
            full.as_str()
        } else {
            address
        };
        self.pci_devices
            .binary_search_by(|e| e.device.address.as_str().cmp(address))
            .ok()
            .map(|i| &self.pci_devices[i])
    }
    pub fn gpus(&self) -> impl Iterator<Item = &PciEntry> {
        self.pci_devices.iter().filter(|e| e.device.is_gpu())
    }

    /// Why the host itself shows its screen on this GPU, when it does, from
    /// what the host says — the firmware's boot display (the console), a
    /// display connected to it, the CPU's own graphics — never from its
    /// place in PCI order. The strongest reason first.
    pub fn host_display_reason(&self, address: &str) -> Option<&'static str> {
        let d = &self.device(address)?.device;
        if d.boot_vga == Some(true) {
            Some("it shows the boot screen and the console (boot_vga)")
        } else if !d.host_usage.connected_displays().is_empty() {
            Some("a display is connected to it")
        } else if address.starts_with("0000:00:") && d.is_gpu() {
            Some("it is the CPU's (or chipset's) own graphics")
        } else {
            None
        }
    }

    /// How strongly the host holds a GPU for its own screen: (shows the
    /// console, drives a connected display, is integrated), each 0 or 1.
    fn host_display_weight(&self, e: &PciEntry) -> (bool, bool, bool) {
        let d = &e.device;
        (
            d.boot_vga == Some(true),
            !d.host_usage.connected_displays().is_empty(),
            d.address.starts_with("0000:00:"),
        )
    }

    /// The GPUs, those the host shows its screen on last (the console, a
    /// connected display, the root bus); PCI order among equals. Which one
    /// is the VM's is `report::vm_card`'s to say.
    pub fn gpus_host_screen_last(&self) -> Vec<&PciEntry> {
        let mut g: Vec<&PciEntry> = self.gpus().collect();
        g.sort_by_key(|e| self.host_display_weight(e));
        g
    }
}

/// Why a root cannot be scanned at all.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("{0}: not a directory")]
    NotADirectory(String),
    #[error(
        "{0}: this does not look like a Linux host root (no sys/ or proc/ inside); give the folder a snapshot was extracted to, or the snapshot file"
    )]
    NotAHost(String),
    /// A bug, not bad input: some part of the reading panicked. Never an
    /// empty model instead (that would be a quiet wrong answer).
    #[error(
        "{root}: reading {part} failed on a bug in vfio-assistant ({message}); please report it with the host snapshot"
    )]
    Internal {
        root: String,
        part: &'static str,
        message: String,
    },
}

/// What a panic said, for `ScanError::Internal`.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// A part of the scan that ran on its own thread (or under `catch_unwind`):
/// its panic becomes an error naming that part.
fn joined<T>(
    root: &str,
    part: &'static str,
    result: std::thread::Result<T>,
) -> Result<T, ScanError> {
    result.map_err(|payload| ScanError::Internal {
        root: root.to_string(),
        part,
        message: panic_message(payload.as_ref()),
    })
}

/// Read the whole host model.
pub fn scan(root: &HostRoot) -> Result<HostSnapshot, ScanError> {
    let shown = root.base().display().to_string();
    if !root.base().is_dir() {
        return Err(ScanError::NotADirectory(shown));
    }
    if !root.looks_like_host() {
        return Err(ScanError::NotAHost(shown));
    }
    // A panic anywhere below is a bug: the scan fails with it, naming the part.
    let whole = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scan_host(root, &shown)));
    joined(&shown, "the host", whole)?
}

fn scan_host(root: &HostRoot, shown: &str) -> Result<HostSnapshot, ScanError> {
    let mut w = Warnings::default();
    // The CPU side and the PCI side touch different files: read them on two
    // threads (sysfs reads are syscall-bound, so this halves the wall time).
    let (cpu_side, mut devices, mut groups) = std::thread::scope(|s| {
        let cpu_side = s.spawn(|| {
            let mut cw = Warnings::default();
            let cpu = cpu::read_cpu_summary(root, &mut cw);
            let topology = topology::read_topology(root, &mut cw);
            let kernel = kernel::read_kernel(root, &mut cw);
            let mut system = system::read_system(root, &mut cw);
            let online: Vec<u32> = topology.online_cpus().map(|c| c.id).collect();
            system.cpuidle = cpuidle::read_cpuidle(root, &online, &mut cw);
            system.signing = signing::read_signing(
                root,
                kernel.release.as_deref(),
                kernel.modules.as_deref().unwrap_or_default(),
            );
            (cpu, topology, kernel, system, cw)
        });
        let mut devices = pci::read_pci_devices(root, &mut w);
        usage::attach_host_usage(root, &mut devices, &mut w);
        let groups = iommu::read_iommu_groups(root, &mut w);
        (cpu_side.join(), devices, groups)
    });
    let (cpu, topology, kernel, system, cw) =
        joined(shown, "the CPUs, kernel and system state", cpu_side)?;
    w.extend(cw);
    if groups.is_empty() {
        groups = iommu::groups_from_devices(&devices);
    }
    devices.sort_by(|a, b| a.address.cmp(&b.address));
    let firmware = firmware::read_firmware(root);
    let iommu = IommuSummary {
        active: !groups.is_empty(),
        groups: groups.len(),
    };
    let pci_devices = judge_all(devices, &groups, iommu.active);
    Ok(HostSnapshot {
        schema_version: SCAN_SCHEMA_VERSION,
        root: shown.to_string(),
        cpu,
        topology,
        iommu,
        iommu_groups: groups,
        pci_devices,
        kernel,
        firmware,
        system,
        warnings: w.into_sorted(),
    })
}

fn judge_all(devices: Vec<PciDevice>, groups: &[IommuGroup], iommu_active: bool) -> Vec<PciEntry> {
    let by_addr: BTreeMap<String, PciDevice> = devices
        .into_iter()
        .map(|d| (d.address.clone(), d))
        .collect();
    let by_group: BTreeMap<u32, IommuGroup> = groups.iter().map(|g| (g.id, g.clone())).collect();
    by_addr
        .values()
        .map(|d| {
            let passthrough = if d.is_host_bridge() || d.is_pci_bridge() {
                bridge_verdict(d)
            } else {
                iommu::passthrough_verdict(&d.address, &by_addr, &by_group, iommu_active)
            };
            PciEntry {
                device: d.clone(),
                passthrough,
            }
        })
        .collect()
}

fn bridge_verdict(d: &PciDevice) -> PassthroughVerdict {
    PassthroughVerdict {
        verdict: VerdictKind::NotViable,
        set: vec![d.address.clone()],
        companions: Vec::new(),
        bridges_left_to_host: Vec::new(),
        blockers: Vec::new(),
        notes: Vec::new(),
        reason: "Bridges stay with the host: pass through the devices behind them instead.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_part_is_an_error_that_names_it() {
        let r = std::thread::spawn(|| -> u32 { panic!("index out of bounds") }).join();
        let e = joined("/host", "the CPUs", r).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("reading the CPUs failed"), "{text}");
        assert!(text.contains("index out of bounds"), "{text}");
        assert!(matches!(joined("/host", "x", Ok(7)), Ok(7)));
    }
}
