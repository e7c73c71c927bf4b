//! Words both faces use for the same facts: sizes, device badges, verdict
//! tags, topology counts. The CLI's reports and the app's pages call these,
//! so a value reads the same in both.

use crate::host::PciEntry;
use crate::host::iommu::VerdictKind;
use crate::host::topology::TopologySummary;

pub use crate::units::human_kib;

/// Short badges for a device: GPU, boot VGA, SR-IOV, host use, reset.
pub fn badges(e: &PciEntry) -> Vec<String> {
    let d = &e.device;
    let mut b = Vec::new();
    if d.is_gpu() {
        b.push("GPU".to_string());
    }
    if d.boot_vga == Some(true) {
        b.push("boot VGA".into());
    }
    if let Some(s) = &d.sriov {
        b.push(format!("SR-IOV PF {}/{} VFs", s.num_vfs, s.total_vfs));
    }
    if d.physfn.is_some() {
        b.push("SR-IOV VF".into());
    }
    if !d.host_usage.is_empty() {
        b.push("used by host".into());
    }
    if d.bound_for_vm() {
        b.push("ready for VM".into());
    }
    if !d.reset.methods.is_empty() {
        b.push(format!("reset: {}", d.reset.methods.join(",")));
    } else if d.reset.known && !d.reset.can_reset && !(d.is_host_bridge() || d.is_pci_bridge()) {
        b.push("no reset".into());
    }
    b
}

/// A short tag for a verdict, for reports.
pub fn verdict_tag(v: VerdictKind) -> &'static str {
    match v {
        VerdictKind::ViableAlone => "OK alone",
        VerdictKind::ViableWith => "OK with companions",
        VerdictKind::NotViable => "BLOCKED",
        VerdictKind::NoIommu => "no IOMMU",
    }
}

/// The topology's counts in one line.
pub fn topology_counts(sm: &TopologySummary, sep: &str) -> String {
    let mut parts = vec![
        format!("{} package(s)", sm.packages),
        format!("{} NUMA node(s)", sm.numa_nodes),
        format!("{} L3 group(s)", sm.l3_groups),
        format!("{} cores", sm.cores),
        format!("{} CPUs online", sm.cpus_online),
    ];
    if sm.cpus_offline > 0 {
        parts.push(format!("{} offline", sm.cpus_offline));
    }
    parts.push(if sm.smt {
        format!("SMT {} threads/core", sm.threads_per_core)
    } else {
        "no SMT".to_string()
    });
    parts.join(sep)
}
