//! Finding a running VM's threads: QEMU's pid from libvirt's pid file, each
//! vCPU's thread id and QOM path from QMP `query-cpus-fast`, the pinning from
//! the domain's `<cputune>`; and KVM's counters from the first source that
//! has them: libvirt's domain statistics (libvirt ≥ 8.x with QEMU ≥ 7.1), QMP
//! `query-stats` (QEMU ≥ 7.1 under an older libvirt), or KVM's debugfs
//! (root, debugfs mounted, no kernel lockdown; whole-VM sums, not per vCPU).

use super::sample::VmThreads;
use crate::domain::inspect::pinning_of;
use crate::domain::xml::Document;
use crate::libvirt::Hypervisor;
use crate::parse::domstats::kvm_counters_of;
use crate::parse::qmp::{parse_cpus_fast, parse_vcpu_stats};
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
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

/// Where KVM's counters came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KvmSource {
    /// libvirt's domain statistics (`virsh domstats --vcpu`).
    Libvirt,
    /// QMP `query-stats`, asked directly.
    Qmp,
    /// `/sys/kernel/debug/kvm/<pid>-<fd>/`: sums over all vCPUs.
    Debugfs,
}

impl KvmSource {
    pub fn label(self) -> &'static str {
        match self {
            KvmSource::Libvirt => "libvirt domain stats",
            KvmSource::Qmp => "QMP query-stats",
            KvmSource::Debugfs => "KVM debugfs (whole VM)",
        }
    }
    const ALL: [KvmSource; 3] = [KvmSource::Libvirt, KvmSource::Qmp, KvmSource::Debugfs];
}

/// (vCPU or `WHOLE_VM`, counter name, value).
pub type KvmCounters = Vec<(u32, String, u64)>;

/// The vCPU index of a counter that is only known for the whole VM (debugfs).
pub const WHOLE_VM: u32 = u32::MAX;

/// The counters read from KVM's debugfs (one file each per VM).
const DEBUGFS_COUNTERS: [&str; 13] = [
    "exits",
    "halt_exits",
    "io_exits",
    "mmio_exits",
    "irq_exits",
    "irq_injections",
    "irq_window_exits",
    "signal_exits",
    "insn_emulation",
    "hypercalls",
    "request_irq_exits",
    "halt_wakeup",
    "tlb_flush",
];

/// KVM's counters: (vCPU or `WHOLE_VM`, name, value), from `prefer` when it
/// worked last time, else from the first source that has any. The error
/// names why each source gave nothing.
pub fn kvm_counters(
    hv: &dyn Hypervisor,
    root: &HostRoot,
    vm: &VmThreads,
    prefer: Option<KvmSource>,
) -> Result<(KvmSource, KvmCounters), String> {
    let mut why = Vec::new();
    let order = prefer
        .into_iter()
        .chain(KvmSource::ALL.into_iter().filter(|s| Some(*s) != prefer));
    for source in order {
        let got = match source {
            KvmSource::Libvirt => hv
                .vcpu_stats(&vm.name)
                .map(|p| kvm_counters_of(&p))
                .map_err(|e| e.to_string()),
            KvmSource::Qmp => qmp_counters(hv, vm),
            KvmSource::Debugfs => debugfs_counters(root, vm.pid),
        };
        match got {
            Ok(c) if !c.is_empty() => return Ok((source, c)),
            Ok(_) => why.push(format!("{}: no KVM counters", source.label())),
            Err(e) => why.push(format!("{}: {e}", source.label())),
        }
    }
    Err(why.join("; "))
}

fn qmp_counters(hv: &dyn Hypervisor, vm: &VmThreads) -> Result<KvmCounters, String> {
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

/// `/sys/kernel/debug/kvm/<pid>-<vm fd>/<counter>`: each file is the sum over
/// the VM's vCPUs (the `vcpuN/` directories hold no counters).
pub fn debugfs_counters(root: &HostRoot, pid: u32) -> Result<KvmCounters, String> {
    let base = HostPath::sys("kernel/debug/kvm");
    let names = root
        .list_dir(&base)
        .map_err(|e| format!("{e} (mount debugfs on /sys/kernel/debug, as root)"))?;
    let pid = pid.to_string();
    let dir = names
        .iter()
        .find(|n| n.split_once('-').is_some_and(|(p, _)| p == pid))
        .ok_or_else(|| format!("no directory for QEMU's pid {pid} in {base}"))?;
    let mut out = Vec::new();
    for name in DEBUGFS_COUNTERS {
        let path = base.join(format!("{dir}/{name}"));
        match root.read_text(&path) {
            Ok(t) => {
                if let Ok(v) = t.trim().parse() {
                    out.push((WHOLE_VM, name.to_string(), v));
                }
            }
            Err(e) if e.is_not_found() => continue,
            // Permission (not root, or kernel lockdown): the rest fail alike.
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(out)
}
