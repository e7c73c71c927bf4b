//! The topology of every real machine in tests/fixtures/topology equals what the
//! upstream tool (hwloc's lstopo, util-linux's lscpu, libvirt, ghw) says about
//! the same sysfs tree. The expectation is read from the upstream file here,
//! never retyped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use vfio_assistant::host::{HostSnapshot, scan};
use vfio_assistant::sysroot::HostRoot;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/topology")
        .join(name)
}

fn scan_fixture(name: &str) -> HostSnapshot {
    scan(&HostRoot::at(fixture(name))).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn expected(name: &str, file_suffix: &str) -> String {
    let dir = fixture(name).join("expected");
    let entry = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(file_suffix))
        .unwrap_or_else(|| panic!("{name}: no expected *{file_suffix}"));
    std::fs::read_to_string(entry).unwrap()
}

/// What an upstream tool says: counts, and each core as its set of CPUs.
#[derive(Debug, Default)]
struct Upstream {
    packages: usize,
    numa_nodes: usize,
    l3_groups: usize,
    cpus_online: usize,
    cores: BTreeSet<Vec<u32>>,
    /// hwloc `cpukind` per core (by its CPUs), when the tool reports kinds.
    kinds: BTreeMap<Vec<u32>, u8>,
}

fn p_index(line: &str) -> Option<u32> {
    let start = line.find("(P#")? + 3;
    let rest = &line[start..];
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// lstopo -v console output: count objects; cores with their PU children.
fn parse_lstopo_console(text: &str) -> Upstream {
    let mut up = Upstream::default();
    let mut current: Option<(usize, Vec<u32>, Option<u8>)> = None;
    let flush = |cur: &mut Option<(usize, Vec<u32>, Option<u8>)>, up: &mut Upstream| {
        if let Some((_, mut pus, kind)) = cur.take() {
            pus.sort_unstable();
            if let Some(k) = kind {
                up.kinds.insert(pus.clone(), k);
            }
            up.cores.insert(pus);
        }
    };
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim_start();
        if let Some((ci, _, _)) = &current
            && indent <= *ci
            && !t.starts_with("PU L#")
        {
            flush(&mut current, &mut up);
        }
        if t.starts_with("Package L#") {
            up.packages += 1;
        } else if t.starts_with("NUMANode L#") {
            up.numa_nodes += 1;
        } else if t.starts_with("L3Cache L#") {
            up.l3_groups += 1;
        } else if t.starts_with("Core L#") {
            flush(&mut current, &mut up);
            let kind = t
                .split_once("cpukind=")
                .and_then(|(_, r)| {
                    r.trim_end_matches(')')
                        .split(|c: char| !c.is_ascii_digit())
                        .next()
                })
                .and_then(|k| k.parse().ok());
            current = Some((indent, Vec::new(), kind));
        } else if t.starts_with("PU L#") {
            up.cpus_online += 1;
            if let (Some((_, pus, _)), Some(p)) = (current.as_mut(), p_index(t)) {
                pus.push(p);
            }
        }
    }
    flush(&mut current, &mut up);
    up
}

/// lstopo XML: `<object type="X" os_index="N">` nesting.
fn parse_lstopo_xml(text: &str) -> Upstream {
    let mut up = Upstream::default();
    let mut stack: Vec<String> = Vec::new();
    let mut core_pus: Vec<Vec<u32>> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("<object type=\"") {
            let ty = rest.split('"').next().unwrap_or("").to_string();
            let os_index = rest
                .split_once("os_index=\"")
                .and_then(|(_, r)| r.split('"').next())
                .and_then(|n| n.parse::<u32>().ok());
            match ty.as_str() {
                "Package" => up.packages += 1,
                "NUMANode" => up.numa_nodes += 1,
                "L3Cache" => up.l3_groups += 1,
                "Core" => core_pus.push(Vec::new()),
                "PU" => {
                    up.cpus_online += 1;
                    if stack.iter().any(|s| s == "Core")
                        && let (Some(pus), Some(i)) = (core_pus.last_mut(), os_index)
                    {
                        pus.push(i);
                    }
                }
                _ => {}
            }
            if !t.ends_with("/>") {
                stack.push(ty);
            }
        } else if t.starts_with("</object>") {
            stack.pop();
        }
    }
    for mut pus in core_pus {
        pus.sort_unstable();
        up.cores.insert(pus);
    }
    up
}

fn ours(s: &HostSnapshot) -> Upstream {
    let t = &s.topology;
    let mut kinds = BTreeMap::new();
    for c in &t.cores {
        if let Some(k) = c.kind.and_then(|k| t.core_kinds.get(k)) {
            kinds.insert(c.cpus.clone(), k.efficiency);
        }
    }
    Upstream {
        packages: t.summary.packages,
        numa_nodes: t.summary.numa_nodes,
        l3_groups: t.summary.l3_groups,
        cpus_online: t.summary.cpus_online,
        cores: t.cores.iter().map(|c| c.cpus.clone()).collect(),
        kinds,
    }
}

fn assert_same(name: &str, up: &Upstream, s: &HostSnapshot) {
    let us = ours(s);
    assert_eq!(us.packages, up.packages, "{name}: packages");
    assert_eq!(us.numa_nodes, up.numa_nodes, "{name}: NUMA nodes");
    assert_eq!(us.l3_groups, up.l3_groups, "{name}: L3 groups");
    assert_eq!(us.cpus_online, up.cpus_online, "{name}: online CPUs");
    assert_eq!(us.cores, up.cores, "{name}: cores and their SMT siblings");
    assert_eq!(
        s.topology.summary.cores,
        up.cores.len(),
        "{name}: core count"
    );
    let threads = up.cores.iter().map(Vec::len).max().unwrap_or(0);
    assert_eq!(
        s.topology.summary.threads_per_core, threads,
        "{name}: threads per core"
    );
    if up.kinds.values().collect::<BTreeSet<_>>().len() > 1 {
        assert_eq!(
            us.kinds, up.kinds,
            "{name}: hybrid core kinds (hwloc cpukind = our efficiency rank)"
        );
        assert!(s.topology.summary.hybrid, "{name}: hybrid");
    } else {
        assert!(!s.topology.summary.hybrid, "{name}: not hybrid");
    }
}

const HWLOC_CONSOLE: &[&str] = &[
    "hwloc-128arm-2pa2n8cluster4co",
    "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t",
    "hwloc-32intel64-2p8co2t+8ve",
    "hwloc-5intel64-hybrid-lakefield",
    "hwloc-64amd64-4s2n4ca2co",
    "hwloc-memorysidecaches",
    "hwloc-offline-cpu0-node0",
];

#[test]
fn hwloc_console_fixtures_match_lstopo() {
    for name in HWLOC_CONSOLE {
        let text = expected(name, ".console");
        let up = parse_lstopo_console(&text);
        assert!(
            up.cpus_online > 0,
            "{name}: parsed no PU from the lstopo output"
        );
        // Cross-check our reading of the tree with lstopo's own summary line.
        let summary_nodes: usize = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Special depth -3:"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(
            up.numa_nodes, summary_nodes,
            "{name}: NUMANode lines vs lstopo summary"
        );
        assert!(
            up.cores.iter().all(|c| !c.is_empty()),
            "{name}: a core without PUs"
        );
        assert_eq!(
            up.cores.iter().map(Vec::len).sum::<usize>(),
            up.cpus_online,
            "{name}: every PU in a core"
        );
        assert_same(name, &up, &scan_fixture(name));
    }
}

#[test]
fn hwloc_xml_fixture_matches_lstopo() {
    let name = "hwloc-32em64t-2n8c+dax+nvme+mic+dimms";
    let up = parse_lstopo_xml(&expected(name, ".xml"));
    assert!(up.cpus_online > 0);
    assert_same(name, &up, &scan_fixture(name));
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

/// lscpu's parsable CSV (`# CPU,Core,Socket,Node,,L1d,L1i,L2,L3`): the last
/// section is `--physical` (sysfs ids) when there are several.
fn lscpu_rows(text: &str) -> Vec<Vec<String>> {
    let sections: Vec<&str> = text.split("# CPU,Core,Socket,Node").collect();
    let last = sections.last().unwrap();
    last.lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn utillinux_fixtures_match_lscpu() {
    for name in [
        "utillinux-x86_64-64cpu-linux6.2",
        "utillinux-arm-A510-A710-A715-X3",
    ] {
        let text = expected(name, name.trim_start_matches("utillinux-"));
        let rows = lscpu_rows(&text);
        assert!(!rows.is_empty(), "{name}: no lscpu rows");
        let s = scan_fixture(name);
        let col = |i: usize| rows.iter().map(|r| r[i].clone()).collect::<BTreeSet<_>>();
        let cores: BTreeSet<(String, String)> =
            rows.iter().map(|r| (r[2].clone(), r[1].clone())).collect();
        assert_eq!(s.topology.summary.cpus_online, rows.len(), "{name}: CPUs");
        assert_eq!(s.topology.summary.packages, col(2).len(), "{name}: sockets");
        assert_eq!(s.topology.summary.cores, cores.len(), "{name}: cores");
        assert_eq!(
            s.topology.summary.l2_groups,
            col(7).len(),
            "{name}: L2 groups"
        );
        assert_eq!(
            s.topology.summary.l3_groups,
            col(8).len(),
            "{name}: L3 groups"
        );
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
    // The ARM phone SoC: three capacities (LITTLE, mid, big) from cpu_capacity.
    let s = scan_fixture("utillinux-arm-A510-A710-A715-X3");
    assert!(s.topology.summary.hybrid);
    let names: Vec<&str> = s
        .topology
        .core_kinds
        .iter()
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(names.first(), Some(&"LITTLE"));
    assert_eq!(names.last(), Some(&"big"));
}

#[test]
fn libvirt_nodeinfo_matches() {
    let name = "libvirt-linux-x86_64-test6";
    let text = expected(name, ".expected");
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
fn libvirt_capabilities_match() {
    let name = "libvirt-vircaps-linux-caches";
    let text = expected(name, ".xml");
    let s = scan_fixture(name);
    let mut siblings: BTreeSet<Vec<u32>> = BTreeSet::new();
    let mut cpus = 0;
    for line in text
        .lines()
        .filter(|l| l.trim_start().starts_with("<cpu id="))
    {
        cpus += 1;
        let sib = line
            .split_once("siblings='")
            .unwrap()
            .1
            .split('\'')
            .next()
            .unwrap();
        siblings.insert(sib.split(',').map(|x| x.parse().unwrap()).collect());
    }
    let l3_banks = text
        .lines()
        .filter(|l| l.contains("<bank ") && l.contains("level='3'"))
        .count();
    assert_eq!(s.topology.summary.cpus_online, cpus);
    assert_eq!(
        s.topology
            .cores
            .iter()
            .map(|c| c.cpus.clone())
            .collect::<BTreeSet<_>>(),
        siblings
    );
    assert_eq!(s.topology.summary.l3_groups, l3_banks);
}

#[test]
fn ghw_ryzen_matches_ghwc_output() {
    let name = "ghw-amd-ryzen5-1600";
    let text = expected(name, ".txt");
    let s = scan_fixture(name);
    // "processor core #5 (2 threads), logical processors [4 10]"
    let mut cores: BTreeSet<Vec<u32>> = BTreeSet::new();
    for line in text.lines().filter(|l| l.contains("processor core #")) {
        let inside = line.split_once('[').unwrap().1.trim_end_matches(']');
        let mut v: Vec<u32> = inside
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        v.sort_unstable();
        cores.insert(v);
    }
    assert_eq!(cores.len(), 6);
    assert_eq!(
        s.topology
            .cores
            .iter()
            .map(|c| c.cpus.clone())
            .collect::<BTreeSet<_>>(),
        cores
    );
    // Zen 1: two CCX, each its own L3; core ids skip 3 (0,1,2,4,5,6).
    assert_eq!(s.topology.summary.l3_groups, 2);
    let ids: BTreeSet<i64> = s.topology.cores.iter().filter_map(|c| c.core_id).collect();
    assert!(!ids.contains(&3) && ids.contains(&6));
}

#[test]
fn odd_package_ids_are_counted_not_trusted() {
    let s = scan_fixture("hwloc-128arm-2pa2n8cluster4co");
    let ids: Vec<i64> = s.topology.packages.iter().map(|p| p.id).collect();
    assert_eq!(ids, vec![36, 8442]);
    assert_eq!(s.topology.summary.clusters, 32);
}
