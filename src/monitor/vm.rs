//! Finding a running VM's threads: QEMU's pid from libvirt's pid file, each
//! vCPU's thread id and QOM path from QMP `query-cpus-fast`, the pinning from
//! the domain's `<cputune>`; and KVM's per-vCPU counters from QMP `query-stats`.

use super::sample::VmThreads;
use crate::domain::inspect::pinning_of;
use crate::domain::xml::Document;
use crate::libvirt::Hypervisor;
use crate::parse::qmp::{parse_cpus_fast, parse_vcpu_stats};
use crate::sysroot::{HostPath, HostRoot};
use std::collections::BTreeMap;

/// vCPU → host CPUs from `<cputune><vcpupin vcpu= cpuset=>`.
pub fn pins_of(domain_xml: &str) -> BTreeMap<u32, Vec<u32>> {
    let Ok(doc) = Document::parse(domain_xml) else {
        return BTreeMap::new();
    };
    pinning_of(&doc)
        .vcpus
        .into_iter()
        .map(|(v, set)| (v, set.into_iter().collect()))
        .collect()
}

pub fn find_vm(hv: &dyn Hypervisor, root: &HostRoot, name: &str) -> Result<VmThreads, String> {
    let state = hv.state(name).map_err(|e| e.to_string())?;
    if !state.is_active() {
        return Err(format!("'{name}' is {}, not running", state.label()));
    }
    let pid_file = HostPath::run(&format!("libvirt/qemu/{name}.pid"));
    let pid = root
        .read_text(&pid_file)
        .map_err(|e| format!("QEMU's pid: {e}"))?
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("QEMU's pid file {} holds no number", pid_file))?;
    let reply = hv
        .qmp(name, r#"{"execute":"query-cpus-fast"}"#)
        .map_err(|e| e.to_string())?;
    let cpus = parse_cpus_fast(&reply).map_err(|e| e.to_string())?;
    let pins = hv.domain_xml(name).map(|x| pins_of(&x)).unwrap_or_default();
    Ok(VmThreads {
        name: name.to_string(),
        pid,
        vcpus: cpus.iter().map(|c| (c.index, c.thread_id)).collect(),
        qom_paths: cpus.iter().map(|c| (c.index, c.qom_path.clone())).collect(),
        pins,
    })
}

/// KVM's counters per vCPU: (vCPU, name, value).
pub fn kvm_counters(
    hv: &dyn Hypervisor,
    vm: &VmThreads,
) -> Result<Vec<(u32, String, u64)>, String> {
    let reply = hv
        .qmp(
            &vm.name,
            r#"{"execute":"query-stats","arguments":{"target":"vcpu"}}"#,
        )
        .map_err(|e| e.to_string())?;
    let by_path: BTreeMap<&str, u32> = vm.qom_paths.iter().map(|(i, p)| (p.as_str(), *i)).collect();
    let stats = parse_vcpu_stats(&reply).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (path, counters) in stats {
        let Some(&vcpu) = by_path.get(path.as_str()) else {
            continue;
        };
        out.extend(counters.into_iter().map(|(n, v)| (vcpu, n, v)));
    }
    Ok(out)
}
