//! What the capturing tool says about each real topology fixture, read from
//! the tool's own expected output in `expected/` (never retyped): hwloc's
//! lstopo (console and XML), util-linux's lscpu, libvirt's capabilities, ghw.
//! Each CPU set (package, L3, L2, core) is compared as the set of CPUs it
//! covers, not only counted; and our model put in the same shape.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use vfio_assistant::host::HostSnapshot;
use vfio_assistant::parse::cpulist::parse_cpulist;

pub type Sets = BTreeSet<Vec<u32>>;

/// What a tool reports; `None` where it does not report that part.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Upstream {
    pub packages: Option<Sets>,
    pub numa_nodes: Option<usize>,
    pub l3: Option<Sets>,
    pub l2: Option<Sets>,
    pub cpus_online: usize,
    pub cores: Sets,
    /// hwloc `cpukind` rank per core (by its CPUs), when the tool reports kinds.
    pub kinds: BTreeMap<Vec<u32>, u8>,
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/topology")
        .join(name)
}

/// Every topology fixture, sorted.
pub fn all_fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The text of the fixture's `expected/*<suffix>` file.
pub fn expected(name: &str, file_suffix: &str) -> Option<String> {
    let dir = fixture(name).join("expected");
    let entry = std::fs::read_dir(&dir)
        .ok()?
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(file_suffix))?;
    Some(std::fs::read_to_string(entry).unwrap())
}

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v.dedup();
    v
}

fn p_index(line: &str) -> Option<u32> {
    let start = line.find("(P#")? + 3;
    let rest = &line[start..];
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// lstopo -v console output: an indented tree; every object covers the PUs
/// below it.
pub fn lstopo_console(text: &str) -> Upstream {
    struct Obj {
        indent: usize,
        ty: String,
        pus: Vec<u32>,
        kind: Option<u8>,
    }
    let mut stack: Vec<Obj> = Vec::new();
    let mut done: Vec<Obj> = Vec::new();
    let mut up = Upstream::default();
    for line in text.lines() {
        let t = line.trim_start();
        let Some((ty, _)) = t.split_once(" L#") else {
            continue;
        };
        let indent = line.len() - t.len();
        while stack.last().is_some_and(|o| o.indent >= indent) {
            done.extend(stack.pop());
        }
        if ty == "PU" {
            up.cpus_online += 1;
            let p = p_index(t).expect("PU without P#");
            for o in &mut stack {
                o.pus.push(p);
            }
        }
        let kind = t
            .split_once("cpukind=")
            .and_then(|(_, r)| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|k| k.parse().ok());
        stack.push(Obj {
            indent,
            ty: ty.to_string(),
            pus: Vec::new(),
            kind,
        });
    }
    done.append(&mut stack);
    let sets = |ty: &str| -> Sets {
        done.iter()
            .filter(|o| o.ty == ty)
            .map(|o| sorted(o.pus.clone()))
            .collect()
    };
    up.packages = Some(sets("Package"));
    up.numa_nodes = Some(done.iter().filter(|o| o.ty == "NUMANode").count());
    up.l3 = Some(sets("L3Cache"));
    up.l2 = Some(sets("L2Cache"));
    up.cores = sets("Core");
    for o in done.iter().filter(|o| o.ty == "Core") {
        if let Some(k) = o.kind {
            up.kinds.insert(sorted(o.pus.clone()), k);
        }
    }
    up
}

/// An hwloc bitmap (`0x000003ff`, `0xffffffff,0x0000ffff`, empty words for zero).
fn hwloc_bitmap(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, w) in s.rsplit(',').enumerate() {
        let w = w.trim_start_matches("0x");
        let bits = if w.is_empty() {
            0
        } else {
            u32::from_str_radix(w, 16).unwrap()
        };
        for b in 0..32 {
            if bits & (1 << b) != 0 {
                out.push(i as u32 * 32 + b);
            }
        }
    }
    out
}

fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_once(&format!(" {name}=\""))
        .and_then(|(_, r)| r.split('"').next())
}

/// lstopo XML: each object's `cpuset`; `<cpukind>`s in rank order.
pub fn lstopo_xml(text: &str) -> Upstream {
    let mut up = Upstream::default();
    let mut by_type: BTreeMap<String, Sets> = BTreeMap::new();
    let mut numa = 0;
    let mut kinds: Vec<Vec<u32>> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("<cpukind ") {
            kinds.push(hwloc_bitmap(attr(t, "cpuset").unwrap()));
            continue;
        }
        if !t.starts_with("<object ") {
            continue;
        }
        let ty = attr(t, "type").unwrap().to_string();
        if ty == "NUMANode" {
            numa += 1;
        }
        if ty == "PU" {
            up.cpus_online += 1;
        }
        if let Some(cs) = attr(t, "cpuset") {
            by_type.entry(ty).or_default().insert(hwloc_bitmap(cs));
        }
    }
    let take = |ty: &str| by_type.get(ty).cloned().unwrap_or_default();
    up.packages = Some(take("Package"));
    up.numa_nodes = Some(numa);
    up.l3 = Some(take("L3Cache"));
    up.l2 = Some(take("L2Cache"));
    up.cores = take("Core");
    if kinds.len() > 1 {
        for core in &up.cores {
            if let Some(rank) = kinds
                .iter()
                .position(|k| core.iter().all(|c| k.contains(c)))
            {
                up.kinds.insert(core.clone(), rank as u8);
            }
        }
    }
    up
}

/// lscpu's parsable CSV (`# CPU,Core,Socket,Node,,L1d,L1i,L2,L3`): the last
/// section is `--physical` (sysfs ids) when there are several. Cores are
/// CPUs with the same (socket, core); caches CPUs with the same instance id.
pub fn lscpu_rows(text: &str) -> Vec<Vec<String>> {
    let sections: Vec<&str> = text.split("# CPU,Core,Socket,Node").collect();
    let last = sections.last().unwrap();
    last.lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

pub fn lscpu(text: &str) -> Upstream {
    let rows = lscpu_rows(text);
    let group = |cols: &[usize]| -> Sets {
        let mut m: BTreeMap<Vec<String>, Vec<u32>> = BTreeMap::new();
        for r in &rows {
            let key: Vec<String> = cols
                .iter()
                .map(|&i| r.get(i).cloned().unwrap_or_default())
                .collect();
            if key.iter().any(String::is_empty) {
                continue;
            }
            m.entry(key).or_default().push(r[0].parse().unwrap());
        }
        m.into_values().map(sorted).collect()
    };
    Upstream {
        packages: Some(group(&[2])),
        numa_nodes: None,
        l3: Some(group(&[8])),
        l2: Some(group(&[7])),
        cpus_online: rows.len(),
        cores: group(&[2, 1]),
        kinds: BTreeMap::new(),
    }
}

/// libvirt host capabilities: `<cpu … socket_id siblings>` and L3 `<bank cpus>`.
pub fn libvirt_caps(text: &str) -> Upstream {
    let mut up = Upstream::default();
    let mut sockets: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let q = |line: &str, name: &str| {
        line.split_once(&format!("{name}='"))
            .and_then(|(_, r)| r.split('\'').next())
            .map(str::to_string)
    };
    let mut l3 = Sets::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("<cpu id=") {
            up.cpus_online += 1;
            let id: u32 = q(line, "id").unwrap().parse().unwrap();
            sockets
                .entry(q(line, "socket_id").unwrap())
                .or_default()
                .push(id);
            let sib = q(line, "siblings").unwrap();
            up.cores
                .insert(parse_cpulist(&sib).unwrap().into_iter().collect());
        }
        if line.starts_with("<bank ") && q(line, "level").as_deref() == Some("3") {
            l3.insert(
                parse_cpulist(&q(line, "cpus").unwrap())
                    .unwrap()
                    .into_iter()
                    .collect(),
            );
        }
    }
    up.packages = Some(sockets.into_values().map(sorted).collect());
    up.l3 = Some(l3);
    up
}

/// ghwc's text: `physical package #0 …` then `processor core #5 (2 threads),
/// logical processors [4 10]`.
pub fn ghwc(text: &str) -> Upstream {
    let mut up = Upstream::default();
    let mut packages: Vec<Vec<u32>> = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("physical package #") {
            packages.push(Vec::new());
        }
        if line.contains("processor core #") {
            let inside = line.split_once('[').unwrap().1.trim_end_matches(']');
            let cpus: Vec<u32> = inside
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            up.cpus_online += cpus.len();
            packages.last_mut().unwrap().extend(&cpus);
            up.cores.insert(sorted(cpus));
        }
    }
    up.packages = Some(packages.into_iter().map(sorted).collect());
    up
}

/// The capturing tool's view of a fixture, from whichever expected output it
/// ships; None for a fixture without one (ghw-intel-i7-1270P).
pub fn upstream(name: &str) -> Option<Upstream> {
    if let Some(t) = expected(name, ".console") {
        return Some(lstopo_console(&t));
    }
    if name.starts_with("hwloc-") {
        return expected(name, ".xml").map(|t| lstopo_xml(&t));
    }
    if name.starts_with("utillinux-") {
        return expected(name, name.trim_start_matches("utillinux-")).map(|t| lscpu(&t));
    }
    if name.starts_with("libvirt-vircaps") {
        return expected(name, ".xml").map(|t| libvirt_caps(&t));
    }
    if name.starts_with("ghw-") {
        return expected(name, ".txt").map(|t| ghwc(&t));
    }
    None
}

/// Our model in the same shape.
pub fn ours(s: &HostSnapshot) -> Upstream {
    let t = &s.topology;
    let mut kinds = BTreeMap::new();
    for c in &t.cores {
        if let Some(k) = c.kind.and_then(|k| t.core_kinds.get(k)) {
            kinds.insert(c.cpus.clone(), k.efficiency);
        }
    }
    Upstream {
        packages: Some(t.packages.iter().map(|p| p.cpus.clone()).collect()),
        numa_nodes: Some(t.summary.numa_nodes),
        l3: Some(t.l3_groups.iter().map(|g| g.cpus.clone()).collect()),
        l2: Some(t.l2_groups.iter().map(|g| g.cpus.clone()).collect()),
        cpus_online: t.summary.cpus_online,
        cores: t.cores.iter().map(|c| c.cpus.clone()).collect(),
        kinds,
    }
}

/// Our model says what the tool says, part by part, as sets of CPUs.
pub fn assert_same(name: &str, up: &Upstream, s: &HostSnapshot) {
    let us = ours(s);
    assert_eq!(us.cpus_online, up.cpus_online, "{name}: online CPUs");
    assert_eq!(us.cores, up.cores, "{name}: cores and their SMT siblings");
    if let Some(p) = &up.packages {
        assert_eq!(
            us.packages.as_ref(),
            Some(p),
            "{name}: packages (their CPUs)"
        );
    }
    if let Some(n) = up.numa_nodes {
        assert_eq!(us.numa_nodes, Some(n), "{name}: NUMA nodes");
    }
    if let Some(l3) = &up.l3 {
        assert_eq!(
            us.l3.as_ref(),
            Some(l3),
            "{name}: L3 groups (which CPUs share one)"
        );
    }
    if let Some(l2) = &up.l2 {
        assert_eq!(
            us.l2.as_ref(),
            Some(l2),
            "{name}: L2 groups (which CPUs share one)"
        );
    }
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
    }
}
