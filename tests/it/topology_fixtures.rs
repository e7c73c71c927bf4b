//! The topology of every real machine in tests/fixtures/topology equals what the
//! upstream tool (hwloc's lstopo, util-linux's lscpu, libvirt, ghw) says about
//! the same sysfs tree: packages, L3 and L2 groups and cores as the sets of
//! CPUs they cover, hybrid kinds where the tool reports them. The expectation
//! is read from the upstream file here, never retyped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::upstream;
use std::collections::BTreeSet;
use upstream::{all_fixtures, assert_same, expected, fixture, lstopo_console, upstream};
use vfio_assistant::host::{HostSnapshot, scan};
use vfio_assistant::sysroot::HostRoot;

fn scan_fixture(name: &str) -> HostSnapshot {
    scan(&HostRoot::at(fixture(name))).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The one fixture without any upstream expectation (ghw ships none for it).
const NO_EXPECTED_OUTPUT: &[&str] = &["ghw-intel-i7-1270P"];

/// hwloc's Bulldozer tree: upstream corrected its cache *masks* by hand ("with
/// correct L1i and L2 cache info", hwloc commit ff0216926) and left the
/// kernel's lists, which give each core its own L2. lstopo reads the masks; we
/// read the list first, so only here do the L2 groups differ (read from the
/// masks alone, tests/it/topology_masks.rs, they match lstopo).
const LISTS_DISAGREE_WITH_MASKS: &str = "hwloc-64amd64-4s2n4ca2co";

#[test]
fn every_fixture_matches_its_capturing_tool() {
    let mut checked = 0;
    for name in all_fixtures() {
        if name == "libvirt-linux-x86_64-test6" {
            continue; // counts only: libvirt_nodeinfo_matches
        }
        let Some(up) = upstream(&name) else {
            assert!(
                NO_EXPECTED_OUTPUT.contains(&name.as_str()),
                "{name}: no expected output found"
            );
            continue;
        };
        assert!(
            up.cpus_online > 0,
            "{name}: parsed no CPU from the tool's output"
        );
        assert!(
            up.cores.iter().all(|c| !c.is_empty()),
            "{name}: a core without CPUs"
        );
        assert_eq!(
            up.cores.iter().map(Vec::len).sum::<usize>(),
            up.cpus_online,
            "{name}: every CPU in a core"
        );
        let s = scan_fixture(&name);
        let mut up = up;
        if name == LISTS_DISAGREE_WITH_MASKS {
            let per_core: BTreeSet<Vec<u32>> =
                up.cores.iter().flatten().map(|c| vec![*c]).collect();
            let ours: BTreeSet<Vec<u32>> = s
                .topology
                .l2_groups
                .iter()
                .map(|g| g.cpus.clone())
                .collect();
            assert_eq!(
                ours, per_core,
                "{name}: the kernel's shared_cpu_list says one L2 per core"
            );
            assert_ne!(
                up.l2.as_ref(),
                Some(&per_core),
                "{name}: lstopo's masks share L2"
            );
            up.l2 = None;
        }
        assert_same(&name, &up, &s);
        // hwloc reports kinds whenever it finds more than one: none means not hybrid.
        if name.starts_with("hwloc-") && up.kinds.values().collect::<BTreeSet<_>>().len() < 2 {
            assert!(!s.topology.summary.hybrid, "{name}: not hybrid");
        }
        checked += 1;
    }
    assert!(checked >= 13, "only {checked} fixtures checked");
}

#[test]
fn lstopo_console_trees_are_read_whole() {
    for name in all_fixtures() {
        let Some(text) = expected(&name, ".console") else {
            continue;
        };
        let up = lstopo_console(&text);
        // Cross-check our reading of the tree with lstopo's own summary lines.
        let count = |label: &str| -> Option<usize> {
            text.lines().find_map(|l| {
                let (n, rest) = l.split_once(':')?;
                let _ = n
                    .trim()
                    .strip_prefix("depth ")
                    .or_else(|| n.trim().strip_prefix("Special depth "))?;
                let mut w = rest.split_whitespace();
                let count = w.next()?.parse().ok()?;
                (w.next()? == label).then_some(count)
            })
        };
        assert_eq!(
            up.numa_nodes,
            count("NUMANode"),
            "{name}: NUMANode lines vs summary"
        );
        assert_eq!(
            Some(up.cpus_online),
            count("PU"),
            "{name}: PU lines vs summary"
        );
        assert_eq!(
            Some(up.cores.len()),
            count("Core"),
            "{name}: Core lines vs summary"
        );
        let l3 = up.l3.as_ref().map(|s| s.len()).filter(|n| *n > 0);
        assert_eq!(l3, count("L3Cache"), "{name}: L3Cache lines vs summary");
        let l2 = up.l2.as_ref().map(|s| s.len()).filter(|n| *n > 0);
        assert_eq!(l2, count("L2Cache"), "{name}: L2Cache lines vs summary");
    }
}

#[test]
fn offline_cpus_are_counted_but_have_no_core() {
    let s = scan_fixture("hwloc-offline-cpu0-node0");
    assert_eq!(s.topology.summary.cpus_present, 24);
    assert_eq!(s.topology.summary.cpus_offline, 7);
    for id in [0, 1, 2, 3, 21, 22, 23] {
        let cpu = s.topology.cpu(id).unwrap();
        assert!(!cpu.online && cpu.core.is_none(), "cpu{id}");
    }
}

#[test]
fn utillinux_summaries_match_lscpu() {
    for name in [
        "utillinux-x86_64-64cpu-linux6.2",
        "utillinux-arm-A510-A710-A715-X3",
    ] {
        let text = expected(name, name.trim_start_matches("utillinux-")).unwrap();
        let s = scan_fixture(name);
        let tpc: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("Thread(s) per core:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap();
        assert_eq!(
            s.topology.summary.threads_per_core, tpc,
            "{name}: threads per core"
        );
    }
}

/// lscpu prints one section per core type, `Model name:` then
/// `Core(s) per socket:` and `Socket(s):`: (name, cores), in its order.
fn lscpu_core_types(text: &str) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize, usize)> = Vec::new();
    for line in text.lines() {
        let field = |k: &str| line.strip_prefix(k).map(|v| v.trim().to_string());
        if let Some(m) = field("Model name:") {
            out.push((m, 0, 0));
        } else if let (Some(v), Some(last)) = (field("Core(s) per socket:"), out.last_mut()) {
            last.1 = v.parse().unwrap();
        } else if let (Some(v), Some(last)) = (field("Socket(s):"), out.last_mut()) {
            last.2 = v.parse().unwrap();
        }
    }
    out.into_iter().map(|(m, c, s)| (m, c * s)).collect()
}

#[test]
fn arm_core_kinds_are_the_core_types_lscpu_names() {
    // The phone SoC: Cortex-A510, A710, A715 and X3 by their CPU part; A710
    // and A715 share one cpu_capacity (855), so capacity alone saw three kinds.
    let name = "utillinux-arm-A510-A710-A715-X3";
    let text = expected(name, "A510-A710-A715-X3").unwrap();
    let lscpu: BTreeSet<(String, usize)> = lscpu_core_types(&text).into_iter().collect();
    assert_eq!(lscpu.len(), 4, "{lscpu:?}");
    let s = scan_fixture(name);
    assert!(s.topology.summary.hybrid);
    let ours: BTreeSet<(String, usize)> = s
        .topology
        .core_kinds
        .iter()
        .map(|k| (k.name.clone(), k.cores))
        .collect();
    assert_eq!(ours, lscpu);
    let kinds = &s.topology.core_kinds;
    assert!(kinds.iter().all(|k| k.source == "arm_midr"));
    assert_eq!(kinds.first().map(|k| k.name.as_str()), Some("Cortex-A510"));
    assert_eq!(kinds.last().map(|k| k.name.as_str()), Some("Cortex-X3"));
}

#[test]
fn gb10_core_types_stay_two_kinds_across_five_capacities() {
    // NVIDIA GB10: Cortex-X925 and Cortex-A725 in two clusters; the X925s have
    // cpu_capacity 997, 1017 and 1024, the A725s 718 and 731. hwloc's own
    // expected output (MIDR) has two kinds; so do we.
    let name = "hwloc-nvidia-dgx-gb10";
    let s = scan_fixture(name);
    let kinds = &s.topology.core_kinds;
    let names: Vec<&str> = kinds.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, vec!["Cortex-A725", "Cortex-X925"]);
    let caps: Vec<(Option<u64>, Option<u64>)> = kinds
        .iter()
        .map(|k| (k.capacity_min, k.capacity_max))
        .collect();
    assert_eq!(caps, vec![(Some(718), Some(731)), (Some(997), Some(1024))]);
}

#[test]
fn libvirt_nodeinfo_matches() {
    let name = "libvirt-linux-x86_64-test6";
    let text = expected(name, ".expected").unwrap();
    // "CPUs: 6/8, MHz: 1596, Nodes: 1, Sockets: 1, Cores: 4, Threads: 2"
    let field = |k: &str| -> String {
        text.split(", ")
            .find_map(|p| p.trim().strip_prefix(&format!("{k}: ")))
            .unwrap()
            .trim()
            .to_string()
    };
    let (online, present) = field("CPUs")
        .split_once('/')
        .map(|(a, b)| (a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()))
        .unwrap();
    let nodes: usize = field("Nodes").parse().unwrap();
    let sockets_per_node: usize = field("Sockets").parse().unwrap();
    let cores_per_socket: usize = field("Cores").parse().unwrap();
    let threads: usize = field("Threads").parse().unwrap();
    let s = scan_fixture(name);
    let sm = &s.topology.summary;
    assert_eq!((sm.cpus_online, sm.cpus_present), (online, present));
    assert_eq!(sm.numa_nodes, nodes);
    assert_eq!(sm.packages, sockets_per_node * nodes);
    assert_eq!(sm.cores, cores_per_socket * sm.packages);
    assert_eq!(sm.threads_per_core, threads);
}

#[test]
fn ghw_ryzen_core_ids_skip_a_number() {
    let s = scan_fixture("ghw-amd-ryzen5-1600");
    // Zen 1: core ids skip 3 (0,1,2,4,5,6); cores are still found by siblings.
    let ids: BTreeSet<i64> = s.topology.cores.iter().filter_map(|c| c.core_id).collect();
    assert!(!ids.contains(&3) && ids.contains(&6));
    assert_eq!(s.topology.summary.cores, 6);
}

#[test]
fn odd_package_ids_are_counted_not_trusted() {
    let s = scan_fixture("hwloc-128arm-2pa2n8cluster4co");
    let ids: Vec<i64> = s.topology.packages.iter().map(|p| p.id).collect();
    assert_eq!(ids, vec![36, 8442]);
    assert_eq!(s.topology.summary.clusters, 32);
}

#[test]
fn an_old_kernel_with_only_cpu_masks_has_its_caches() {
    // hwloc's 16em64t-4s2c2t: a 4-socket Xeon whose kernel has no *_list
    // files at all (shared_cpu_map, thread_siblings only) and no cpu/online.
    let name = "hwloc-16em64t-4s2c2t";
    let root = fixture(name);
    let lists = walk(&root)
        .into_iter()
        .filter(|p| p.ends_with("_list") || p.ends_with("cpulist"))
        .count();
    assert_eq!(lists, 0, "{name}: a list file crept in");
    let s = scan_fixture(name);
    assert_eq!(
        s.topology.summary.l3_groups, 4,
        "{name}: one L3 per package"
    );
    assert_eq!(s.topology.summary.l2_groups, 8, "{name}: one L2 per core");
    assert_eq!(s.topology.summary.threads_per_core, 2);
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path().to_string_lossy().into_owned());
        }
    }
    out
}
