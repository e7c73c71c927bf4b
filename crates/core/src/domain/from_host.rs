//! From what the user picked to a `WindowsSpec`, using the host: the GPU's
//! passthrough set from its verdict, the pinning plan from the topology, a
//! hugepage size the host has reserved. Shared by `domain new` and the wizard.

use super::caps::DomainCaps;
use super::template::{DiskBus, Hugepages, Network, Windows, WindowsSpec};
use crate::host::HostSnapshot;
use crate::host::iommu::VerdictKind;
use crate::host::pci::full_address;
use crate::pinning::{PinRequest, plan};

/// What the user chooses; everything else follows from the host.
#[derive(Debug, Clone)]
pub struct Choices {
    pub name: String,
    pub windows: Windows,
    pub gpu: Option<String>,
    /// More devices to pass through (USB controllers, sound cards).
    pub devices: Vec<String>,
    pub gpu_rom: Option<String>,
    pub vcpus: usize,
    pub memory_mib: u64,
    /// `None`: pick from what the host has reserved.
    pub hugepages: Option<Hugepages>,
    pub disk: Option<String>,
    /// `None`: virtio when the virtio-win ISO is given, SATA otherwise.
    pub disk_bus: Option<DiskBus>,
    pub install_iso: Option<String>,
    pub virtio_iso: Option<String>,
    /// The unattended install's answer media (install::unattended).
    pub answer_iso: Option<String>,
    pub network: Network,
    pub spice: bool,
    pub pin: bool,
    pub hide_kvm: bool,
    pub io_uring: bool,
    /// How the user sees, types and hears (domain/playable.rs).
    pub playable: super::playable::Playable,
}

impl Default for Choices {
    fn default() -> Self {
        Choices {
            name: "win11".into(),
            windows: Windows::Eleven,
            gpu: None,
            devices: Vec::new(),
            gpu_rom: None,
            vcpus: 4,
            memory_mib: 8192,
            hugepages: None,
            disk: None,
            disk_bus: None,
            install_iso: None,
            virtio_iso: None,
            answer_iso: None,
            network: Network::Nat,
            spice: true,
            pin: true,
            hide_kvm: false,
            io_uring: false,
            playable: super::playable::Playable::default(),
        }
    }
}

/// The spec and the things the user should know before defining it.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub spec: WindowsSpec,
    pub notes: Vec<String>,
}

/// The hugepage size with enough free pages for `memory_mib`, 1 GiB first.
pub fn reserved_hugepages(snap: &HostSnapshot, memory_mib: u64) -> Option<Hugepages> {
    let need_kib = memory_mib.saturating_mul(1024);
    [Hugepages::OneGiB, Hugepages::TwoMiB]
        .into_iter()
        .find(|h| {
            let Some(size) = h.size_kib() else {
                return false;
            };
            snap.kernel
                .hugepages
                .iter()
                .any(|p| p.size_kib == size && p.free.saturating_mul(size) >= need_kib)
        })
}

/// Why the domain cannot be made from these choices on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    #[error("{given}: no PCI device with this address on this host")]
    NoDevice { given: String },
    #[error("{addr} cannot be passed through: {reason} ({blockers})")]
    GpuNotViable {
        addr: String,
        reason: String,
        blockers: String,
    },
    #[error("{addr} cannot be passed through: {reason}")]
    NotViable { addr: String, reason: String },
    /// The host's only keyboard is on a USB controller that would go.
    #[error("{0}")]
    OnlyKeyboard(String),
    #[error("{0}")]
    Pinning(crate::pinning::PlanError),
    #[error("{vcpus} vCPUs, but this QEMU allows {max}")]
    TooManyVcpus { vcpus: usize, max: u32 },
}

pub fn prepare(
    snap: &HostSnapshot,
    c: &Choices,
    caps: Option<DomainCaps>,
) -> Result<Prepared, PrepareError> {
    let mut notes = Vec::new();
    let mut gpu_set = Vec::new();
    let mut gpu_node = None;
    if let Some(gpu) = &c.gpu {
        let addr = full_address(gpu.trim());
        let entry = snap
            .device(&addr)
            .ok_or_else(|| PrepareError::NoDevice { given: gpu.clone() })?;
        let v = &entry.passthrough;
        match v.verdict {
            VerdictKind::NotViable => {
                let why: Vec<String> = v
                    .blockers
                    .iter()
                    .map(|b| format!("{}: {}", b.address, b.reason))
                    .collect();
                return Err(PrepareError::GpuNotViable {
                    addr,
                    reason: v.reason.clone(),
                    blockers: why.join("; "),
                });
            }
            VerdictKind::NoIommu => notes.push(v.reason.clone()),
            VerdictKind::ViableWith => notes.push(format!(
                "{addr} goes with {} (same IOMMU group or the same card).",
                v.companions.join(", ")
            )),
            VerdictKind::ViableAlone => {}
        }
        notes.extend(v.notes.iter().cloned());
        gpu_set = v.set.clone();
        gpu_node = entry.device.numa_node;
    } else {
        notes.push("No GPU given: the domain has no GPU passed through.".into());
    }
    for extra in &c.devices {
        let addr = full_address(extra.trim());
        let entry = snap.device(&addr).ok_or_else(|| PrepareError::NoDevice {
            given: extra.clone(),
        })?;
        let v = &entry.passthrough;
        if v.verdict == VerdictKind::NotViable {
            return Err(PrepareError::NotViable {
                addr,
                reason: v.reason.clone(),
            });
        }
        for a in &v.set {
            if !gpu_set.contains(a) {
                gpu_set.push(a.clone());
            }
        }
    }
    // A USB controller in the set (asked for, or in a group with one) must
    // not take the host's only keyboard with it.
    if let Some(why) = gpu_set
        .iter()
        .find_map(|a| crate::host::usb::holds_only_keyboard(&snap.system.usb, a))
    {
        return Err(PrepareError::OnlyKeyboard(why));
    }
    let pin_plan = if c.pin {
        let req = PinRequest {
            vcpus: c.vcpus,
            gpu_numa_node: gpu_node,
            amd: snap.cpu.vendor.as_deref() == Some("AuthenticAMD"),
            ..PinRequest::default()
        };
        let p = plan(&snap.topology, &req).map_err(PrepareError::Pinning)?;
        notes.extend(p.warnings.iter().cloned());
        Some(p)
    } else {
        None
    };
    let hugepages = match c.hugepages {
        Some(h) => {
            if h != Hugepages::None && reserved_hugepages(snap, c.memory_mib) != Some(h) {
                notes.push(format!(
                    "Not enough free {} hugepages are reserved for {} MiB now: the VM will not start until they are (the Tuning page reserves them).",
                    if h == Hugepages::OneGiB { "1 GiB" } else { "2 MiB" },
                    c.memory_mib
                ));
            }
            h
        }
        None => reserved_hugepages(snap, c.memory_mib).unwrap_or(Hugepages::None),
    };
    let disk_bus = c.disk_bus.unwrap_or(if c.virtio_iso.is_some() {
        DiskBus::Virtio
    } else {
        DiskBus::Sata
    });
    if disk_bus == DiskBus::Virtio && c.virtio_iso.is_none() && c.disk.is_some() {
        notes.push("A virtio disk without the virtio-win ISO: Windows setup will not see the disk unless the image already has the drivers.".into());
    }
    if let Some(caps) = &caps
        && let Some(max) = caps.max_vcpus
        && c.vcpus > max as usize
    {
        return Err(PrepareError::TooManyVcpus {
            vcpus: c.vcpus,
            max,
        });
    }
    Ok(Prepared {
        spec: WindowsSpec {
            name: c.name.trim().to_string(),
            windows: c.windows,
            vcpus: c.vcpus,
            memory_mib: c.memory_mib,
            hugepages,
            gpu_set,
            gpu_rom: c.gpu_rom.clone(),
            disk: c.disk.clone(),
            disk_bus,
            install_iso: c.install_iso.clone(),
            virtio_iso: c.virtio_iso.clone(),
            answer_iso: c.answer_iso.clone(),
            network: c.network.clone(),
            spice: c.spice,
            plan: pin_plan,
            caps,
            hide_kvm: c.hide_kvm,
            io_uring: c.io_uring,
            playable: c.playable.clone(),
        },
        notes,
    })
}
