//! Parts whose L3 groups differ in size within one package, such as AMD's
//! dual-CCD X3D parts (7950X3D, 7900X3D, 9950X3D: one CCD with 3D V-Cache and
//! 96 MiB of L3, the other with 32 MiB and higher clocks). Games gain more
//! from the big cache than from the clocks, so a VM that fits in the biggest
//! L3 group gets it, and the host's own core (the emulator, the I/O threads,
//! the host's tasks) moves to another group of the same package, even when
//! CPU 0 sits in the big one.
//!
//! Read from the sizes the topology already holds (`cache/index3/size` and
//! `shared_cpu_list`), not from a table of model names: equal L3s (a plain
//! dual-CCD part, or V-Cache on both CCDs) and a single L3 (7800X3D) find
//! nothing here and plan as before. Hybrid CPUs are left alone: there the kind
//! of core is chosen first (`kinds`), and the planner already takes the bigger
//! L3 first among groups of that kind.

use crate::host::topology::{Core, Topology};
use crate::parse::cpulist::format_cpulist;
use crate::units::human_kib;

/// The biggest L3 group of a package whose L3 groups differ in size, the one
/// a VM that fits in it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BigL3 {
    /// Index into `Topology::l3_groups`.
    pub l3_group: usize,
    pub size_kib: u64,
    /// The smaller L3 groups of the same package: (index, size in KiB).
    pub smaller: Vec<(usize, u64)>,
    /// Index into `Topology::cores`: the core the host keeps for itself, the
    /// emulator and the I/O threads (core 0's when it is off the big group).
    pub host_core: usize,
}

/// One of the biggest L3 groups of a package whose L3 groups differ in size.
struct Unequal {
    big: usize,
    size_kib: u64,
    /// The package's smaller groups: (index, size in KiB).
    smaller: Vec<(usize, u64)>,
}

/// The biggest L3 groups of each package with unequal L3s, all sizes known.
/// Packages with one L3, equal L3s or a size that could not be read are left out.
fn unequal_packages(t: &Topology) -> Vec<Unequal> {
    if t.summary.hybrid {
        return Vec::new();
    }
    let package_of = |g: usize| {
        t.l3_groups
            .get(g)
            .and_then(|x| x.cpus.first())
            .and_then(|c| t.cpu(*c))
            .map(|c| c.package_id.unwrap_or(0))
    };
    let mut packages: Vec<i64> = (0..t.l3_groups.len()).filter_map(package_of).collect();
    packages.sort_unstable();
    packages.dedup();
    let mut out = Vec::new();
    for p in packages {
        let groups: Vec<(usize, Option<u64>)> = (0..t.l3_groups.len())
            .filter(|g| package_of(*g) == Some(p))
            .map(|g| (g, t.l3_groups[g].size_kib))
            .collect();
        let Some(sizes) = groups
            .iter()
            .map(|(g, s)| s.map(|s| (*g, s)))
            .collect::<Option<Vec<(usize, u64)>>>()
        else {
            continue; // a size we cannot read: no preference by guess
        };
        let (Some(max), Some(min)) = (
            sizes.iter().map(|x| x.1).max(),
            sizes.iter().map(|x| x.1).min(),
        ) else {
            continue;
        };
        if max == min {
            continue;
        }
        let smaller: Vec<(usize, u64)> = sizes.iter().copied().filter(|x| x.1 < max).collect();
        for (big, size_kib) in sizes.iter().copied().filter(|x| x.1 == max) {
            out.push(Unequal {
                big,
                size_kib,
                smaller: smaller.clone(),
            });
        }
    }
    out
}

fn cores_of(t: &Topology, l3: usize) -> impl Iterator<Item = &Core> {
    t.cores.iter().filter(move |c| c.l3_group == Some(l3))
}

/// The biggest L3 group that holds `vcpus` alone (every thread of its online
/// cores), on the GPU's node when one is given, with the core the host keeps
/// instead: core 0's when it is off the big group, else the first core of a
/// smaller group, on the big group's NUMA node when there is one.
pub fn prefer(t: &Topology, vcpus: usize, gpu_node: Option<u32>) -> Option<BigL3> {
    for Unequal {
        big: l3_group,
        size_kib,
        smaller,
    } in unequal_packages(t)
    {
        let big: Vec<&Core> = cores_of(t, l3_group).collect();
        let node = big.first().and_then(|c| c.numa_node);
        if gpu_node.is_some() && node != gpu_node {
            continue;
        }
        if big.iter().map(|c| c.cpus.len()).sum::<usize>() < vcpus {
            continue;
        }
        let off_big: Vec<&Core> = smaller
            .iter()
            .flat_map(|(g, _)| cores_of(t, *g))
            .filter(|c| !c.cpus.is_empty())
            .collect();
        let host_core = off_big
            .iter()
            .find(|c| c.cpus.contains(&0))
            .or_else(|| off_big.iter().find(|c| c.numa_node == node))
            .or(off_big.first())
            .map(|c| c.index);
        if let Some(host_core) = host_core {
            return Some(BigL3 {
                l3_group,
                size_kib,
                smaller,
                host_core,
            });
        }
    }
    None
}

/// CPU 0 is in the biggest L3 group of a package with unequal L3s: the group.
/// A VM that holds that group whole holds CPU 0 too, on purpose.
pub fn cpu0_on_big_l3(t: &Topology) -> Option<usize> {
    let g = t.cpu(0).and_then(|c| c.l3_group)?;
    unequal_packages(t).iter().any(|u| u.big == g).then_some(g)
}

/// "L3 group #1 (CPUs 8-15,24-31)".
fn group_name(t: &Topology, g: usize) -> String {
    let cpus = t
        .l3_groups
        .get(g)
        .map(|x| format_cpulist(&x.cpus))
        .unwrap_or_default();
    format!("L3 group #{g} (CPUs {cpus})")
}

/// Why the VM gets the big group and the host another one, in plain words
/// with the sizes they rest on.
pub fn reason(t: &Topology, big: &BigL3, amd: bool) -> String {
    let smaller: Vec<String> = big
        .smaller
        .iter()
        .map(|(g, kib)| format!("{} {}", group_name(t, *g), human_kib(*kib)))
        .collect();
    let host_group = t
        .cores
        .get(big.host_core)
        .and_then(|c| c.l3_group)
        .map(|g| format!("L3 group #{g}"))
        .unwrap_or_else(|| "another L3 group".into());
    let what = if amd {
        " (on AMD this is the CCD with 3D V-Cache)"
    } else {
        ""
    };
    let cpu0 = if cpu0_on_big_l3(t) == Some(big.l3_group) {
        format!(", even though CPU 0 is in L3 group #{}", big.l3_group)
    } else {
        String::new()
    };
    format!(
        "{} has {} of L3{what}, {}: games run best on the bigger cache, so the vCPUs go to L3 group #{} and the host keeps {host_group} for itself, the emulator and the I/O threads{cpu0}.",
        group_name(t, big.l3_group),
        human_kib(big.size_kib),
        smaller.join(", "),
        big.l3_group,
    )
}

/// What of the big group the VM leaves to the host, given its cores in the
/// planner's order (CPU 0's last) of which the VM takes the first `used`:
/// the rest, which shares the cache with the VM; or, when the VM takes it
/// all, CPU 0, which then needs the kernel line to keep interrupts away.
pub fn what_the_host_keeps(cores: &[&Core], used: usize, l3_group: usize) -> Option<String> {
    let all: usize = cores.iter().map(|c| c.cpus.len()).sum();
    let rest: Vec<u32> = cores
        .iter()
        .skip(used)
        .flat_map(|c| c.cpus.iter().copied())
        .collect();
    if !rest.is_empty() {
        return Some(format!(
            "The rest of L3 group #{l3_group} (CPUs {}) stays with the host and shares that cache with the VM; with {all} vCPUs the VM has it alone.",
            format_cpulist(&rest)
        ));
    }
    let cpu0_core = cores.iter().find(|c| c.cpus.contains(&0))?;
    let without = all.saturating_sub(cpu0_core.cpus.len());
    let tip = if without > 0 {
        format!(" For a VM that leaves CPU 0 to the host, ask for {without} vCPUs or fewer.")
    } else {
        String::new()
    };
    Some(format!(
        "CPU 0 runs a vCPU too, with the rest of L3 group #{l3_group}: apply the kernel line below so interrupts go to the host's CPUs instead (irqaffinity).{tip}"
    ))
}
