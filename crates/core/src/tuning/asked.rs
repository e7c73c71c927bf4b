//! The one builder of a tuning `Request`, for both faces: each face's edge
//! (`tune`'s flags, the Tuning page's choices) fills an `Asked` with what
//! the user said, and `Asked::request` works out the rest the same way for
//! both — which VM the hooks are for, which GPU mode it is, the units the
//! shared-GPU hook may stop, vCPUs or a CPU list. A new option is a field
//! here and in `Request`, one line per face, and its kind.

use super::kind::ChangeId;
use super::model::Request;
use crate::host::pci_addr::PciAddr;
use std::collections::BTreeMap;

/// What the user asked for, as a face collects it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    pub gpus: Vec<PciAddr>,
    pub devices: Vec<PciAddr>,
    /// vCPUs for the pinning planner; set aside when `cpus` is given.
    pub vcpus: Option<usize>,
    pub cpus: Option<Vec<u32>>,
    pub memory_mib: Option<u64>,
    pub hugepages_1g: bool,
    pub sriov: BTreeMap<PciAddr, u32>,
    pub only: Vec<ChangeId>,
    /// Dynamic isolation: the hook for this VM.
    pub isolate_vm: Option<String>,
    /// No boot-time isolation of the VM's CPUs (`--no-isolcpus`).
    pub host_keeps_vm_cpus: bool,
    /// Single-GPU passthrough for this VM (with the isolation hook only
    /// when both are for the same VM).
    pub single_gpu_vm: Option<String>,
    /// Shared GPU for this VM (not beside single-GPU passthrough).
    pub shared_gpu_vm: Option<String>,
    /// Units the shared-GPU hook may stop (kept only in shared mode).
    pub shared_stop_units: Vec<String>,
    pub looking_glass_mib: Option<u64>,
    pub kvmfr: bool,
    pub qemu_as_user: bool,
    pub desktop_user: Option<String>,
}

impl Asked {
    /// The request, the same from either face.
    pub fn request(self) -> Request {
        let single_gpu = self.single_gpu_vm.is_some()
            && (self.isolate_vm.is_none() || self.isolate_vm == self.single_gpu_vm);
        let shared_gpu = self.shared_gpu_vm.is_some() && self.single_gpu_vm.is_none();
        Request {
            gpus: self.gpus,
            devices: self.devices,
            vcpus: self.vcpus.filter(|_| self.cpus.is_none()),
            cpus: self.cpus,
            memory_mib: self.memory_mib,
            hugepages_1g: self.hugepages_1g,
            sriov: self.sriov,
            only: self.only,
            isolation_hook: self.isolate_vm.is_some(),
            host_keeps_vm_cpus: self.host_keeps_vm_cpus,
            vm: self
                .isolate_vm
                .or(self.single_gpu_vm)
                .or(self.shared_gpu_vm),
            single_gpu,
            shared_gpu,
            shared_stop_units: if shared_gpu {
                self.shared_stop_units
            } else {
                Vec::new()
            },
            looking_glass_mib: self.looking_glass_mib,
            kvmfr: self.kvmfr,
            qemu_as_user: self.qemu_as_user,
            desktop_user: self.desktop_user,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(name: &str) -> Option<String> {
        Some(name.to_string())
    }

    #[test]
    fn the_vm_and_the_gpu_mode_are_worked_out_once() {
        let r = Asked {
            isolate_vm: vm("win"),
            single_gpu_vm: vm("win"),
            vcpus: Some(8),
            cpus: Some(vec![2, 3]),
            ..Asked::default()
        }
        .request();
        assert_eq!(r.vm.as_deref(), Some("win"));
        assert!(r.isolation_hook && r.single_gpu && !r.shared_gpu);
        assert_eq!((r.vcpus, r.cpus), (None, Some(vec![2, 3])));
        // Single-GPU for another VM than the isolation hook's: not asked.
        let r = Asked {
            isolate_vm: vm("a"),
            single_gpu_vm: vm("b"),
            ..Asked::default()
        }
        .request();
        assert!(!r.single_gpu && r.vm.as_deref() == Some("a"));
        // Shared mode keeps its units; beside single-GPU it is not asked.
        let shared = Asked {
            shared_gpu_vm: vm("s"),
            shared_stop_units: vec!["ollama.service".into()],
            ..Asked::default()
        };
        let r = shared.clone().request();
        assert!(r.shared_gpu && r.shared_stop_units == ["ollama.service"]);
        assert_eq!(r.vm.as_deref(), Some("s"));
        let r = Asked {
            single_gpu_vm: vm("t"),
            ..shared
        }
        .request();
        assert!(!r.shared_gpu && r.shared_stop_units.is_empty() && r.single_gpu);
        assert_eq!(r.vm.as_deref(), Some("t"));
    }
}
