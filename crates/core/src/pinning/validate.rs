//! The pinning validator: any pinning (a plan, or the user's own from an
//! existing domain) against the topology, with a reason for each problem.

use super::model::GuestTopology;
use crate::host::topology::Topology;
use crate::parse::cpulist::format_cpulist;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The VM will not start or will run badly for sure.
    Error,
    /// Costs latency or throughput.
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinProblem {
    pub severity: Severity,
    /// Short stable kind: `offline_cpu`, `shared_cpu`, `split_siblings`, …
    pub kind: String,
    /// The vCPUs concerned.
    pub vcpus: Vec<u32>,
    pub reason: String,
}

/// A pinning as libvirt holds it: each vCPU's cpuset, the emulator's cpuset and
/// the guest topology the domain claims.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinning {
    pub vcpus: BTreeMap<u32, BTreeSet<u32>>,
    pub emulator: BTreeSet<u32>,
    pub guest: Option<GuestTopology>,
}

fn problem(severity: Severity, kind: &str, vcpus: Vec<u32>, reason: String) -> PinProblem {
    PinProblem {
        severity,
        kind: kind.to_string(),
        vcpus,
        reason,
    }
}

pub fn validate(t: &Topology, p: &Pinning) -> Vec<PinProblem> {
    let mut out = Vec::new();
    // Offline or missing CPUs.
    for (v, set) in &p.vcpus {
        let bad: Vec<u32> = set
            .iter()
            .copied()
            .filter(|c| !t.cpu(*c).is_some_and(|x| x.online))
            .collect();
        if !bad.is_empty() {
            out.push(problem(Severity::Error, "offline_cpu", vec![*v], format!("vCPU {v} is pinned to CPU {} which is offline or does not exist: the VM will not start.", format_cpulist(&bad))));
        }
        if set.len() > 1 {
            out.push(problem(Severity::Warning, "floating", vec![*v], format!("vCPU {v} may run on any of CPUs {}: pin each vCPU to one thread so its cache stays warm.", format_cpulist(set))));
        }
    }
    // The same host CPU for two vCPUs.
    let mut by_cpu: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (v, set) in &p.vcpus {
        if set.len() == 1
            && let Some(c) = set.first()
        {
            by_cpu.entry(*c).or_default().push(*v);
        }
    }
    for (c, vs) in &by_cpu {
        if vs.len() > 1 {
            out.push(problem(
                Severity::Error,
                "shared_cpu",
                vs.clone(),
                format!(
                    "vCPUs {} share host CPU {c}: they take turns, each runs at half speed.",
                    format_cpulist(vs)
                ),
            ));
        }
    }
    // CPU 0 and the emulator's CPUs. CPU 0 in the biggest of unequal L3
    // groups (X3D) may go to a VM that holds that group, once the host's
    // emulator has moved off it: that is the plan, not a slip.
    let cpu0_given_with_big_l3 = super::vcache::cpu0_on_big_l3(t).is_some_and(|g| {
        !p.emulator.is_empty()
            && p.emulator
                .iter()
                .all(|e| t.cpu(*e).is_some_and(|x| x.l3_group != Some(g)))
    });
    for (c, vs) in &by_cpu {
        if *c == 0 && !cpu0_given_with_big_l3 {
            out.push(problem(Severity::Warning, "cpu0", vs.clone(), "vCPU on CPU 0: the host handles most interrupts and timers there; keep CPU 0 for the host.".into()));
        }
        if p.emulator.contains(c) {
            out.push(problem(Severity::Warning, "emulator_overlap", vs.clone(), format!("vCPU on CPU {c}, where the emulator thread runs too: disk and network work preempts the vCPU.")));
        }
    }
    // Host cores, L3 groups and NUMA nodes used.
    let core_of = |c: u32| t.cpu(c).and_then(|x| x.core);
    let mut vcpus_by_core: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (c, vs) in &by_cpu {
        if let Some(k) = core_of(*c) {
            vcpus_by_core.entry(k).or_default().extend(vs);
        }
    }
    let l3s: BTreeSet<usize> = by_cpu
        .keys()
        .filter_map(|c| t.cpu(*c).and_then(|x| x.l3_group))
        .collect();
    let nodes: BTreeSet<u32> = by_cpu
        .keys()
        .filter_map(|c| t.cpu(*c).and_then(|x| x.numa_node))
        .collect();
    let all: Vec<u32> = p.vcpus.keys().copied().collect();
    if l3s.len() > 1 {
        out.push(problem(Severity::Warning, "crosses_l3", all.clone(), format!("The vCPUs span {} L3 groups: threads of one game share data across caches (slower on CCX/CCD designs). Keep them in one group if it fits.", l3s.len())));
    }
    if nodes.len() > 1 {
        out.push(problem(Severity::Warning, "crosses_numa", all.clone(), format!("The vCPUs span NUMA nodes {}: memory access from the far node crosses the interconnect.", format_cpulist(&nodes.iter().copied().collect::<Vec<_>>()))));
    }
    // Guest topology vs host sibling pairs.
    let threads = p.guest.map(|g| g.threads.max(1)).unwrap_or(1);
    let guest_core = |v: u32| v / threads;
    for vs in vcpus_by_core.values() {
        let gcores: BTreeSet<u32> = vs.iter().map(|v| guest_core(*v)).collect();
        if vs.len() > 1 && gcores.len() > 1 {
            out.push(problem(Severity::Warning, "split_siblings", vs.clone(), format!("vCPUs {} share one host core (SMT siblings) but the guest sees them as different cores: it will load both as if they were independent.", format_cpulist(vs))));
        }
    }
    if threads > 1 {
        let mut by_gcore: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
        for (v, set) in &p.vcpus {
            if let Some(k) = set.first().and_then(|c| core_of(*c)) {
                by_gcore.entry(guest_core(*v)).or_default().insert(k);
            }
        }
        let liars: Vec<u32> = by_gcore
            .iter()
            .filter(|(_, ks)| ks.len() > 1)
            .map(|(g, _)| *g)
            .collect();
        if !liars.is_empty() {
            out.push(problem(Severity::Warning, "topology_lies", Vec::new(), format!("The guest topology says {threads} threads per core, but guest cores {} are spread over different host cores: the guest's scheduler is misled.", format_cpulist(&liars))));
        }
    }
    // A host core half with the VM, half with the host.
    for (k, vs) in &vcpus_by_core {
        if let Some(core) = t.cores.get(*k) {
            let used: BTreeSet<u32> = vs
                .iter()
                .filter_map(|v| p.vcpus.get(v).and_then(|s| s.first().copied()))
                .collect();
            let idle: Vec<u32> = core
                .cpus
                .iter()
                .copied()
                .filter(|c| !used.contains(c))
                .collect();
            if !idle.is_empty() && p.emulator.iter().any(|e| idle.contains(e)) {
                out.push(problem(Severity::Warning, "core_shared_with_host", vs.clone(), format!("Host core with CPUs {} is split: the VM has part of it and the host's emulator the rest, so they slow each other down.", format_cpulist(&core.cpus))));
            }
        }
    }
    out.sort_by(|a, b| (a.severity, &a.kind).cmp(&(b.severity, &b.kind)));
    out
}
