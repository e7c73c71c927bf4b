//! Hybrid CPUs: which cores are of which kind (Intel P/E, ARM big/LITTLE).
//!
//! A kind is a core type, read from what the CPU says it is, as hwloc does:
//! on Intel the PMUs (`/sys/devices/cpu_core/cpus`, `cpu_atom/cpus`,
//! `cpu_lowpower/cpus`), on ARM each processor's part number (`CPU part` in
//! `/proc/cpuinfo`, else `regs/identification/midr_el1`). One type can run at
//! different speeds: GB10's Cortex-X925 cores have `cpu_capacity` 997, 1017 and
//! 1024, and stay one kind. Only where the CPU does not say its type do values
//! tell kinds apart: `cpu_capacity`, else the base frequency, with values within
//! [`NEAR_EQUAL_PERCENT`] of the smallest of a kind counted as that kind.

use super::cpuset::read_cpuset;
use super::topology::{Core, CoreKind, LogicalCpu};
use super::warnings::Warnings;
use crate::parse::arm_midr::{ArmPart, parse_cpuinfo_parts, parse_midr};
use crate::sysroot::{HostPath, HostRoot};
use std::collections::{BTreeMap, BTreeSet};

/// Values (capacity, base frequency) this close to a kind's smallest one are
/// that kind: one core type at a slightly different clock limit.
pub const NEAR_EQUAL_PERCENT: u64 = 10;

/// What a CPU says its type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum CoreType {
    /// Intel PMUs, ranked as hwloc ranks them: low-power E < E < P.
    Intel(u8),
    Arm(ArmPart),
}

/// Classify cores into kinds; sets `Core::kind`. One kind (or none) = not hybrid.
pub fn classify(
    root: &HostRoot,
    cpus: &[LogicalCpu],
    cores: &mut [Core],
    warnings: &mut Warnings,
) -> Vec<CoreKind> {
    let online: Vec<&LogicalCpu> = cpus.iter().filter(|c| c.online).collect();
    if let Some(types) = core_types(root, &online, warnings) {
        return by_type(cores, cpus, &types);
    }
    let (keys, source) = if let Some(k) = by_value(&online, |c| c.capacity) {
        (k, "cpu_capacity")
    } else if let Some(k) = by_value(&online, |c| c.base_freq_khz) {
        (k, "base_frequency")
    } else {
        return Vec::new();
    };
    build(cores, cpus, &keys, source, |_, i, n| {
        value_name(source, i, n)
    })
}

/// Kinds from the core types the CPUs report, named after them.
fn by_type(
    cores: &mut [Core],
    cpus: &[LogicalCpu],
    types: &BTreeMap<u32, CoreType>,
) -> Vec<CoreKind> {
    let key = |t: &CoreType| -> u64 {
        match t {
            CoreType::Intel(rank) => u64::from(*rank),
            CoreType::Arm(p) => (u64::from(p.implementer) << 16) | u64::from(p.part),
        }
    };
    let source = match types.values().next() {
        Some(CoreType::Intel(_)) => "intel_pmu",
        _ => "arm_midr",
    };
    let by_key: BTreeMap<u64, CoreType> = types.values().map(|t| (key(t), *t)).collect();
    let keys: BTreeMap<u32, u64> = types.iter().map(|(c, t)| (*c, key(t))).collect();
    build(cores, cpus, &keys, source, |k, i, n| match by_key.get(&k) {
        Some(CoreType::Intel(r)) => intel_name(*r).to_string(),
        Some(CoreType::Arm(p)) => p.label(),
        None => value_name(source, i, n),
    })
}

/// Kinds from per-CPU kind keys: sorted slowest first (by capacity, then
/// maximum and base frequency, then key), named by `name(key, rank, count)`.
fn build(
    cores: &mut [Core],
    cpus: &[LogicalCpu],
    keys: &BTreeMap<u32, u64>,
    source: &str,
    name: impl Fn(u64, usize, usize) -> String,
) -> Vec<CoreKind> {
    let cpu = |id: u32| cpus.iter().find(|c| c.id == id);
    let mut members: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for core in cores.iter() {
        if let Some(k) = core.cpus.first().and_then(|f| keys.get(f)) {
            members.entry(*k).or_default().push(core.index);
        }
    }
    if members.len() < 2 {
        return Vec::new();
    }
    // Speed of a kind: its slowest CPU's capacity (as hwloc ranks ARM kinds),
    // then frequencies; the key itself orders Intel PMUs and breaks ties.
    let speed = |k: u64, idx: &[usize]| {
        let all: Vec<&LogicalCpu> = idx
            .iter()
            .filter_map(|i| cores.get(*i))
            .flat_map(|c| c.cpus.iter().filter_map(|id| cpu(*id)))
            .collect();
        let min = |f: fn(&LogicalCpu) -> Option<u64>| all.iter().filter_map(|c| f(c)).min();
        let intel = if source == "intel_pmu" { k } else { 0 };
        (
            intel,
            min(|c| c.capacity),
            min(|c| c.max_freq_khz),
            min(|c| c.base_freq_khz),
            k,
        )
    };
    let mut order: Vec<(u64, Vec<usize>)> = members.into_iter().collect();
    order.sort_by_key(|(k, idx)| speed(*k, idx));
    let n = order.len();
    let mut kinds = Vec::with_capacity(n);
    for (i, (k, idx)) in order.into_iter().enumerate() {
        let mut kind_cpus: Vec<u32> = Vec::new();
        for &ci in &idx {
            if let Some(core) = cores.get_mut(ci) {
                core.kind = Some(i);
                kind_cpus.extend(core.cpus.iter().copied());
            }
        }
        kind_cpus.sort_unstable();
        let caps: Vec<u64> = kind_cpus
            .iter()
            .filter_map(|c| cpu(*c).and_then(|x| x.capacity))
            .collect();
        kinds.push(CoreKind {
            efficiency: u8::try_from(i).unwrap_or(u8::MAX),
            name: name(k, i, n),
            source: source.to_string(),
            part: (source == "arm_midr").then(|| format!("{:#05x}", k & 0xfff)),
            capacity_min: caps.iter().min().copied(),
            capacity_max: caps.iter().max().copied(),
            cores: idx.len(),
            cpus: kind_cpus,
        });
    }
    kinds
}

fn intel_name(rank: u8) -> &'static str {
    match rank {
        0 => "LP E-core",
        1 => "E-core",
        _ => "P-core",
    }
}

/// Names for kinds told apart by value, slowest (`i = 0`) first.
fn value_name(source: &str, i: usize, n: usize) -> String {
    let intel = source != "cpu_capacity";
    match (intel, i) {
        (true, 0) => "E-core".into(),
        (true, _) if i == n - 1 => "P-core".into(),
        (false, 0) => "LITTLE".into(),
        (false, _) if i == n - 1 => "big".into(),
        _ => format!("mid-{i}"),
    }
}

/// Every online CPU's type, when the CPU tells it for all of them.
fn core_types(
    root: &HostRoot,
    online: &[&LogicalCpu],
    warnings: &mut Warnings,
) -> Option<BTreeMap<u32, CoreType>> {
    if online.is_empty() {
        return None;
    }
    let covers = |m: &BTreeMap<u32, CoreType>| online.iter().all(|c| m.contains_key(&c.id));
    let pmus = intel_pmus(root, warnings);
    if covers(&pmus) {
        return Some(pmus);
    }
    let arm = arm_parts(root, online, warnings);
    covers(&arm).then_some(arm)
}

/// Intel hybrid PMUs: each lists the CPUs of its core type.
fn intel_pmus(root: &HostRoot, warnings: &mut Warnings) -> BTreeMap<u32, CoreType> {
    let mut map = BTreeMap::new();
    for (rank, pmu) in [(0, "cpu_lowpower"), (1, "cpu_atom"), (2, "cpu_core")] {
        let dir = HostPath::sys(&format!("devices/{pmu}"));
        for c in read_cpuset(root, &dir, "cpus", warnings).unwrap_or_default() {
            map.insert(c, CoreType::Intel(rank));
        }
    }
    map
}

/// ARM part numbers: `/proc/cpuinfo` per processor, else each CPU's MIDR.
fn arm_parts(
    root: &HostRoot,
    online: &[&LogicalCpu],
    warnings: &mut Warnings,
) -> BTreeMap<u32, CoreType> {
    let from_cpuinfo = warnings
        .take_opt(root.read_attr_opt(&HostPath::proc("cpuinfo")))
        .map(|t| parse_cpuinfo_parts(&t))
        .unwrap_or_default();
    let mut map = BTreeMap::new();
    for cpu in online {
        let part = match from_cpuinfo.get(&cpu.id) {
            Some(p) => Some(*p),
            None => {
                let midr = HostPath::sys(&format!(
                    "devices/system/cpu/cpu{}/regs/identification/midr_el1",
                    cpu.id
                ));
                warnings.take_opt(root.read_parsed(&midr, parse_midr))
            }
        };
        match part {
            Some(p) => {
                map.insert(cpu.id, CoreType::Arm(p));
            }
            // Not ARM, or a CPU that does not say: the part cannot tell kinds.
            None => return BTreeMap::new(),
        }
    }
    map
}

/// Kind keys from a per-CPU value: values within [`NEAR_EQUAL_PERCENT`] of the
/// smallest value of a kind join it. None when the values make one kind.
fn by_value(
    online: &[&LogicalCpu],
    f: impl Fn(&LogicalCpu) -> Option<u64>,
) -> Option<BTreeMap<u32, u64>> {
    let values: BTreeMap<u32, u64> = online
        .iter()
        .filter_map(|c| f(c).map(|v| (c.id, v)))
        .collect();
    let distinct: BTreeSet<u64> = values.values().copied().collect();
    // Each distinct value -> the smallest value of its kind.
    let mut kind_of: BTreeMap<u64, u64> = BTreeMap::new();
    let mut floor: Option<u64> = None;
    for v in distinct {
        let f = match floor {
            Some(f) if v.saturating_mul(100) <= f.saturating_mul(100 + NEAR_EQUAL_PERCENT) => f,
            _ => v,
        };
        floor = Some(f);
        kind_of.insert(v, f);
    }
    let kinds: BTreeSet<u64> = kind_of.values().copied().collect();
    (kinds.len() > 1).then(|| {
        values
            .into_iter()
            .filter_map(|(c, v)| kind_of.get(&v).map(|k| (c, *k)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(id: u32, capacity: u64) -> LogicalCpu {
        LogicalCpu {
            id,
            online: true,
            capacity: Some(capacity),
            ..LogicalCpu::default()
        }
    }

    #[test]
    fn near_equal_capacities_are_one_kind() {
        // GB10's cpu_capacity values (hwloc's nvidia-dgx-gb10 tree): two core
        // types, five values.
        let caps = [718, 731, 997, 1017, 1024];
        let cpus: Vec<LogicalCpu> = caps
            .iter()
            .enumerate()
            .map(|(i, c)| cpu(i as u32, *c))
            .collect();
        let refs: Vec<&LogicalCpu> = cpus.iter().collect();
        let keys = by_value(&refs, |c| c.capacity).unwrap();
        let kinds: BTreeSet<u64> = keys.values().copied().collect();
        assert_eq!(kinds.len(), 2, "{keys:?}");
        assert_eq!(keys[&0], keys[&1]);
        assert_eq!(keys[&2], keys[&4]);
        // The phone SoC's 280 / 855 / 1024 stay three kinds (1024 is 20% above 855).
        let cpus = [cpu(0, 280), cpu(1, 855), cpu(2, 1024)];
        let refs: Vec<&LogicalCpu> = cpus.iter().collect();
        let keys = by_value(&refs, |c| c.capacity).unwrap();
        assert_eq!(keys.values().collect::<BTreeSet<_>>().len(), 3);
    }
}
