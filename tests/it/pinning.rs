//! The pinning planner on every real topology, for every vCPU count from 1 to
//! all free threads: invariants checked by the test, not hand-picked outputs.
//! And the validator on pinnings users get wrong.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::host::topology::Topology;
use vfio_assistant::pinning::model::GuestTopology;
use vfio_assistant::pinning::{PinRequest, Pinning, PlanError, plan, validate};
use vfio_assistant::sysroot::HostRoot;

fn topologies() -> Vec<(String, Topology)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology");
    let mut out: Vec<(String, Topology)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                scan(&HostRoot::at(&p)).unwrap().topology,
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn core_of(t: &Topology, cpu: u32) -> usize {
    t.cpu(cpu).unwrap().core.unwrap()
}

/// On a CPU of one kind whose package has L3 groups of unequal size (X3D):
/// the biggest group and its threads.
fn biggest_of_unequal_l3s(t: &Topology) -> Option<(usize, usize)> {
    if t.summary.hybrid {
        return None;
    }
    let package = |g: usize| t.cpu(t.l3_groups[g].cpus[0]).unwrap().package_id;
    let (big, size) = (0..t.l3_groups.len())
        .filter_map(|g| Some((g, t.l3_groups[g].size_kib?)))
        .max_by_key(|(g, size)| (*size, std::cmp::Reverse(*g)))?;
    let unequal = (0..t.l3_groups.len())
        .any(|g| package(g) == package(big) && t.l3_groups[g].size_kib.is_some_and(|s| s < size));
    let threads = t
        .cores
        .iter()
        .filter(|c| c.l3_group == Some(big))
        .map(|c| c.cpus.len())
        .sum();
    unequal.then_some((big, threads))
}

#[test]
fn plans_keep_the_invariants_on_every_topology_and_size() {
    let mut plans = 0;
    for (name, t) in topologies() {
        let core0: BTreeSet<u32> = t
            .cores
            .iter()
            .find(|c| c.cpus.contains(&0))
            .or(t.cores.first())
            .unwrap()
            .cpus
            .iter()
            .copied()
            .collect();
        let free_threads: usize = t
            .cores
            .iter()
            .filter(|c| !c.cpus.iter().any(|x| core0.contains(x)))
            .map(|c| c.cpus.len())
            .sum();
        // Largest free threads of one L3 group / NUMA node, to know when the request fits.
        let mut by_l3: BTreeMap<(Option<u32>, Option<usize>), usize> = BTreeMap::new();
        let mut by_node: BTreeMap<Option<u32>, usize> = BTreeMap::new();
        let best_kind = t
            .cores
            .iter()
            .filter_map(|c| c.kind)
            .map(|k| t.core_kinds[k].efficiency)
            .max();
        for c in t
            .cores
            .iter()
            .filter(|c| !c.cpus.iter().any(|x| core0.contains(x)))
        {
            *by_l3.entry((c.numa_node, c.l3_group)).or_default() += c.cpus.len();
            *by_node.entry(c.numa_node).or_default() += c.cpus.len();
        }
        let fast_threads: usize = t
            .cores
            .iter()
            .filter(|c| !c.cpus.iter().any(|x| core0.contains(x)))
            .filter(|c| {
                best_kind.is_none() || c.kind.map(|k| t.core_kinds[k].efficiency) == best_kind
            })
            .map(|c| c.cpus.len())
            .sum();
        // Free threads per kind (by efficiency rank).
        let mut free_by_kind: BTreeMap<u8, usize> = BTreeMap::new();
        for c in t
            .cores
            .iter()
            .filter(|c| !c.cpus.iter().any(|x| core0.contains(x)))
        {
            if let Some(k) = c.kind {
                *free_by_kind.entry(t.core_kinds[k].efficiency).or_default() += c.cpus.len();
            }
        }
        for n in 1..=free_threads {
            let req = PinRequest {
                vcpus: n,
                ..PinRequest::default()
            };
            let p = plan(&t, &req).unwrap_or_else(|e| panic!("{name} {n}: {e}"));
            plans += 1;
            let ctx = format!("{name}, {n} vCPUs");
            // Every vCPU on exactly one online CPU, no CPU twice.
            assert_eq!(p.vcpupin.len(), n, "{ctx}");
            let cpus: BTreeSet<u32> = p.vcpupin.iter().map(|(_, c)| *c).collect();
            assert_eq!(cpus.len(), n, "{ctx}: a CPU used twice");
            assert!(
                cpus.iter().all(|c| t.cpu(*c).is_some_and(|x| x.online)),
                "{ctx}: offline CPU"
            );
            // The host's core: core 0's; on unequal L3s (X3D) a whole core off
            // the biggest group when the VM fits in that group, which it gets.
            let host_core: BTreeSet<u32> = match biggest_of_unequal_l3s(&t) {
                Some((big, threads)) if n <= threads => {
                    let first = *p.emulatorpin.first().expect("an emulator CPU");
                    let core = &t.cores[core_of(&t, first)];
                    assert_ne!(core.l3_group, Some(big), "{ctx}: host on the big L3");
                    assert!(
                        cpus.iter()
                            .all(|c| t.cpu(*c).unwrap().l3_group == Some(big)),
                        "{ctx}: vCPUs off the biggest L3"
                    );
                    core.cpus.iter().copied().collect()
                }
                _ => core0.clone(),
            };
            // Housekeeping untouched; emulator there; no core split with the host.
            assert!(
                cpus.is_disjoint(&host_core),
                "{ctx}: vCPU on the housekeeping core"
            );
            assert!(
                p.emulatorpin.iter().all(|c| host_core.contains(c)),
                "{ctx}: emulator off housekeeping"
            );
            let vm_cores: BTreeSet<usize> = cpus.iter().map(|c| core_of(&t, *c)).collect();
            let hk: BTreeSet<u32> = p.housekeeping_cpus.iter().copied().collect();
            for k in &vm_cores {
                assert!(
                    t.cores[*k].cpus.iter().all(|c| !hk.contains(c)),
                    "{ctx}: core {k} split between host and VM"
                );
            }
            // Sibling pairs: vCPU 2k and 2k+1 on one host core when the guest has threads=2.
            if p.guest.threads == 2 {
                for k in (0..n as u32).step_by(2) {
                    let a = p.vcpupin[k as usize].1;
                    let b = p.vcpupin[k as usize + 1].1;
                    assert_eq!(
                        core_of(&t, a),
                        core_of(&t, b),
                        "{ctx}: guest core {} split",
                        k / 2
                    );
                }
            }
            assert_eq!(
                p.guest.sockets * p.guest.cores * p.guest.threads,
                n as u32,
                "{ctx}: guest topology"
            );
            // Cache and NUMA locality whenever the request fits.
            let l3s: BTreeSet<(Option<u32>, Option<usize>)> = cpus
                .iter()
                .map(|c| {
                    let x = t.cpu(*c).unwrap();
                    (x.numa_node, x.l3_group)
                })
                .collect();
            let nodes: BTreeSet<Option<u32>> =
                cpus.iter().map(|c| t.cpu(*c).unwrap().numa_node).collect();
            let fits_kind = best_kind.is_none() || n <= fast_threads;
            if fits_kind && by_l3.values().any(|v| *v >= n) && best_kind.is_none() {
                assert_eq!(l3s.len(), 1, "{ctx}: fits one L3 group but spans {l3s:?}");
            }
            if fits_kind && by_node.values().any(|v| *v >= n) && best_kind.is_none() {
                assert_eq!(
                    nodes.len(),
                    1,
                    "{ctx}: fits one NUMA node but spans {nodes:?}"
                );
            }
            // Hybrid: the fastest kind first.
            if let Some(best) = best_kind
                && n <= fast_threads
            {
                assert!(
                    cpus.iter().all(|c| t.cores[core_of(&t, *c)]
                        .kind
                        .map(|k| t.core_kinds[k].efficiency)
                        == Some(best)),
                    "{ctx}: E-core used although P-cores suffice"
                );
            }
            // Hybrid, the fastest kind too small: the fastest kind that holds
            // the request alone, never a mix of kinds.
            let holding = free_by_kind
                .iter()
                .filter(|(_, threads)| **threads >= n)
                .map(|(k, _)| *k)
                .max();
            if let (Some(best), Some(kind)) = (best_kind, holding)
                && n > fast_threads
            {
                assert!(kind < best);
                let used: BTreeSet<Option<u8>> = cpus
                    .iter()
                    .map(|c| {
                        t.cores[core_of(&t, *c)]
                            .kind
                            .map(|k| t.core_kinds[k].efficiency)
                    })
                    .collect();
                assert_eq!(
                    used,
                    BTreeSet::from([Some(kind)]),
                    "{ctx}: kind {kind} holds {n} vCPUs alone"
                );
            }
            // The kernel line names exactly the VM cores.
            let vm_core_cpus: BTreeSet<u32> = vm_cores
                .iter()
                .flat_map(|k| t.cores[*k].cpus.iter().copied())
                .collect();
            let listed =
                vfio_assistant::parse::cpulist::parse_cpulist(&p.kernel.nohz_full).unwrap();
            assert_eq!(listed, vm_core_cpus, "{ctx}: nohz_full");
            assert!(p.kernel.isolcpus.ends_with(&p.kernel.nohz_full));
            // The planner's own output passes the validator without errors.
            let problems = validate(&t, &p.pinning());
            let packed = p
                .warnings
                .iter()
                .any(|w| w.contains("some vCPUs share a core"));
            assert!(
                problems.iter().all(|x| !matches!(
                    x.kind.as_str(),
                    "shared_cpu" | "offline_cpu" | "topology_lies" | "cpu0"
                ) && (packed || x.kind != "split_siblings")),
                "{ctx}: {problems:#?}"
            );
            assert!(!p.reasons.is_empty(), "{ctx}: no reasons");
        }
        // One more than fits is a clear error, not a panic.
        match plan(
            &t,
            &PinRequest {
                vcpus: free_threads + 1,
                ..PinRequest::default()
            },
        ) {
            Err(PlanError::TooMany {
                asked, available, ..
            }) => assert_eq!((asked, available), (free_threads + 1, free_threads)),
            other => panic!("{name}: expected TooMany, got {other:?}"),
        }
    }
    assert!(plans > 300, "only {plans} plans checked");
}

fn topo(name: &str) -> Topology {
    scan(&HostRoot::at(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/topology")
            .join(name),
    ))
    .unwrap()
    .topology
}

#[test]
fn the_gpu_numa_node_is_preferred_and_reserve_is_widened_to_cores() {
    let t = topo("hwloc-32intel64-2p8co2t+8ve");
    let p = plan(
        &t,
        &PinRequest {
            vcpus: 8,
            gpu_numa_node: Some(1),
            ..PinRequest::default()
        },
    )
    .unwrap();
    assert!(
        p.vcpupin
            .iter()
            .all(|(_, c)| t.cpu(*c).unwrap().numa_node == Some(1)),
        "{:?}",
        p.vcpupin
    );
    assert_eq!(p.numa_nodes, vec![1]);
    // Reserving CPU 3 reserves its sibling 19 too.
    let p = plan(
        &t,
        &PinRequest {
            vcpus: 4,
            reserve: Some([0, 3].into_iter().collect()),
            ..PinRequest::default()
        },
    )
    .unwrap();
    assert!(p.emulatorpin.contains(&19) && p.emulatorpin.contains(&16));
    assert!(p.vcpupin.iter().all(|(_, c)| ![0, 16, 3, 19].contains(c)));
}

#[test]
fn amd_smt_gets_topoext_and_odd_counts_warn() {
    let t = topo("ghw-amd-ryzen5-1600");
    let p = plan(
        &t,
        &PinRequest {
            vcpus: 4,
            amd: true,
            ..PinRequest::default()
        },
    )
    .unwrap();
    assert!(p.topoext);
    assert!(
        p.to_xml()
            .contains("<feature policy='require' name='topoext'/>")
    );
    assert!(
        p.to_xml()
            .contains("<topology sockets='1' dies='1' cores='2' threads='2'/>")
    );
    // AMD numbers siblings N and N+6 on this Ryzen: vCPUs 0/1 land on 1 and 7.
    assert_eq!(&p.vcpupin[..2], &[(0, 1), (1, 7)]);
    let p = plan(
        &t,
        &PinRequest {
            vcpus: 3,
            amd: true,
            ..PinRequest::default()
        },
    )
    .unwrap();
    assert_eq!(p.guest.threads, 1);
    assert!(p.warnings.iter().any(|w| w.contains("multiple of 2")));
    // Three vCPUs, three cores: one thread each, siblings idle, honest topology.
    let cores: BTreeSet<usize> = p.vcpupin.iter().map(|(_, c)| core_of(&t, *c)).collect();
    assert_eq!(cores.len(), 3);
}

fn pinning(pairs: &[(u32, u32)], emulator: &[u32], threads: u32) -> Pinning {
    Pinning {
        vcpus: pairs
            .iter()
            .map(|(v, c)| (*v, [*c].into_iter().collect()))
            .collect(),
        emulator: emulator.iter().copied().collect(),
        guest: Some(GuestTopology {
            sockets: 1,
            dies: 1,
            cores: pairs.len() as u32 / threads,
            threads,
        }),
    }
}

#[test]
fn the_validator_names_what_users_get_wrong() {
    let t = topo("ghw-amd-ryzen5-1600"); // siblings N and N+6; CCX 0-2,6-8 and 3-5,9-11
    let kinds = |p: &Pinning| {
        validate(&t, p)
            .into_iter()
            .map(|x| x.kind)
            .collect::<BTreeSet<String>>()
    };
    // Intel-style "0 and 6" guide copied to... this AMD chip happens to pair N/N+6, but
    // pairing 1/2 (two different cores) as one guest core lies about threads.
    let k = kinds(&pinning(&[(0, 1), (1, 2), (2, 7), (3, 8)], &[0], 2));
    assert!(k.contains("topology_lies"), "{k:?}");
    assert!(k.contains("split_siblings"), "{k:?}");
    let k = kinds(&pinning(&[(0, 0), (1, 6)], &[0], 2));
    assert!(
        k.contains("cpu0") && k.contains("emulator_overlap"),
        "{k:?}"
    );
    let k = kinds(&pinning(&[(0, 2), (1, 2)], &[0], 1));
    assert!(k.contains("shared_cpu"), "{k:?}");
    let k = kinds(&pinning(&[(0, 2), (1, 8), (2, 3), (3, 9)], &[0], 2));
    assert!(k.contains("crosses_l3"), "{k:?}");
    let k = kinds(&pinning(&[(0, 2), (1, 99)], &[0], 1));
    assert!(k.contains("offline_cpu"), "{k:?}");
    let t = topo("hwloc-32intel64-2p8co2t+8ve");
    let problems = validate(&t, &pinning(&[(0, 1), (1, 17), (2, 9), (3, 25)], &[0], 2));
    assert!(problems.iter().any(|x| x.kind == "crosses_numa"));
    // A good pinning has nothing to say.
    let t = topo("ghw-amd-ryzen5-1600");
    assert!(validate(&t, &pinning(&[(0, 1), (1, 7), (2, 2), (3, 8)], &[0, 6], 2)).is_empty());
}
