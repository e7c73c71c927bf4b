//! Which cores of a hybrid CPU a plan draws on: the fastest kind of core that
//! holds the whole request alone (a VM whose vCPUs run at one speed), else
//! every free core, fastest kind first. Within a kind, cores with the higher
//! `cpu_capacity` come first (one core type can have a faster cluster).

use crate::host::topology::{Core, Topology};

/// How fast a core is, for ordering (higher is faster): its kind's rank
/// (None on a CPU with one kind of core), then its `cpu_capacity`.
pub fn speed(t: &Topology, core: &Core) -> (Option<u8>, u64) {
    let rank = core
        .kind
        .and_then(|k| t.core_kinds.get(k))
        .map(|k| k.efficiency);
    let capacity = core
        .cpus
        .iter()
        .filter_map(|c| t.cpu(*c).and_then(|x| x.capacity))
        .max()
        .unwrap_or(0);
    (rank, capacity)
}

fn threads(cores: &[&Core]) -> usize {
    cores.iter().map(|c| c.cpus.len()).sum()
}

/// The cores to plan on, with the reasons and warnings for the choice.
pub fn pool<'a>(
    t: &Topology,
    free: &[&'a Core],
    vcpus: usize,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Vec<&'a Core> {
    // Free cores by kind, fastest kind first.
    let mut by_kind: Vec<(u8, usize, Vec<&'a Core>)> = Vec::new();
    for c in free {
        let Some((k, kind)) = c.kind.and_then(|k| t.core_kinds.get(k).map(|x| (k, x))) else {
            continue;
        };
        match by_kind.iter_mut().find(|(_, i, _)| *i == k) {
            Some((_, _, cores)) => cores.push(c),
            None => by_kind.push((kind.efficiency, k, vec![c])),
        }
    }
    by_kind.sort_by_key(|(rank, _, _)| std::cmp::Reverse(*rank));
    let name = |k: usize| t.core_kinds.get(k).map(|x| x.plural()).unwrap_or_default();
    let Some((_, fastest, fastest_cores)) = by_kind.first() else {
        return free.to_vec();
    };
    let fits = by_kind.iter().find(|(_, _, cores)| threads(cores) >= vcpus);
    match fits {
        Some((_, k, cores)) => {
            if k != fastest {
                let free = threads(fastest_cores);
                reasons.push(format!(
                    "The {} have only {free} free thread{}, too few for {vcpus} vCPUs: the {}, the fastest kind that holds them all, take them.",
                    name(*fastest),
                    if free == 1 { "" } else { "s" },
                    name(*k)
                ));
            }
            reasons.push(format!(
                "Only {} are used: mixing core kinds makes vCPUs run at different speeds, which games handle badly.",
                name(*k)
            ));
            cores.clone()
        }
        None => {
            warnings.push(format!(
                "The request does not fit on one kind of core: the {} take the first vCPUs, slower cores the rest.",
                name(*fastest)
            ));
            let mut all = free.to_vec();
            all.sort_by_key(|c| std::cmp::Reverse(speed(t, c)));
            all
        }
    }
}
