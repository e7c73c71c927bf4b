//! Kernel state: the command line, loaded modules, transparent hugepages,
//! hugepage pools, clocksource and release.

use super::topology::HugepagePool;
use super::warnings::Warnings;
use crate::parse::cmdline::{Cmdline, parse_cmdline};
use crate::parse::modules::parse_modules;
use crate::parse::values::{parse_bracket_choice, parse_u64};
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KernelState {
    pub release: Option<String>,
    pub cmdline: Option<Cmdline>,
    /// Loaded module names, sorted (None when the list could not be read).
    pub modules: Option<Vec<String>>,
    /// `always`, `madvise` or `never`.
    pub thp_enabled: Option<String>,
    pub thp_defrag: Option<String>,
    /// System-wide hugepage pools, one per page size.
    pub hugepages: Vec<HugepagePool>,
    pub clocksource: Option<String>,
    pub clocksources_available: Vec<String>,
    /// `/proc/meminfo` MemTotal and MemAvailable (what can be had without
    /// swapping), in KiB.
    pub mem_total_kib: Option<u64>,
    pub mem_available_kib: Option<u64>,
}

impl KernelState {
    pub fn has_module(&self, name: &str) -> Option<bool> {
        self.modules
            .as_ref()
            .map(|m| m.binary_search_by(|x| x.as_str().cmp(name)).is_ok())
    }
}

/// Pure: (MemTotal, MemAvailable) in KiB from `/proc/meminfo` text.
/// (procfs-core's `Meminfo` insists on fields a trimmed or old meminfo
/// lacks; these two are all the preflight needs.)
pub fn parse_meminfo_totals(text: &str) -> Result<(u64, Option<u64>), crate::parse::ParseError> {
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            rest.trim().trim_end_matches("kB").trim().parse().ok()
        })
    };
    let total =
        field("MemTotal").ok_or_else(|| crate::parse::ParseError::new("no MemTotal line"))?;
    Ok((total, field("MemAvailable")))
}

/// `hugepages-2048kB/{nr_hugepages,free_hugepages}` under `dir`.
pub fn read_hugepage_pools(
    root: &HostRoot,
    dir: &HostPath,
    warnings: &mut Warnings,
) -> Vec<HugepagePool> {
    let Ok(names) = root.list_dir(dir) else {
        return Vec::new();
    };
    let mut pools = Vec::new();
    for name in names {
        let Some(size_kib) = name
            .strip_prefix("hugepages-")
            .and_then(|s| s.strip_suffix("kB"))
            .and_then(|s| s.parse().ok())
        else {
            continue;
        };
        let d = dir.join(&name);
        let total = warnings.take_opt(root.read_parsed(&d.join("nr_hugepages"), parse_u64));
        let free = warnings.take_opt(root.read_parsed(&d.join("free_hugepages"), parse_u64));
        pools.push(HugepagePool {
            size_kib,
            total: total.unwrap_or(0),
            free: free.unwrap_or(0),
        });
    }
    pools.sort_by_key(|p| p.size_kib);
    pools
}

pub fn read_kernel(root: &HostRoot, warnings: &mut Warnings) -> KernelState {
    let cmdline = warnings
        .take(root.read_text(&HostPath::proc("cmdline")))
        .map(|t| parse_cmdline(&t));
    let modules = match root.read_text(&HostPath::proc("modules")) {
        Ok(t) => match parse_modules(&t) {
            Ok(m) => {
                let mut names: Vec<String> = m.into_iter().map(|m| m.name).collect();
                names.sort();
                Some(names)
            }
            Err(e) => {
                warnings.note(HostPath::proc("modules").to_string(), e.to_string());
                None
            }
        },
        Err(e) => {
            warnings.push(&e);
            None
        }
    };
    let meminfo =
        warnings.take_opt(root.read_parsed(&HostPath::proc("meminfo"), parse_meminfo_totals));
    let thp = HostPath::sys("kernel/mm/transparent_hugepage");
    let clock = HostPath::sys("devices/system/clocksource/clocksource0");
    KernelState {
        release: warnings.take_opt(root.read_attr_opt(&HostPath::proc("sys/kernel/osrelease"))),
        cmdline,
        modules,
        thp_enabled: warnings
            .take_opt(root.read_parsed(&thp.join("enabled"), parse_bracket_choice)),
        thp_defrag: warnings.take_opt(root.read_parsed(&thp.join("defrag"), parse_bracket_choice)),
        hugepages: read_hugepage_pools(root, &HostPath::sys("kernel/mm/hugepages"), warnings),
        clocksource: warnings.take_opt(root.read_attr_opt(&clock.join("current_clocksource"))),
        clocksources_available: warnings
            .take_opt(root.read_attr_opt(&clock.join("available_clocksource")))
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
        mem_total_kib: meminfo.map(|m| m.0),
        mem_available_kib: meminfo.and_then(|m| m.1),
    }
}
