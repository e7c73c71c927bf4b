//! The planner on real hybrid CPUs: vCPUs go to the big cores of a cluster
//! that has enough of them, even where one core type spans several
//! `cpu_capacity` values (NVIDIA GB10) or the fastest kind has a single core
//! (the phone SoC's Cortex-X3); and the plan names the core type it chose.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::{tree, upstream};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use upstream::{expected, fixture, lstopo_xml};
use vfio_assistant::host::scan;
use vfio_assistant::host::topology::Topology;
use vfio_assistant::pinning::{PinPlan, PinRequest, plan};
use vfio_assistant::sysroot::HostRoot;

fn topo_at(root: &Path) -> Topology {
    scan(&HostRoot::at(root)).unwrap().topology
}

fn plan_for(t: &Topology, vcpus: usize) -> PinPlan {
    plan(
        t,
        &PinRequest {
            vcpus,
            ..PinRequest::default()
        },
    )
    .unwrap_or_else(|e| panic!("{vcpus} vCPUs: {e}"))
}

/// The name of the core type each vCPU runs on.
fn kinds_used(t: &Topology, p: &PinPlan) -> BTreeSet<String> {
    p.vcpupin
        .iter()
        .map(|(_, c)| {
            let core = t.cpu(*c).unwrap().core.unwrap();
            let k = t.cores[core].kind.unwrap();
            t.core_kinds[k].name.clone()
        })
        .collect()
}

fn l3_groups_used(t: &Topology, p: &PinPlan) -> BTreeSet<Option<usize>> {
    p.vcpupin
        .iter()
        .map(|(_, c)| t.cpu(*c).unwrap().l3_group)
        .collect()
}

/// GB10 from hwloc's tree, and the same tree with the CPU parts taken out of
/// /proc/cpuinfo (a kernel or VM that hides MIDR): then only `cpu_capacity`
/// tells the kinds apart.
fn gb10_both_ways() -> Vec<(String, Topology)> {
    let root = fixture("hwloc-nvidia-dgx-gb10");
    let copy = tree::copy_cpu_part(&root);
    let cpuinfo = copy.path().join("proc/cpuinfo");
    let text = fs::read_to_string(&cpuinfo).unwrap();
    assert!(text.contains("CPU part"));
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("CPU part"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&cpuinfo, without).unwrap();
    assert!(
        tree::files(copy.path())
            .iter()
            .all(|f| !f.ends_with("midr_el1")),
        "the capacity-only copy must not have MIDR registers"
    );
    vec![
        ("by CPU part".to_string(), topo_at(&root)),
        ("by cpu_capacity".to_string(), topo_at(copy.path())),
    ]
}

#[test]
fn gb10_kinds_are_two_core_types_either_way() {
    // hwloc's expected output (MIDR) has two kinds; hwloc without MIDR has
    // five (one per capacity value). Ours are the two, by part or by capacity.
    let up = lstopo_xml(&expected("hwloc-nvidia-dgx-gb10", "gb10.xml").unwrap());
    let nomidr = lstopo_xml(&expected("hwloc-nvidia-dgx-gb10", "nomidr.xml").unwrap());
    let ranks = |k: &std::collections::BTreeMap<Vec<u32>, u8>| {
        k.values().copied().collect::<BTreeSet<u8>>().len()
    };
    assert_eq!((ranks(&up.kinds), ranks(&nomidr.kinds)), (2, 5));
    for (how, t) in gb10_both_ways() {
        let ours: std::collections::BTreeMap<Vec<u32>, u8> = t
            .cores
            .iter()
            .map(|c| (c.cpus.clone(), t.core_kinds[c.kind.unwrap()].efficiency))
            .collect();
        assert_eq!(ours, up.kinds, "GB10 {how}: kinds as hwloc's MIDR kinds");
    }
}

#[test]
fn gb10_vcpus_go_to_the_big_cores_of_one_cluster() {
    for (how, t) in gb10_both_ways() {
        let big = t.core_kinds.last().unwrap();
        for n in 1..=10 {
            let p = plan_for(&t, n);
            let ctx = format!("GB10 {how}, {n} vCPUs: {:?}", p.vcpupin);
            let used = kinds_used(&t, &p);
            assert_eq!(used, BTreeSet::from([big.name.clone()]), "{ctx}");
            // Five big cores per cluster: up to five vCPUs share one L3, and
            // the cluster with the higher capacity (cpus 15-19) comes first.
            if n <= 5 {
                assert_eq!(l3_groups_used(&t, &p).len(), 1, "{ctx}");
                assert!(
                    p.vcpupin.iter().all(|(_, c)| (15..=19).contains(c)),
                    "{ctx}"
                );
            }
        }
        // Within the kind the highest capacity first: cpu19 (1024).
        assert_eq!(plan_for(&t, 1).vcpupin, vec![(0, 19)], "GB10 {how}");
        // More than the big cores hold: every big core, then the small ones.
        let p = plan_for(&t, 12);
        let big_cpus: BTreeSet<u32> = big.cpus.iter().copied().collect();
        let on_big = p
            .vcpupin
            .iter()
            .filter(|(_, c)| big_cpus.contains(c))
            .count();
        assert_eq!(on_big, 10, "GB10 {how}: {:?}", p.vcpupin);
        assert!(p.warnings.iter().any(|w| w.contains("one kind of core")));
    }
}

#[test]
fn gb10_plan_names_the_core_type() {
    let t = topo_at(&fixture("hwloc-nvidia-dgx-gb10"));
    let p = plan_for(&t, 4);
    assert!(
        p.reasons
            .iter()
            .any(|r| r.starts_with("Only Cortex-X925 cores are used")),
        "{:#?}",
        p.reasons
    );
}

#[test]
fn phone_soc_skips_the_lone_x3_for_a_kind_that_holds_the_vcpus() {
    // Cortex-X3 has one core (cpu7); two vCPUs go on one of the 855-capacity
    // kinds (A710 or A715), never on the Cortex-A510 LITTLE cores.
    let t = topo_at(&fixture("utillinux-arm-A510-A710-A715-X3"));
    let p = plan_for(&t, 2);
    let used = kinds_used(&t, &p);
    assert_eq!(used.len(), 1, "{:?}", p.vcpupin);
    let kind = used.into_iter().next().unwrap();
    assert!(kind == "Cortex-A715" || kind == "Cortex-A710", "{kind}");
    assert!(
        p.reasons
            .iter()
            .any(|r| r.starts_with("The Cortex-X3 cores have only 1 free thread,")),
        "{:#?}",
        p.reasons
    );
    // One vCPU: the X3 itself.
    assert_eq!(plan_for(&t, 1).vcpupin, vec![(0, 7)]);
}
