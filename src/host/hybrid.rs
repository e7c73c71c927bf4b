//! Hybrid CPUs: which cores are performance and which efficiency cores.
//!
//! Intel exposes two PMUs (`sys/devices/cpu_core/cpus`, `cpu_atom/cpus`); ARM
//! exposes `cpu_capacity` per CPU; where neither exists, different base
//! frequencies tell the kinds apart (what hwloc does for Intel hybrids).

use super::cpuset::read_cpuset;
use super::topology::{Core, CoreKind, LogicalCpu};
use super::warnings::Warnings;
use crate::sysroot::{HostPath, HostRoot};
use std::collections::{BTreeMap, BTreeSet};

/// Classify cores into kinds; sets `Core::kind`. One kind (or none) = not hybrid.
pub fn classify(
    root: &HostRoot,
    cpus: &[LogicalCpu],
    cores: &mut [Core],
    warnings: &mut Warnings,
) -> Vec<CoreKind> {
    // Each entry: a performance rank (higher = faster) per CPU.
    let (ranks, source): (BTreeMap<u32, u64>, &str) = if let Some(r) = intel_pmus(root, warnings) {
        (r, "intel_pmu")
    } else if let Some(r) = by_value(cpus, |c| c.capacity) {
        (r, "cpu_capacity")
    } else if let Some(r) = by_value(cpus, |c| c.base_freq_khz) {
        (r, "base_frequency")
    } else {
        return Vec::new();
    };
    let distinct: BTreeSet<u64> = cores
        .iter()
        .filter_map(|c| c.cpus.first().and_then(|f| ranks.get(f)).copied())
        .collect();
    if distinct.len() < 2 {
        return Vec::new();
    }
    let order: Vec<u64> = distinct.into_iter().collect();
    let n = order.len();
    let mut kinds: Vec<CoreKind> = order
        .iter()
        .enumerate()
        .map(|(i, _)| CoreKind {
            efficiency: u8::try_from(i).unwrap_or(u8::MAX),
            name: kind_name(source, i, n),
            source: source.to_string(),
            cores: 0,
            cpus: Vec::new(),
        })
        .collect();
    for core in cores.iter_mut() {
        let Some(rank) = core.cpus.first().and_then(|f| ranks.get(f)) else {
            continue;
        };
        if let Some(i) = order.iter().position(|r| r == rank) {
            core.kind = Some(i);
            kinds[i].cores += 1;
            kinds[i].cpus.extend(core.cpus.iter().copied());
        }
    }
    for k in &mut kinds {
        k.cpus.sort_unstable();
    }
    kinds
}

fn kind_name(source: &str, i: usize, n: usize) -> String {
    let intel = source != "cpu_capacity";
    match (intel, i, n) {
        (true, 0, _) => "E-core".into(),
        (true, _, _) if i == n - 1 => "P-core".into(),
        (false, 0, _) => "LITTLE".into(),
        (false, _, _) if i == n - 1 => "big".into(),
        _ => format!("mid-{i}"),
    }
}

fn intel_pmus(root: &HostRoot, warnings: &mut Warnings) -> Option<BTreeMap<u32, u64>> {
    let p = read_cpuset(root, &HostPath::sys("devices/cpu_core"), "cpus", warnings)?;
    let e = read_cpuset(root, &HostPath::sys("devices/cpu_atom"), "cpus", warnings)?;
    let mut map = BTreeMap::new();
    for c in e {
        map.insert(c, 0);
    }
    for c in p {
        map.insert(c, 1);
    }
    Some(map)
}

fn by_value(
    cpus: &[LogicalCpu],
    f: impl Fn(&LogicalCpu) -> Option<u64>,
) -> Option<BTreeMap<u32, u64>> {
    let map: BTreeMap<u32, u64> = cpus
        .iter()
        .filter(|c| c.online)
        .filter_map(|c| f(c).map(|v| (c.id, v)))
        .collect();
    let distinct: BTreeSet<u64> = map.values().copied().collect();
    (distinct.len() > 1).then_some(map)
}
