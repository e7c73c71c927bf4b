//! The CPU topology from sysfs: packages, dies, clusters, NUMA nodes, L3 and L2
//! sharing groups, cores with their SMT siblings, hybrid core kinds, online and
//! offline CPUs, isolated and nohz_full CPUs, frequencies and governors.
//!
//! Offline CPUs have no `topology/` directory; core ids can skip numbers; package
//! ids can be odd firmware values. Cores are therefore identified by their sibling
//! set (`thread_siblings_list`), not by `core_id`, and packages by whatever id the
//! firmware gave, counted rather than trusted to be dense.

mod read;

pub use super::numa::node_mem_total_kib;
pub use read::{read_isolation, read_topology};

use super::freq::CpuFreq;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LogicalCpu {
    pub id: u32,
    pub online: bool,
    /// Index into `Topology::cores` (online CPUs only).
    pub core: Option<usize>,
    pub package_id: Option<i64>,
    pub die_id: Option<i64>,
    pub cluster_id: Option<i64>,
    pub core_id: Option<i64>,
    pub numa_node: Option<u32>,
    /// Index into `Topology::l3_groups`.
    pub l3_group: Option<usize>,
    /// Index into `Topology::l2_groups`.
    pub l2_group: Option<usize>,
    pub max_freq_khz: Option<u64>,
    pub base_freq_khz: Option<u64>,
    pub governor: Option<String>,
    /// ARM `cpu_capacity` (1024 = the biggest core).
    pub capacity: Option<u64>,
    pub isolated: bool,
    pub nohz_full: bool,
}

/// A kind of core on a hybrid CPU (Intel P/E, ARM big/LITTLE): one core type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoreKind {
    /// 0 is the most power-efficient (slowest) kind, as hwloc counts.
    pub efficiency: u8,
    /// The core type where the CPU says it ("P-core", "E-core", "Cortex-X925"),
    /// else "big", "LITTLE", "mid-N" (by capacity) or "P-core"/"E-core" (by
    /// base frequency).
    pub name: String,
    /// How it was told apart: `intel_pmu`, `arm_midr` (the part number in
    /// cpuinfo or MIDR_EL1), `cpu_capacity` or `base_frequency`.
    pub source: String,
    /// ARM part number (`0xd85`) when `source` is `arm_midr`.
    pub part: Option<String>,
    /// Smallest and largest `cpu_capacity` among its CPUs (one core type can
    /// span a few values: different clock limits per cluster).
    pub capacity_min: Option<u64>,
    pub capacity_max: Option<u64>,
    pub cores: usize,
    pub cpus: Vec<u32>,
}

impl CoreKind {
    /// A short mark for tables: "P", "E", "X925", "big".
    pub fn short(&self) -> &str {
        let n = self.name.as_str();
        n.strip_suffix("-core")
            .or_else(|| n.strip_prefix("Cortex-"))
            .or_else(|| n.strip_prefix("Neoverse "))
            .unwrap_or(n)
    }

    /// For sentences: "P-cores", "Cortex-X925 cores", "big cores".
    pub fn plural(&self) -> String {
        if self.name.ends_with("-core") {
            format!("{}s", self.name)
        } else {
            format!("{} cores", self.name)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Core {
    pub index: usize,
    pub package_id: Option<i64>,
    pub die_id: Option<i64>,
    pub cluster_id: Option<i64>,
    pub core_id: Option<i64>,
    /// Online hardware threads of this core, sorted.
    pub cpus: Vec<u32>,
    pub numa_node: Option<u32>,
    pub l3_group: Option<usize>,
    /// Index into `Topology::core_kinds` on hybrid CPUs.
    pub kind: Option<usize>,
}

impl Core {
    /// How both faces name a core: by its threads ("core 3,9"), the numbers
    /// the user pins and reads everywhere else. The kernel's `core_id`
    /// skips numbers and repeats per package, so it names no core alone.
    pub fn name(&self) -> String {
        if self.cpus.is_empty() {
            format!("core #{}", self.index)
        } else {
            format!("core {}", crate::parse::cpulist::format_cpulist(&self.cpus))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Package {
    /// The firmware's `physical_package_id` (can be any number).
    pub id: i64,
    pub cpus: Vec<u32>,
    pub cores: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HugepagePool {
    pub size_kib: u64,
    pub total: u64,
    pub free: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: Vec<u32>,
    pub memory_kib: Option<u64>,
    pub hugepages: Vec<HugepagePool>,
    /// False for the single node we assume when sysfs has no node directory.
    pub from_sysfs: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheGroup {
    pub level: u8,
    pub size_kib: Option<u64>,
    pub cpus: Vec<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TopologySummary {
    pub packages: usize,
    pub dies: usize,
    pub clusters: usize,
    pub numa_nodes: usize,
    pub l3_groups: usize,
    pub l2_groups: usize,
    /// Online cores.
    pub cores: usize,
    pub cpus_online: usize,
    pub cpus_offline: usize,
    pub cpus_present: usize,
    /// Most hardware threads on one core (2 with SMT).
    pub threads_per_core: usize,
    pub smt: bool,
    pub hybrid: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Topology {
    pub summary: TopologySummary,
    pub cpus: Vec<LogicalCpu>,
    pub cores: Vec<Core>,
    pub packages: Vec<Package>,
    pub numa_nodes: Vec<NumaNode>,
    pub l3_groups: Vec<CacheGroup>,
    pub l2_groups: Vec<CacheGroup>,
    pub core_kinds: Vec<CoreKind>,
    pub isolated: Vec<u32>,
    pub nohz_full: Vec<u32>,
}

/// Core indexes by L3 group.
type CoresByL3 = BTreeMap<Option<usize>, Vec<usize>>;

/// Cores of one L3 group inside one NUMA node, for drawing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L3Layout {
    pub l3_group: Option<usize>,
    /// Indexes into `Topology::cores`.
    pub cores: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLayout {
    pub numa_node: Option<u32>,
    pub l3s: Vec<L3Layout>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageLayout {
    pub package_id: i64,
    pub nodes: Vec<NodeLayout>,
}

impl Topology {
    /// The nesting lstopo draws: package > NUMA node > L3 group > cores, sorted.
    pub fn layout(&self) -> Vec<PackageLayout> {
        let mut tree: BTreeMap<i64, BTreeMap<Option<u32>, CoresByL3>> = BTreeMap::new();
        for core in &self.cores {
            tree.entry(core.package_id.unwrap_or(0))
                .or_default()
                .entry(core.numa_node)
                .or_default()
                .entry(core.l3_group)
                .or_default()
                .push(core.index);
        }
        tree.into_iter()
            .map(|(package_id, nodes)| PackageLayout {
                package_id,
                nodes: nodes
                    .into_iter()
                    .map(|(numa_node, l3s)| NodeLayout {
                        numa_node,
                        l3s: l3s
                            .into_iter()
                            .map(|(l3_group, cores)| L3Layout { l3_group, cores })
                            .collect(),
                    })
                    .collect(),
            })
            .collect()
    }

    pub fn cpu(&self, id: u32) -> Option<&LogicalCpu> {
        self.cpus
            .binary_search_by_key(&id, |c| c.id)
            .ok()
            .map(|i| &self.cpus[i])
    }
    pub fn online_cpus(&self) -> impl Iterator<Item = &LogicalCpu> {
        self.cpus.iter().filter(|c| c.online)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_meminfo() {
        assert_eq!(
            node_mem_total_kib("Node 0 MemTotal:       16310036 kB\nNode 0 MemFree: 1 kB\n"),
            Some(16310036)
        );
        assert_eq!(node_mem_total_kib("garbage"), None);
    }
}
