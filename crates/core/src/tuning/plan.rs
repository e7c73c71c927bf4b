//! The plan: from the host snapshot, the tuning facts and the user's
//! request to the list of changes — pure. Every request value is checked
//! against the host (devices that exist and can go to a VM, CPUs that are
//! online, VF counts within `sriov_totalvfs`, kernel tokens from the closed
//! set), so the privileged helper can take a request from anyone and plan
//! for itself. After a successful apply the same request plans nothing.

use super::boot::boot_info;
use super::boot_plan::{plan_boot, tokens};
use super::devices::passthrough_set;
use super::facts::TuneFacts;
use super::kinds::{ChangeId, Ctx, KINDS, Kind, Planned, kind_fixing};
use super::model::{Plan, Request};
use crate::host::HostSnapshot;
use crate::parse::cpulist::format_cpulist;
use crate::pinning::{PinRequest, plan as pin_plan};
use crate::tuning::paths;

pub use super::plan_error::PlanError;

/// Single GPU: its card goes to the VM when the VM starts (the hook) and
/// back when it stops — never at boot, which would leave the host with no
/// screen. The set bound at boot is everything else asked for (a USB
/// controller, a NIC); the IOMMU parameters still come from the whole set.
fn boot_set(snap: &HostSnapshot, req: &Request, set: &[String]) -> Result<Vec<String>, PlanError> {
    if !(req.single_gpu || req.shared_gpu) {
        return Ok(set.to_vec());
    }
    let gpus = passthrough_set(
        snap,
        &Request {
            gpus: req.gpus.clone(),
            ..Request::default()
        },
    )?;
    Ok(set.iter().filter(|a| !gpus.contains(a)).cloned().collect())
}

/// The VM's CPUs, the host's, and the NUMA node for hugepages.
type CpuSplit = (Vec<u32>, Vec<u32>, Option<u32>);

fn cpus_of(snap: &HostSnapshot, req: &Request, set: &[String]) -> Result<CpuSplit, PlanError> {
    let online: Vec<u32> = snap.topology.online_cpus().map(|c| c.id).collect();
    if let Some(cpus) = &req.cpus {
        for c in cpus {
            if !online.contains(c) {
                return Err(PlanError::NoCpu(*c, format_cpulist(&online)));
            }
        }
        let mut vm = cpus.clone();
        vm.sort_unstable();
        vm.dedup();
        let hk: Vec<u32> = online.iter().copied().filter(|c| !vm.contains(c)).collect();
        let node = snap
            .topology
            .cpu(vm.first().copied().unwrap_or(0))
            .and_then(|c| c.numa_node);
        return Ok((vm, hk, node));
    }
    if let Some(n) = req.vcpus {
        let gpu_node = set
            .first()
            .and_then(|a| snap.device(a))
            .and_then(|e| e.device.numa_node);
        let r = PinRequest {
            vcpus: n,
            gpu_numa_node: gpu_node,
            amd: snap.cpu.vendor.as_deref() == Some("AuthenticAMD"),
            ..PinRequest::default()
        };
        let p = pin_plan(&snap.topology, &r).map_err(|e| PlanError::Pinning(e.to_string()))?;
        return Ok((
            p.vm_cpus.clone(),
            p.housekeeping_cpus.clone(),
            p.numa_nodes.first().copied(),
        ));
    }
    Ok((Vec::new(), Vec::new(), None))
}

/// The change kind that fixes a finding, for the app's Fix buttons (each
/// kind's `fixes` in the table).
pub fn change_for_finding(finding: &str) -> Option<Kind> {
    kind_fixing(finding)
}

/// The change kind that fixes this finding now, if the tuning engine can:
/// not when its fix says something else must come first (the IOMMU's
/// kernel parameter is no help while the firmware offers no IOMMU table).
pub fn change_fixing(f: &crate::finding::Finding) -> Option<Kind> {
    let first_something_else = f.fix.as_deref().is_some_and(|x| x.starts_with("First "));
    change_for_finding(&f.id).filter(|_| !first_something_else)
}

fn wanted(req: &Request, id: &ChangeId) -> bool {
    req.only.is_empty() || req.only.iter().any(|o| o.covers(id))
}

/// Plan the changes for `req` on this host: what every kind needs is
/// worked out once (the devices, the CPUs, the kernel parameters, the boot
/// changes), then each kind of `KINDS` plans in the table's order.
pub fn plan(snap: &HostSnapshot, f: &TuneFacts, req: &Request) -> Result<Plan, PlanError> {
    let (loader, generator, boot) = boot_info(f);
    let full_set = passthrough_set(snap, req)?;
    let (vm, hk, node) = cpus_of(snap, req, &full_set)?;
    if let (Some(mib), Some(total)) = (req.memory_mib, snap.kernel.mem_total_kib)
        && mib.saturating_mul(1024) > total
    {
        return Err(PlanError::Memory(mib));
    }
    let mut out = Planned::default();
    let tok = tokens(snap, f, req, &full_set, &vm, &hk, &mut out.manual);
    let set = boot_set(snap, req, &full_set)?;
    if req.single_gpu && set.len() < full_set.len() {
        out.notes.push("Single GPU: the card is handed to the VM when it starts and given back when it stops (the hook), never at boot — it is not bound to vfio-pci at boot, so the host keeps its screen.".into());
    }
    if req.shared_gpu && set.len() < full_set.len() {
        out.notes.extend(super::shared_gpu::describe(req));
    }
    let boot_changes = plan_boot(snap, f, (loader, generator), &set, &tok)?;
    // What an asked-for change needs comes with it (`Change::needs`): the
    // binding at boot alone would claim nothing.
    let needed: Vec<ChangeId> = boot_changes
        .vfio_boot
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .filter(|c| wanted(req, &c.id))
        .map(|c| c.needs.clone())
        .unwrap_or_default();
    let cx = Ctx {
        snap,
        facts: f,
        req,
        set: &set,
        vm: &vm,
        hk: &hk,
        node,
        systemd: f.markers.contains(paths::RUN_SYSTEMD_SYSTEM),
        tokens: &tok,
        boot: &boot_changes,
    };
    for spec in KINDS {
        if let Some(planner) = planner(spec.kind) {
            planner(&cx, &mut out)?;
            out.changes
                .retain(|c| (wanted(req, &c.id) || needed.contains(&c.id)) && !c.is_empty());
        }
    }
    // One file, one change: two writing the same file from the same
    // before-state would undo each other (and undo could not tell).
    let mut seen = std::collections::BTreeMap::new();
    for c in &out.changes {
        for fc in &c.files {
            if let Some(other) = seen.insert(fc.path.clone(), c.id.clone()) {
                return Err(PlanError::Conflict(
                    fc.path.clone(),
                    other.to_string(),
                    c.id.to_string(),
                ));
            }
        }
    }
    if full_set.is_empty() {
        out.notes.push(
            "No GPU or device was given: nothing is bound to vfio-pci (choose the VM's GPU; or in a terminal: --gpu ADDRESS).".into(),
        );
    }
    if vm.is_empty() {
        out.notes.push("No vCPUs or CPU list was given: the governor applies to every CPU, and no CPU is isolated (give the VM's vCPUs; or in a terminal: --vcpus N or --cpus LIST).".into());
    }
    let mut boot = boot;
    match out.changes.iter().find(|c| c.id.kind == Kind::Cmdline) {
        Some(c) if !c.boots_once() => {
            if let Some(r) = super::boot::recovery_in_place(loader) {
                boot.recovery = r;
            }
        }
        Some(_) => {}
        // No entry of ours to boot once: the words of one would be untrue.
        None if out.changes.iter().any(|c| c.id.kind == Kind::VfioBoot) => {
            if let Some(r) = super::boot::recovery_initramfs_only(loader) {
                boot.recovery = r;
            }
        }
        None => {}
    }
    Ok(Plan {
        boot,
        changes: out.changes,
        manual: out.manual,
        notes: out.notes,
    })
}

/// Each kind's planner: none for a kind planned by another's (EPP with the
/// governor) or only ever a manual step (the IOMMU in the firmware). An
/// exhaustive match: a kind without its arm does not compile.
pub fn planner(kind: Kind) -> Option<super::kinds::Planner> {
    match kind {
        Kind::VfioBoot => Some(super::boot_plan::plan_vfio_boot),
        Kind::Cmdline => Some(super::boot_plan::plan_cmdline),
        Kind::IommuFirmware => None,
        Kind::VfioBind => Some(super::kinds::vfio_bind::plan_vfio_bind),
        Kind::Governor => Some(super::kinds::governor::plan_governor),
        Kind::Epp => None,
        Kind::Thp => Some(super::kinds::thp::plan_thp),
        Kind::Ksm => Some(super::kinds::ksm::plan_ksm),
        Kind::Hugepages => Some(super::kinds::hugepages::plan_hugepages),
        Kind::IrqAffinity => Some(super::kinds::irq_affinity::plan_irq_affinity),
        Kind::Irqbalance => Some(super::kinds::irqbalance::plan_irqbalance),
        Kind::IsolationHook => Some(super::hook::plan),
        Kind::SingleGpuHook => Some(super::single_gpu::plan),
        Kind::SharedGpuDesktop => Some(super::shared_desktop::plan),
        Kind::SharedGpuHook => Some(super::shared_gpu::plan),
        Kind::LookingGlassShm => Some(super::play::plan_looking_glass_shm),
        Kind::Kvmfr => Some(super::play::plan_kvmfr),
        Kind::QemuConf => Some(super::play::plan_qemu_conf),
        Kind::Sriov => Some(super::kinds::sriov::plan_sriov),
        Kind::Persist => Some(super::kinds::persist::plan_persist),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_filters_by_id() {
        let req = Request {
            only: vec!["thp".parse().unwrap(), "sriov".parse().unwrap()],
            ..Request::default()
        };
        assert!(wanted(&req, &ChangeId::of(Kind::Thp)));
        assert!(wanted(&req, &ChangeId::sriov("0000:01:00.0")));
        assert!(!wanted(&req, &ChangeId::of(Kind::Ksm)));
        assert!(wanted(&Request::default(), &ChangeId::of(Kind::Ksm)));
    }
}
