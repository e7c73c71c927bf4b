//! The one reader of CPU-set files. Every set the kernel publishes as a list
//! (`shared_cpu_list`, `thread_siblings_list`, a node's `cpulist`, an IRQ's
//! `smp_affinity_list`, `cpu/online`, …) is read here: the list form, else the
//! mask form beside it (`shared_cpu_map`, `thread_siblings`, `cpumap`,
//! `smp_affinity`), which is all that older kernels have for some of them.

use super::warnings::Warnings;
use crate::parse::cpulist::{parse_cpulist, parse_cpumask};
use crate::sysroot::{HostPath, HostRoot};
use std::collections::BTreeSet;

/// The mask twin of a list file, by the kernel's names; None for sets the
/// kernel only prints as a list (`online`, `isolated`, cpufreq's
/// `related_cpus`, the PMUs' `cpus`).
pub fn mask_name(list_name: &str) -> Option<&'static str> {
    Some(match list_name {
        "shared_cpu_list" => "shared_cpu_map",
        "thread_siblings_list" => "thread_siblings",
        "core_siblings_list" => "core_siblings",
        "core_cpus_list" => "core_cpus",
        "cluster_cpus_list" => "cluster_cpus",
        "die_cpus_list" => "die_cpus",
        "package_cpus_list" => "package_cpus",
        "cpulist" => "cpumap",
        "smp_affinity_list" => "smp_affinity",
        "local_cpulist" => "local_cpus",
        _ => return None,
    })
}

/// The CPU set in `dir/name` (one of the list names above, or any list-only
/// file); when the list file is absent, the mask file beside it. None when
/// neither exists or neither parses (each failure a warning).
pub fn read_cpuset(
    root: &HostRoot,
    dir: &HostPath,
    name: &str,
    warnings: &mut Warnings,
) -> Option<BTreeSet<u32>> {
    match root.read_parsed(&dir.join(name), parse_cpulist) {
        Ok(Some(set)) => return Some(set),
        Ok(None) => {}
        // A list that does not parse is a warning; its mask twin may still do.
        Err(e) => warnings.push(&e),
    }
    let mask = mask_name(name)?;
    warnings.take_opt(root.read_parsed(&dir.join(mask), parse_cpumask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_without_a_mask_twin_have_none() {
        assert_eq!(mask_name("shared_cpu_list"), Some("shared_cpu_map"));
        assert_eq!(mask_name("smp_affinity_list"), Some("smp_affinity"));
        assert_eq!(mask_name("online"), None);
        assert_eq!(mask_name("related_cpus"), None);
    }
}
