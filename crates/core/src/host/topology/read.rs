//! The topology read from sysfs: each CPU's ids, siblings, caches and
//! frequencies, then the cores (by sibling set), packages and cache groups
//! built from them, and the summary. Never fails: what cannot be read is a
//! warning.

use super::*;
use crate::host::cpuset::read_cpuset;
use crate::host::freq::read_cpufreq;
use crate::host::numa::read_numa;
use crate::host::warnings::Warnings;
use crate::parse::values::{parse_i64, parse_size_kib, parse_u64};
use crate::sysroot::{HostPath, HostRoot};
use std::collections::{BTreeMap, BTreeSet};

fn cpu_dir(id: u32) -> HostPath {
    HostPath::sys(&format!("devices/system/cpu/cpu{id}"))
}

/// The CPUs isolated with `isolcpus` (`isolated`) and those without a timer
/// tick (`nohz_full`); none where a file is absent or unreadable.
pub fn read_isolation(root: &HostRoot, warnings: &mut Warnings) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let base = HostPath::sys("devices/system/cpu");
    let isolated = read_cpuset(root, &base, "isolated", warnings).unwrap_or_default();
    let nohz_full = read_cpuset(root, &base, "nohz_full", warnings).unwrap_or_default();
    (isolated, nohz_full)
}

/// Read the whole topology. Never fails: what cannot be read is a warning.
pub fn read_topology(root: &HostRoot, warnings: &mut Warnings) -> Topology {
    let base = HostPath::sys("devices/system/cpu");
    let dir_ids: BTreeSet<u32> = root
        .list_dir(&base)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.strip_prefix("cpu").and_then(|s| s.parse().ok()))
        .collect();
    let present = read_cpuset(root, &base, "present", warnings).unwrap_or_else(|| dir_ids.clone());
    let present: BTreeSet<u32> = present.union(&dir_ids).copied().collect();
    let online_list = read_cpuset(root, &base, "online", warnings);
    let (isolated, nohz_full) = read_isolation(root, warnings);
    let freq = read_cpufreq(root, &present, warnings);

    let mut cpus = Vec::new();
    for &id in &present {
        let dir = cpu_dir(id);
        let online = match &online_list {
            Some(list) => list.contains(&id),
            None => warnings
                .take_opt(root.read_attr_opt(&dir.join("online")))
                .map(|v| v == "1")
                .unwrap_or_else(|| root.is_dir(&dir.join("topology"))),
        };
        let topo = dir.join("topology");
        let num = |name: &str, w: &mut Warnings| {
            w.take_opt(root.read_parsed(&topo.join(name), parse_i64))
        };
        let (package_id, die_id, cluster_id, core_id) = if online {
            (
                num("physical_package_id", warnings),
                num("die_id", warnings),
                num("cluster_id", warnings),
                num("core_id", warnings),
            )
        } else {
            (None, None, None, None)
        };
        let f: CpuFreq = freq.get(&id).cloned().unwrap_or_default();
        cpus.push(LogicalCpu {
            id,
            online,
            package_id,
            die_id,
            cluster_id,
            core_id,
            max_freq_khz: f.max_khz,
            base_freq_khz: f.base_khz,
            governor: f.governor,
            capacity: if online {
                warnings.take_opt(root.read_parsed(&dir.join("cpu_capacity"), parse_u64))
            } else {
                None
            },
            isolated: isolated.contains(&id),
            nohz_full: nohz_full.contains(&id),
            ..LogicalCpu::default()
        });
    }
    let online: BTreeSet<u32> = cpus.iter().filter(|c| c.online).map(|c| c.id).collect();

    let cores = build_cores(root, &mut cpus, &online, warnings);
    let mut topo = Topology {
        cores,
        isolated: isolated.into_iter().collect(),
        nohz_full: nohz_full.into_iter().collect(),
        ..Topology::default()
    };
    topo.numa_nodes = read_numa(root, &online, warnings);
    for node in &topo.numa_nodes {
        for c in &node.cpus {
            if let Some(cpu) = cpus.iter_mut().find(|x| x.id == *c) {
                cpu.numa_node = Some(node.id);
            }
        }
    }
    (topo.l3_groups, topo.l2_groups) = cache_groups(root, &mut cpus, &online, warnings);
    for core in &mut topo.cores {
        if let Some(first) = core
            .cpus
            .first()
            .and_then(|c| cpus.iter().find(|x| x.id == *c))
        {
            core.numa_node = first.numa_node;
            core.l3_group = first.l3_group;
        }
    }
    topo.packages = build_packages(&cpus, &topo.cores);
    topo.core_kinds = crate::host::hybrid::classify(root, &cpus, &mut topo.cores, warnings);
    topo.cpus = cpus;
    topo.summary = summarize(&topo);
    topo
}

/// Group online CPUs into cores by their sibling sets.
fn build_cores(
    root: &HostRoot,
    cpus: &mut [LogicalCpu],
    online: &BTreeSet<u32>,
    warnings: &mut Warnings,
) -> Vec<Core> {
    let mut key_of: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for cpu in cpus.iter().filter(|c| c.online) {
        let topo = cpu_dir(cpu.id).join("topology");
        // thread_siblings_list, else the mask thread_siblings (older kernels),
        // else the newer names core_cpus_list / core_cpus.
        let siblings = read_cpuset(root, &topo, "thread_siblings_list", warnings)
            .or_else(|| read_cpuset(root, &topo, "core_cpus_list", warnings));
        let key: Vec<u32> = match siblings {
            // Siblings with a different core_id are separate cores sharing a
            // front end (AMD Bulldozer compute units), as hwloc counts them.
            Some(s) if s.contains(&cpu.id) => s
                .intersection(online)
                .copied()
                .filter(|m| same_core_id(cpus, *m, cpu))
                .collect(),
            _ => {
                // No usable sibling list: CPUs with the same ids are one core.
                let same: Vec<u32> = cpus_with_same_ids(cpus, cpu);
                same
            }
        };
        key_of.insert(cpu.id, key);
    }
    // Sibling lists must agree; a CPU that appears in two different sets keeps its own.
    let mut cores: Vec<Core> = Vec::new();
    let mut assigned: BTreeMap<u32, usize> = BTreeMap::new();
    for (cpu_id, key) in &key_of {
        if assigned.contains_key(cpu_id) {
            continue;
        }
        let members: Vec<u32> = key
            .iter()
            .copied()
            .filter(|m| !assigned.contains_key(m) && key_of.get(m) == Some(key))
            .collect();
        let members = if members.contains(cpu_id) {
            members
        } else {
            vec![*cpu_id]
        };
        let index = cores.len();
        let first = cpus.iter().find(|c| c.id == members[0]);
        cores.push(Core {
            index,
            package_id: first.and_then(|c| c.package_id),
            die_id: first.and_then(|c| c.die_id),
            cluster_id: first.and_then(|c| c.cluster_id),
            core_id: first.and_then(|c| c.core_id),
            cpus: members.clone(),
            numa_node: None,
            l3_group: None,
            kind: None,
        });
        for m in members {
            assigned.insert(m, index);
        }
    }
    for cpu in cpus.iter_mut() {
        cpu.core = assigned.get(&cpu.id).copied();
    }
    cores
}

fn same_core_id(cpus: &[LogicalCpu], other: u32, cpu: &LogicalCpu) -> bool {
    match cpus.iter().find(|c| c.id == other) {
        Some(o) => {
            o.core_id.is_none()
                || cpu.core_id.is_none()
                || (o.core_id == cpu.core_id && o.package_id == cpu.package_id)
        }
        None => false,
    }
}

fn cpus_with_same_ids(cpus: &[LogicalCpu], cpu: &LogicalCpu) -> Vec<u32> {
    if cpu.core_id.is_none() {
        return vec![cpu.id];
    }
    cpus.iter()
        .filter(|c| {
            c.online
                && c.package_id == cpu.package_id
                && c.die_id == cpu.die_id
                && c.cluster_id == cpu.cluster_id
                && c.core_id == cpu.core_id
        })
        .map(|c| c.id)
        .collect()
}

fn build_packages(cpus: &[LogicalCpu], cores: &[Core]) -> Vec<Package> {
    let mut map: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for c in cpus.iter().filter(|c| c.online) {
        map.entry(c.package_id.unwrap_or(0)).or_default().push(c.id);
    }
    map.into_iter()
        .map(|(id, cpus)| Package {
            id,
            cores: cores
                .iter()
                .filter(|k| k.package_id.unwrap_or(0) == id)
                .count(),
            cpus,
        })
        .collect()
}

/// Unique sharing sets of the L2 and L3 caches among online CPUs, in one pass.
/// Sharing is symmetric, so a CPU already listed in a group is not read again
/// (what hwloc does too): a 128-CPU host reads a handful of cache directories.
fn cache_groups(
    root: &HostRoot,
    cpus: &mut [LogicalCpu],
    online: &BTreeSet<u32>,
    warnings: &mut Warnings,
) -> (Vec<CacheGroup>, Vec<CacheGroup>) {
    let mut l3: Vec<CacheGroup> = Vec::new();
    let mut l2: Vec<CacheGroup> = Vec::new();
    let mut l3_of: BTreeMap<u32, usize> = BTreeMap::new();
    let mut l2_of: BTreeMap<u32, usize> = BTreeMap::new();
    let ids: Vec<u32> = cpus.iter().filter(|c| c.online).map(|c| c.id).collect();
    for id in ids {
        let need3 = !l3_of.contains_key(&id);
        let need2 = !l2_of.contains_key(&id);
        if !(need3 || need2) {
            continue;
        }
        let cache = cpu_dir(id).join("cache");
        let Ok(indexes) = root.list_dir(&cache) else {
            continue;
        };
        let (mut got3, mut got2) = (!need3, !need2);
        for idx in indexes.iter().filter(|n| n.starts_with("index")) {
            if got3 && got2 {
                break;
            }
            let dir = cache.join(idx);
            let level = warnings.take_opt(root.read_parsed(&dir.join("level"), parse_u64));
            let (groups, of, got) = match level {
                Some(3) if !got3 => (&mut l3, &mut l3_of, &mut got3),
                Some(2) if !got2 => (&mut l2, &mut l2_of, &mut got2),
                _ => continue,
            };
            let kind = warnings.take_opt(root.read_attr_opt(&dir.join("type")));
            if kind.as_deref() == Some("Instruction") {
                continue;
            }
            // shared_cpu_list, else shared_cpu_map: older kernels have only the mask.
            let Some(shared) = read_cpuset(root, &dir, "shared_cpu_list", warnings) else {
                continue;
            };
            let mut members: Vec<u32> = shared.intersection(online).copied().collect();
            if !members.contains(&id) {
                members = vec![id];
            }
            let size_kib = warnings.take_opt(root.read_parsed(&dir.join("size"), parse_size_kib));
            let gi = match groups.iter().position(|g| g.cpus == members) {
                Some(i) => i,
                None => {
                    groups.push(CacheGroup {
                        level: if level == Some(3) { 3 } else { 2 },
                        size_kib,
                        cpus: members.clone(),
                    });
                    groups.len() - 1
                }
            };
            for m in members {
                of.entry(m).or_insert(gi);
            }
            *got = true;
        }
    }
    for cpu in cpus.iter_mut() {
        cpu.l3_group = l3_of.get(&cpu.id).copied();
        cpu.l2_group = l2_of.get(&cpu.id).copied();
    }
    (l3, l2)
}

fn summarize(t: &Topology) -> TopologySummary {
    let online: Vec<&LogicalCpu> = t.cpus.iter().filter(|c| c.online).collect();
    let dies: BTreeSet<(i64, i64)> = online
        .iter()
        .map(|c| (c.package_id.unwrap_or(0), c.die_id.unwrap_or(0)))
        .collect();
    let clusters: BTreeSet<(i64, i64)> = online
        .iter()
        .filter_map(|c| c.cluster_id.map(|k| (c.package_id.unwrap_or(0), k)))
        .collect();
    let threads_per_core = t.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(0);
    TopologySummary {
        packages: t.packages.len(),
        dies: dies.len(),
        clusters: clusters.len(),
        numa_nodes: t.numa_nodes.len(),
        l3_groups: t.l3_groups.len(),
        l2_groups: t.l2_groups.len(),
        cores: t.cores.len(),
        cpus_online: online.len(),
        cpus_offline: t.cpus.len() - online.len(),
        cpus_present: t.cpus.len(),
        threads_per_core,
        smt: threads_per_core > 1,
        hybrid: t.core_kinds.len() > 1,
    }
}
