//! NUMA nodes from sysfs: which exist and are online, their CPUs (cpulist,
//! else the older cpumap, else the cpuN links), their memory and hugepage
//! pools. Part of the topology read (topology.rs).

use super::cpuset::read_cpuset;
use super::topology::NumaNode;
use super::warnings::Warnings;
use crate::sysroot::{HostPath, HostRoot};
use std::collections::BTreeSet;

pub(super) fn read_numa(
    root: &HostRoot,
    online: &BTreeSet<u32>,
    warnings: &mut Warnings,
) -> Vec<NumaNode> {
    let base = HostPath::sys("devices/system/node");
    let dir_ids: BTreeSet<u32> = root
        .list_dir(&base)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.strip_prefix("node").and_then(|s| s.parse().ok()))
        .collect();
    let ids = match read_cpuset(root, &base, "online", warnings) {
        Some(list) => list.intersection(&dir_ids).copied().collect(),
        None => dir_ids,
    };
    let mut nodes = Vec::new();
    for id in ids {
        let dir = base.join(format!("node{id}"));
        // cpulist, else the older cpumap, else the node's cpuN links.
        let listed = read_cpuset(root, &dir, "cpulist", warnings).unwrap_or_else(|| {
            root.list_dir(&dir)
                .unwrap_or_default()
                .iter()
                .filter_map(|n| n.strip_prefix("cpu").and_then(|s| s.parse().ok()))
                .collect()
        });
        let cpus: Vec<u32> = listed.intersection(online).copied().collect();
        let memory_kib = warnings
            .take(root.read_text(&dir.join("meminfo")))
            .and_then(|t| node_mem_total_kib(&t));
        let hugepages = super::kernel::read_hugepage_pools(root, &dir.join("hugepages"), warnings);
        nodes.push(NumaNode {
            id,
            cpus,
            memory_kib,
            hugepages,
            from_sysfs: true,
        });
    }
    if nodes.is_empty() && !online.is_empty() {
        nodes.push(NumaNode {
            id: 0,
            cpus: online.iter().copied().collect(),
            memory_kib: None,
            hugepages: Vec::new(),
            from_sysfs: false,
        });
    }
    nodes
}

/// `Node 0 MemTotal:       32768000 kB` -> 32768000.
pub fn node_mem_total_kib(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.split_once("MemTotal:")?.1;
        rest.split_whitespace().next()?.parse().ok()
    })
}
