//! CPU frequency and governor per CPU, from the cpufreq policy directories
//! (`cpu/cpufreq/policyN`, which list the CPUs they cover), falling back to the
//! per-CPU `cpuN/cpufreq` view.

use super::cpuset::read_cpuset;
use super::warnings::Warnings;
use crate::parse::values::parse_u64;
use crate::sysroot::{HostPath, HostRoot};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuFreq {
    pub max_khz: Option<u64>,
    pub base_khz: Option<u64>,
    pub governor: Option<String>,
}

fn read_policy(root: &HostRoot, dir: &HostPath, warnings: &mut Warnings) -> CpuFreq {
    CpuFreq {
        max_khz: warnings.take_opt(root.read_parsed(&dir.join("cpuinfo_max_freq"), parse_u64)),
        base_khz: warnings.take_opt(root.read_parsed(&dir.join("base_frequency"), parse_u64)),
        governor: warnings.take_opt(root.read_attr_opt(&dir.join("scaling_governor"))),
    }
}

/// Frequency facts for every CPU that has them.
pub fn read_cpufreq(
    root: &HostRoot,
    cpus: &BTreeSet<u32>,
    warnings: &mut Warnings,
) -> BTreeMap<u32, CpuFreq> {
    let mut out = BTreeMap::new();
    let base = HostPath::sys("devices/system/cpu/cpufreq");
    if let Ok(names) = root.list_dir(&base) {
        for name in names.iter().filter(|n| n.starts_with("policy")) {
            let dir = base.join(name);
            // Space-separated lists ("0 1 2 3"), with no mask twin.
            let covered = read_cpuset(root, &dir, "related_cpus", warnings)
                .or_else(|| read_cpuset(root, &dir, "affected_cpus", warnings))
                .or_else(|| {
                    name.strip_prefix("policy")
                        .and_then(|n| n.parse().ok())
                        .map(|n| BTreeSet::from([n]))
                })
                .unwrap_or_default();
            let f = read_policy(root, &dir, warnings);
            for cpu in covered {
                out.insert(cpu, f.clone());
            }
        }
    }
    for &cpu in cpus {
        if out.contains_key(&cpu) {
            continue;
        }
        let dir = HostPath::sys(&format!("devices/system/cpu/cpu{cpu}/cpufreq"));
        if root.is_dir(&dir) {
            out.insert(cpu, read_policy(root, &dir, warnings));
        }
    }
    out
}
