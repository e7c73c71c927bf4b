//! The pinning planner: topology + request -> a plan that gives the VM whole
//! host cores (SMT siblings together, guest vCPU pairs on host sibling pairs),
//! inside one L3 group and NUMA node where it fits (the GPU's node first,
//! the biggest L3 first), on one kind of core (the fastest that holds the
//! request, see `kinds`), and leaves housekeeping cores to the host, the
//! emulator and the iothreads: core 0 by default, a core off the biggest L3
//! when the L3s differ in size and the VM fits in the biggest (X3D, see
//! `vcache`).

use super::model::{GuestTopology, KernelArgs, PinPlan, PinRequest};
use super::{kinds, vcache};
use crate::host::topology::{Core, Topology};
use crate::parse::cpulist::format_cpulist;
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "asked for {asked} vCPUs, but only {} free for a VM (after the housekeeping CPUs {reserved})",
        crate::units::count(*.available, "host thread")
    )]
    TooMany {
        asked: usize,
        available: usize,
        reserved: String,
    },
    #[error("asked for 0 vCPUs")]
    Zero,
    #[error("the topology has no online cores")]
    NoCores,
    #[error("--reserve names CPU {0}, which is not online")]
    BadReserve(u32),
}

/// Cores grouped where the VM would like to stay: (NUMA node, L3 group).
struct Group<'a> {
    node: Option<u32>,
    l3: Option<usize>,
    l3_kib: u64,
    cores: Vec<&'a Core>,
}

/// vCPUs the cores can take, at most `per_core` per core.
fn capacity(cores: &[&Core], per_core: usize) -> usize {
    cores.iter().map(|c| c.cpus.len().min(per_core)).sum()
}

fn threads(cores: &[&Core]) -> usize {
    capacity(cores, usize::MAX)
}

/// How many of `cores` (in order) hold `n` vCPUs at `per_core` each.
fn cores_for(cores: &[&Core], n: usize, per_core: usize) -> Option<usize> {
    let mut have = 0;
    for (i, c) in cores.iter().enumerate() {
        have += c.cpus.len().min(per_core);
        if have >= n {
            return Some(i + 1);
        }
    }
    None
}

pub fn plan(t: &Topology, req: &PinRequest) -> Result<PinPlan, PlanError> {
    if req.vcpus == 0 {
        return Err(PlanError::Zero);
    }
    if t.cores.is_empty() {
        return Err(PlanError::NoCores);
    }
    let online: BTreeSet<u32> = t.online_cpus().map(|c| c.id).collect();
    let mut reasons = Vec::new();
    let mut warnings = Vec::new();
    // L3 groups of unequal size (X3D) and a VM that fits in the biggest: it
    // gets that group, and the host's default core moves off it.
    let big = match req.reserve {
        Some(_) => None,
        None => vcache::prefer(t, req.vcpus, req.gpu_numa_node),
    };
    // Housekeeping: whole cores, core 0's by default.
    let mut reserved: BTreeSet<u32> = match (&req.reserve, &big) {
        (Some(r), _) => {
            if let Some(bad) = r.iter().find(|c| !online.contains(c)) {
                return Err(PlanError::BadReserve(*bad));
            }
            r.clone()
        }
        (None, Some(b)) => {
            reasons.push(vcache::reason(t, b, req.amd));
            t.cores
                .get(b.host_core)
                .map(|c| c.cpus.iter().copied().collect())
                .unwrap_or_default()
        }
        (None, None) => t
            .cores
            .iter()
            .find(|c| c.cpus.contains(&0))
            .or(t.cores.first())
            .map(|c| c.cpus.iter().copied().collect())
            .unwrap_or_default(),
    };
    // Never split a core between host and guest: widen the reserve to whole cores.
    for c in &t.cores {
        if c.cpus.iter().any(|x| reserved.contains(x))
            && !c.cpus.iter().all(|x| reserved.contains(x))
        {
            reserved.extend(c.cpus.iter().copied());
            reasons.push(format!(
                "CPUs {} stay with the host together: they are SMT siblings of one core.",
                format_cpulist(&c.cpus)
            ));
        }
    }
    let free: Vec<&Core> = t
        .cores
        .iter()
        .filter(|c| !c.cpus.iter().any(|x| reserved.contains(x)))
        .collect();
    let available = threads(&free);
    if req.vcpus > available {
        return Err(PlanError::TooMany {
            asked: req.vcpus,
            available,
            reserved: format_cpulist(&reserved),
        });
    }
    if req.vcpus == available {
        warnings.push("Every free host thread goes to the VM: the host keeps only its housekeeping CPUs, expect it to feel slow while the VM runs.".to_string());
    }

    // Hybrid: the fastest kind of core that holds the request alone.
    let pool: Vec<&Core> = kinds::pool(t, &free, req.vcpus, &mut reasons, &mut warnings);

    // Groups by (node, L3), each fastest core first (the pool's order).
    let mut groups: Vec<Group> = Vec::new();
    for c in &pool {
        match groups
            .iter_mut()
            .find(|g| g.node == c.numa_node && g.l3 == c.l3_group)
        {
            Some(g) => g.cores.push(c),
            None => groups.push(Group {
                node: c.numa_node,
                l3: c.l3_group,
                l3_kib: c
                    .l3_group
                    .and_then(|i| t.l3_groups.get(i))
                    .and_then(|g| g.size_kib)
                    .unwrap_or(0),
                cores: vec![c],
            }),
        }
    }
    // Within a group, the faster cores first (higher cpu_capacity within a
    // kind), then by position. In the big L3 group CPU 0's core comes last:
    // it joins the VM only when the VM needs the whole group.
    let cpu0_last = big.is_some();
    for g in &mut groups {
        g.cores.sort_by_key(|c| {
            (
                cpu0_last && c.cpus.contains(&0),
                std::cmp::Reverse(kinds::speed(t, c)),
                c.index,
            )
        });
    }
    // Preference: the GPU's node, the big L3 group chosen above, the biggest
    // L3, the fastest cores (a cluster of one core type with a higher
    // capacity), then the lowest group.
    let gpu_node = req.gpu_numa_node;
    let big_l3 = big.as_ref().map(|b| b.l3_group);
    groups.sort_by_key(|g| {
        (
            gpu_node.is_some() && g.node != gpu_node,
            big_l3.is_some() && g.l3 != big_l3,
            std::cmp::Reverse(g.l3_kib),
            std::cmp::Reverse(g.cores.first().map(|c| kinds::speed(t, c))),
            g.cores.iter().map(|c| c.index).min(),
        )
    });
    // An odd count on an SMT host cannot be described honestly as pairs: give
    // each vCPU a core of its own (siblings idle) while there are cores enough.
    let tpc = t.summary.threads_per_core.max(1);
    // Cache locality wins over that: only when one core each still fits in one
    // L3 group (the big one, when chosen above), or nothing fits in one group
    // anyway.
    let fits = |per: usize| {
        groups
            .iter()
            .filter(|g| big_l3.is_none() || g.l3 == big_l3)
            .any(|g| capacity(&g.cores, per) >= req.vcpus)
    };
    let single_ok = fits(1) || (!fits(tpc) && pool.len() >= req.vcpus);
    // Mixed cores (P-cores with SMT next to E-cores without) cannot be shown as
    // one uniform guest topology either.
    let uniform_pool = pool.iter().all(|c| c.cpus.len() == tpc);
    let awkward = tpc > 1 && (!req.vcpus.is_multiple_of(tpc) || !uniform_pool);
    let per_core = if awkward && single_ok {
        warnings.push(format!(
            "{} vCPUs on a host with {tpc} threads per core (or on cores of different kinds): each vCPU gets a core of its own (its sibling stays idle, not with the host) so the guest topology stays honest. Ask for a multiple of {tpc} on cores of one kind to use every thread.",
            req.vcpus
        ));
        1
    } else {
        if awkward {
            warnings.push(format!("{} vCPUs on cores with different thread counts, or too few free cores for one each: some vCPUs share a core, which the guest topology cannot show. Ask for a multiple of {tpc} on cores of one kind.", req.vcpus));
        }
        tpc
    };

    let chosen: Vec<&Core> = if let Some(g) = groups
        .iter()
        .find(|g| capacity(&g.cores, per_core) >= req.vcpus)
    {
        let n = cores_for(&g.cores, req.vcpus, per_core).unwrap_or(g.cores.len());
        let size = if g.l3_kib > 0 {
            format!(" share one {} L3", crate::units::human_kib(g.l3_kib))
        } else {
            " share one cache group".to_string()
        };
        let vcpus = if req.vcpus == 1 {
            "vCPU 0 goes".to_string()
        } else {
            format!("vCPUs 0-{} go", req.vcpus - 1)
        };
        reasons.push(format!(
            "{vcpus} on cores of L3 group {} in NUMA node {}: they{size}, so the VM's threads hit the same cache.",
            g.l3.map(|l| format!("#{l}")).unwrap_or_else(|| "(none)".into()),
            g.node.map(|n| n.to_string()).unwrap_or_else(|| "?".into())
        ));
        if gpu_node.is_some() && g.node == gpu_node {
            reasons.push(format!(
                "NUMA node {} is the GPU's node: its DMA stays local.",
                gpu_node.unwrap_or(0)
            ));
        }
        if big_l3.is_some() && g.l3 == big_l3 {
            reasons.extend(vcache::what_the_host_keeps(&g.cores, n, g.l3.unwrap_or(0)));
        }
        g.cores[..n].to_vec()
    } else {
        // Spread: one NUMA node if possible, else everything, in group order.
        let nodes: BTreeSet<Option<u32>> = groups.iter().map(|g| g.node).collect();
        let node_fit = nodes.into_iter().find(|n| {
            capacity(
                &groups
                    .iter()
                    .filter(|g| g.node == *n)
                    .flat_map(|g| g.cores.iter().copied())
                    .collect::<Vec<_>>(),
                per_core,
            ) >= req.vcpus
        });
        let mut order: Vec<&Core> = match node_fit {
            Some(n) => {
                warnings.push(format!("No single L3 group has {} free threads: the VM spans several L3 groups of NUMA node {} (cross-cache traffic costs a little).", req.vcpus, n.map(|x| x.to_string()).unwrap_or_else(|| "?".into())));
                groups
                    .iter()
                    .filter(|g| g.node == n)
                    .flat_map(|g| g.cores.iter().copied())
                    .collect()
            }
            None => {
                warnings.push("The request is larger than one NUMA node: vCPUs span nodes; give the guest a matching NUMA topology or memory access crosses the interconnect.".to_string());
                groups
                    .iter()
                    .flat_map(|g| g.cores.iter().copied())
                    .collect()
            }
        };
        // Cores of a mixed pool: the faster kind first across the groups.
        order.sort_by_key(|c| std::cmp::Reverse(kinds::speed(t, c).0));
        let n = cores_for(&order, req.vcpus, per_core).unwrap_or(order.len());
        order[..n].to_vec()
    };

    // vCPUs onto the chosen cores' threads, pairs on sibling pairs.
    let mut vcpupin = Vec::new();
    for core in &chosen {
        for cpu in core.cpus.iter().take(per_core) {
            if vcpupin.len() < req.vcpus {
                vcpupin.push((vcpupin.len() as u32, *cpu));
            }
        }
    }
    let uniform = chosen.iter().all(|c| c.cpus.len() == tpc);
    let guest_threads = if per_core > 1 && uniform && req.vcpus.is_multiple_of(tpc) {
        tpc
    } else {
        1
    };
    if guest_threads > 1 {
        reasons.push(format!("The guest sees {} cores with {} threads each, matching the host pairs, so Windows schedules like on real hardware.", req.vcpus / guest_threads, guest_threads));
    }
    let vm_cpus: BTreeSet<u32> = vcpupin.iter().map(|(_, c)| *c).collect();
    let vm_cores_cpus: BTreeSet<u32> = chosen.iter().flat_map(|c| c.cpus.iter().copied()).collect();
    let housekeeping: Vec<u32> = online
        .iter()
        .copied()
        .filter(|c| !vm_cores_cpus.contains(c))
        .collect();
    // The emulator and iothreads: the reserved CPUs, on the VM's node when possible.
    let vm_nodes: BTreeSet<u32> = chosen.iter().filter_map(|c| c.numa_node).collect();
    let near: Vec<u32> = reserved
        .iter()
        .copied()
        .filter(|c| {
            t.cpu(*c)
                .and_then(|x| x.numa_node)
                .is_some_and(|n| vm_nodes.contains(&n))
        })
        .collect();
    let emulatorpin: Vec<u32> = if near.is_empty() {
        reserved.iter().copied().collect()
    } else {
        near
    };
    reasons.push(format!(
        "The emulator and I/O threads run on CPUs {} with the host, so disk and network work never preempts a vCPU.",
        format_cpulist(&emulatorpin)
    ));
    let vm_list = format_cpulist(&vm_cores_cpus);
    let hk_list = format_cpulist(&housekeeping);
    let amd = req.amd;
    Ok(PinPlan {
        vcpus: req.vcpus,
        vcpupin,
        emulatorpin: emulatorpin.clone(),
        iothreadpin: emulatorpin,
        guest: GuestTopology {
            sockets: 1,
            dies: 1,
            cores: (req.vcpus / guest_threads) as u32,
            threads: guest_threads as u32,
        },
        topoext: amd && guest_threads > 1,
        numa_nodes: vm_nodes.into_iter().collect(),
        vcpusched_fifo: req.vcpusched_fifo,
        vm_cpus: vm_cpus.into_iter().collect(),
        housekeeping_cpus: housekeeping,
        kernel: KernelArgs::for_cpus(&vm_list, &hk_list),
        allowed_cpus_host: hk_list,
        reasons,
        warnings,
    })
}
