//! Finding a running VM's threads: QEMU's pid from libvirt's pid file, each
//! vCPU's thread id and QOM path from QMP `query-cpus-fast`, the pinning from
//! the domain's `<cputune>`; and KVM's counters from the first source that
//! has them: libvirt's domain statistics (libvirt ≥ 8.x with QEMU ≥ 7.1), QMP
//! `query-stats` (QEMU ≥ 7.1 under an older libvirt), or KVM's debugfs
//! (root, debugfs mounted, no kernel lockdown; whole-VM sums, not per vCPU).

use super::sample::VmThreads;
use crate::domain::inspect::pinning_of;
use crate::domain::xml::Document;
use crate::hypervisor::Hypervisor;
use crate::parse::domstats::kvm_counters_of;
use crate::parse::qmp::{parse_cpus_fast, parse_vcpu_stats};
use crate::sysroot::{HostPath, HostRoot, ReadError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a running VM's threads or KVM counters could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmError {
    /// libvirt or QMP said no (the domain is unknown, the connection broke).
    #[error("{0}")]
    Libvirt(String),
    #[error("'{name}' is {state}, not running")]
    NotRunning { name: String, state: String },
    #[error("QEMU's pid: {0}")]
    Pid(ReadError),
    #[error("QEMU's pid file {path} holds no number: {value:?}")]
    PidNotNumber { path: String, value: String },
    /// A QMP reply that does not say what it should.
    #[error("QMP: {0}")]
    Qmp(String),
    #[error(
        "{0} (KVM's debugfs: mount it on /sys/kernel/debug, as root; a kernel locked down by Secure Boot keeps it closed, and libvirt's or QEMU's counters are the way)"
    )]
    NoDebugfs(ReadError),
    #[error("no directory for QEMU's pid {pid} in {dir}")]
    NoDebugfsVm { pid: u32, dir: String },
    #[error("{0}")]
    Read(ReadError),
}

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

pub fn find_vm(hv: &dyn Hypervisor, root: &HostRoot, name: &str) -> Result<VmThreads, VmError> {
    let state = hv
        .state(name)
        .map_err(|e| VmError::Libvirt(e.to_string()))?;
    if !state.is_active() {
        return Err(VmError::NotRunning {
            name: name.to_string(),
            state: state.label().to_string(),
        });
    }
    let pid_file = HostPath::run(&format!("libvirt/qemu/{name}.pid"));
    let text = root.read_text(&pid_file).map_err(VmError::Pid)?;
    let pid = text
        .trim()
        .parse::<u32>()
        .map_err(|_| VmError::PidNotNumber {
            path: pid_file.to_string(),
            value: text.trim().chars().take(40).collect(),
        })?;
    let reply = hv
        .qmp(name, r#"{"execute":"query-cpus-fast"}"#)
        .map_err(|e| VmError::Libvirt(e.to_string()))?;
    let cpus = parse_cpus_fast(&reply).map_err(|e| VmError::Qmp(e.to_string()))?;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
) -> Result<(KvmSource, KvmCounters), NoKvmCounters> {
    let mut why = Vec::new();
    let order = prefer
        .into_iter()
        .chain(KvmSource::ALL.into_iter().filter(|s| Some(*s) != prefer));
    for source in order {
        let got = match source {
            KvmSource::Libvirt => hv
                .vcpu_stats(&vm.name)
                .map(|p| kvm_counters_of(&p))
                .map_err(|e| VmError::Libvirt(e.to_string())),
            KvmSource::Qmp => qmp_counters(hv, vm),
            KvmSource::Debugfs => debugfs_counters(root, vm.pid),
        };
        match got {
            Ok(c) if !c.is_empty() => return Ok((source, c)),
            Ok(_) => why.push((source, None)),
            Err(e) => why.push((source, Some(e))),
        }
    }
    Err(NoKvmCounters(why))
}

/// Why no source gave KVM counters: each source tried, with its error (none:
/// it answered with no counters).
#[derive(Debug)]
pub struct NoKvmCounters(pub Vec<(KvmSource, Option<VmError>)>);

impl std::fmt::Display for NoKvmCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (source, e)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            match e {
                Some(e) => write!(f, "{sep}{}: {e}", source.label())?,
                None => write!(f, "{sep}{}: no KVM counters", source.label())?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for NoKvmCounters {}

fn qmp_counters(hv: &dyn Hypervisor, vm: &VmThreads) -> Result<KvmCounters, VmError> {
    let reply = hv
        .qmp(
            &vm.name,
            r#"{"execute":"query-stats","arguments":{"target":"vcpu"}}"#,
        )
        .map_err(|e| VmError::Libvirt(e.to_string()))?;
    let by_path: BTreeMap<&str, u32> = vm.qom_paths.iter().map(|(i, p)| (p.as_str(), *i)).collect();
    let stats = parse_vcpu_stats(&reply).map_err(|e| VmError::Qmp(e.to_string()))?;
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
pub fn debugfs_counters(root: &HostRoot, pid: u32) -> Result<KvmCounters, VmError> {
    let base = HostPath::sys("kernel/debug/kvm");
    let names = root.list_dir(&base).map_err(VmError::NoDebugfs)?;
    let want = pid.to_string();
    let dir = names
        .iter()
        .find(|n| n.split_once('-').is_some_and(|(p, _)| p == want))
        .ok_or_else(|| VmError::NoDebugfsVm {
            pid,
            dir: base.to_string(),
        })?;
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
            Err(e) => return Err(VmError::Read(e)),
        }
    }
    Ok(out)
}
