//! Prerequisite checks: `HostSnapshot` (+ optionally one device) -> findings,
//! each with evidence, a plain "why" and the fix. Pure functions over the
//! snapshot, so every check runs the same on the live host and on a capture.

pub mod access;
pub mod cmdline;
pub mod devices;
pub mod idle;
pub mod initramfs;
/// The finding model lives in `crate::finding`, below every layer that
/// makes findings (checks, domain preflight, tuning evidence).
pub mod model {
    pub use crate::finding::{Action, Evidence, Finding, Status};
}
pub mod platform;
pub mod rom;
pub mod runtime;
pub mod vm;

use crate::host::HostSnapshot;
use model::{Finding, Status};
use serde::Serialize;

/// Every id a finding can have (stable: scripts and the doctor's symptoms use them).
pub const CHECK_IDS: &[&str] = &[
    "cpu.virtualization",
    "kvm.device",
    "iommu.firmware",
    "iommu.enabled",
    "iommu.passthrough_mode",
    "iommu.interrupt_remapping",
    "iommu.acs_override",
    "iommu.rmrr",
    "vfio.modules",
    "boot.reboot_pending",
    "boot.initramfs_vfio",
    "device.exists",
    "device.viable",
    "device.bound",
    "device.host_driver_first",
    "device.boot_vga",
    "device.reset",
    "device.rebar",
    "device.rom",
    "device.laptop_gpu",
    "device.host_display",
    "device.sriov_pf",
    "cpu.governor",
    "mem.thp",
    "mem.hugepages",
    "mem.fragmentation",
    "mem.ksm",
    "time.clocksource",
    "cpu.idle_states",
    "cpu.isolation",
    "cpu.irq_affinity",
    "cpu.split_lock",
    "kvm.ignore_msrs",
    "dev.vhost_net",
    "dev.tun",
    "cgroup.controllers",
    "libvirt.running",
    "libvirt.connect",
    "libvirt.hooks",
    "firmware.ovmf",
    "tpm.swtpm",
    "irq.vfio_mode",
];

/// All findings, failures first (stable within a status).
pub fn run_checks(s: &HostSnapshot, device: Option<&str>) -> Vec<Finding> {
    let mut out = Vec::new();
    platform::check(s, &mut out);
    devices::check(s, device, &mut out);
    runtime::check(s, &mut out);
    idle::check(s, &mut out);
    initramfs::check(s, &mut out);
    out.sort_by_key(|f| f.status);
    out
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub fail: usize,
    pub warn: usize,
    pub unknown: usize,
    pub info: usize,
    pub pass: usize,
}

pub fn counts(findings: &[Finding]) -> Counts {
    let mut c = Counts::default();
    for f in findings {
        match f.status {
            Status::Fail => c.fail += 1,
            Status::Warn => c.warn += 1,
            Status::Unknown => c.unknown += 1,
            Status::Info => c.info += 1,
            Status::Pass => c.pass += 1,
        }
    }
    c
}
