//! What `/proc/cpuinfo` says about the processor: vendor, model, virtualization
//! and other flags that matter for passthrough, address sizes.

use super::warnings::Warnings;
use crate::sysroot::{HostPath, HostRoot};
use procfs_core::{CpuInfo, FromRead};
use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuSummary {
    pub vendor: Option<String>,
    pub model_name: Option<String>,
    pub family: Option<String>,
    pub model: Option<String>,
    pub stepping: Option<String>,
    /// `vmx` (Intel VT-x) in the flags.
    pub vmx: bool,
    /// `svm` (AMD-V) in the flags.
    pub svm: bool,
    /// 1 GiB pages supported.
    pub pdpe1gb: bool,
    /// Running inside a VM itself (`hypervisor` flag).
    pub hypervisor: bool,
    /// The CPU has IA32_ARCH_CAPABILITIES (`arch_capabilities` flag). KVM
    /// offers it to guests either way; a nested host without it cannot set it.
    pub arch_capabilities: bool,
    pub physical_address_bits: Option<u32>,
    pub virtual_address_bits: Option<u32>,
    /// Number of `processor` entries.
    pub logical_cpus: usize,
}

impl CpuSummary {
    /// "Intel VT-x", "AMD-V" or None.
    pub fn virtualization(&self) -> Option<&'static str> {
        if self.vmx {
            Some("Intel VT-x")
        } else if self.svm {
            Some("AMD-V")
        } else {
            None
        }
    }
}

/// Pure: a summary from cpuinfo text.
pub fn parse_cpu_summary(text: &str) -> CpuSummary {
    let info = match CpuInfo::from_read(text.as_bytes()) {
        Ok(i) => i,
        Err(_) => return CpuSummary::default(),
    };
    let field = |k: &str| info.get_field(0, k).map(str::to_string);
    let flags: Vec<String> = info
        .get_field(0, "flags")
        .or_else(|| info.get_field(0, "Features"))
        .map(|f| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let has = |f: &str| flags.iter().any(|x| x == f);
    let (phys, virt) = info
        .get_field(0, "address sizes")
        .map(parse_address_sizes)
        .unwrap_or((None, None));
    let logical_cpus = text.lines().filter(|l| l.starts_with("processor")).count();
    CpuSummary {
        vendor: field("vendor_id")
            .or_else(|| field("CPU implementer").map(|i| format!("ARM implementer {i}"))),
        model_name: field("model name"),
        family: field("cpu family"),
        model: field("model"),
        stepping: field("stepping"),
        vmx: has("vmx"),
        svm: has("svm"),
        pdpe1gb: has("pdpe1gb"),
        hypervisor: has("hypervisor"),
        arch_capabilities: has("arch_capabilities"),
        physical_address_bits: phys,
        virtual_address_bits: virt,
        logical_cpus,
    }
}

/// `39 bits physical, 48 bits virtual`.
fn parse_address_sizes(text: &str) -> (Option<u32>, Option<u32>) {
    let mut phys = None;
    let mut virt = None;
    for part in text.split(',') {
        let n = part.split_whitespace().next().and_then(|n| n.parse().ok());
        if part.contains("physical") {
            phys = n;
        } else if part.contains("virtual") {
            virt = n;
        }
    }
    (phys, virt)
}

pub fn read_cpu_summary(root: &HostRoot, warnings: &mut Warnings) -> CpuSummary {
    warnings
        .take(root.read_text(&HostPath::proc("cpuinfo")))
        .map(|t| parse_cpu_summary(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intel_cpuinfo() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 44\nmodel name\t: Intel(R) Xeon(R) CPU           E5640  @ 2.67GHz\nflags\t\t: fpu vme vmx pdpe1gb\naddress sizes\t: 40 bits physical, 48 bits virtual\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme vmx pdpe1gb\n";
        let s = parse_cpu_summary(text);
        assert_eq!(s.vendor.as_deref(), Some("GenuineIntel"));
        assert!(s.vmx && !s.svm && s.pdpe1gb);
        assert_eq!(s.physical_address_bits, Some(40));
        assert_eq!(s.logical_cpus, 2);
        assert_eq!(s.virtualization(), Some("Intel VT-x"));
    }

    #[test]
    fn garbage_is_empty_not_panic() {
        let s = parse_cpu_summary("\u{0}\u{1} garbage : : :\n\n\n");
        assert!(!s.vmx);
        let s = parse_cpu_summary("");
        assert_eq!(s.logical_cpus, 0);
    }
}
