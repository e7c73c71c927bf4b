//! The planner on parts whose L3 groups differ in size within a package (AMD's
//! dual-CCD X3D: 96 MiB of L3 with 3D V-Cache on one CCD, 32 MiB on the
//! other): a VM that fits gets the V-cache CCD and the host's housekeeping
//! (emulator, I/O threads, the host's own tasks) moves to the other CCD, even
//! though CPU 0 is on the V-cache one. Equal L3s (V-Cache on both CCDs, or on
//! none) and a single L3 plan exactly as before.
//!
//! The 7950X3D tree is built from published facts (its SOURCE.txt says which);
//! the other shapes are rewrites of a copy of it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::{tree, upstream};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;
use vfio_assistant::host::scan;
use vfio_assistant::host::topology::Topology;
use vfio_assistant::parse::cpulist::parse_cpulist;
use vfio_assistant::pinning::{PinPlan, PinRequest, Pinning, plan, validate};
use vfio_assistant::sysroot::HostRoot;

const X3D: &str = "published-amd-ryzen9-7950x3d";
/// CCD0, with the 3D V-Cache, and CCD1 of the 7950X3D tree.
const VCACHE_CCD: &str = "0-7,16-23";
const OTHER_CCD: &str = "8-15,24-31";

fn cpus(list: &str) -> BTreeSet<u32> {
    parse_cpulist(list).unwrap()
}

fn topo_at(root: &Path) -> Topology {
    scan(&HostRoot::at(root)).unwrap().topology
}

fn x3d() -> Topology {
    topo_at(&upstream::fixture(X3D))
}

/// The 7950X3D tree copied and rewritten: each CCD's L3 size in KiB (None
/// keeps it) and CPUs taken offline.
fn variant(ccd0_kib: Option<u64>, ccd1_kib: Option<u64>, offline: &str) -> Topology {
    let copy = tree::copy_cpu_part(&upstream::fixture(X3D));
    let base = copy.path().join("sys/devices/system/cpu");
    for (ccd, kib) in [(VCACHE_CCD, ccd0_kib), (OTHER_CCD, ccd1_kib)] {
        if let Some(kib) = kib {
            for c in cpus(ccd) {
                fs::write(
                    base.join(format!("cpu{c}/cache/index3/size")),
                    format!("{kib}K\n"),
                )
                .unwrap();
            }
        }
    }
    let gone = if offline.is_empty() {
        BTreeSet::new()
    } else {
        cpus(offline)
    };
    let online: Vec<String> = (0..32)
        .filter(|c| !gone.contains(c))
        .map(|c| c.to_string())
        .collect();
    fs::write(base.join("online"), online.join(",") + "\n").unwrap();
    topo_at(copy.path())
}

fn plan_for(t: &Topology, vcpus: usize) -> PinPlan {
    plan(
        t,
        &PinRequest {
            vcpus,
            amd: true,
            ..PinRequest::default()
        },
    )
    .unwrap_or_else(|e| panic!("{vcpus} vCPUs: {e}"))
}

fn vm(p: &PinPlan) -> BTreeSet<u32> {
    p.vcpupin.iter().map(|(_, c)| *c).collect()
}

fn set(v: &[u32]) -> BTreeSet<u32> {
    v.iter().copied().collect()
}

#[test]
fn the_tree_has_one_96_mib_and_one_32_mib_l3() {
    let t = x3d();
    let l3: Vec<(BTreeSet<u32>, Option<u64>)> = t
        .l3_groups
        .iter()
        .map(|g| (set(&g.cpus), g.size_kib))
        .collect();
    assert_eq!(
        l3,
        vec![
            (cpus(VCACHE_CCD), Some(96 * 1024)),
            (cpus(OTHER_CCD), Some(32 * 1024))
        ]
    );
    assert_eq!((t.summary.cores, t.summary.threads_per_core), (16, 2));
}

#[test]
fn sixteen_vcpus_get_the_whole_vcache_ccd_and_the_host_keeps_the_other() {
    let t = x3d();
    let p = plan_for(&t, 16);
    assert_eq!(vm(&p), cpus(VCACHE_CCD), "{:?}", p.vcpupin);
    let other = cpus(OTHER_CCD);
    assert!(
        !p.emulatorpin.is_empty() && p.emulatorpin.iter().all(|c| other.contains(c)),
        "emulator on {:?}",
        p.emulatorpin
    );
    assert_eq!(p.iothreadpin, p.emulatorpin);
    assert_eq!(set(&p.housekeeping_cpus), other);
    assert_eq!(p.kernel.nohz_full, VCACHE_CCD);
    assert_eq!(p.kernel.irqaffinity, OTHER_CCD);
    assert_eq!((p.guest.cores, p.guest.threads), (8, 2));
    // Guest cores stay on host cores: vCPUs 2k and 2k+1 are siblings.
    for k in (0..16).step_by(2) {
        let (a, b) = (p.vcpupin[k].1, p.vcpupin[k + 1].1);
        assert_eq!(t.cpu(a).unwrap().core, t.cpu(b).unwrap().core, "{k}");
    }
    // The plan says why, with the numbers it rests on.
    let why = p.reasons.join("\n");
    for words in ["96 MiB", "32 MiB", "3D V-Cache", "CPU 0"] {
        assert!(why.contains(words), "no {words:?} in:\n{why}");
    }
    // CPU 0 with the VM is the point here, not a mistake to flag.
    assert_eq!(validate(&t, &p.pinning()), Vec::new());
}

#[test]
fn smaller_vms_stay_on_the_vcache_ccd_with_the_emulator_off_it() {
    let t = x3d();
    let (vcache, other) = (cpus(VCACHE_CCD), cpus(OTHER_CCD));
    for n in 1..=16 {
        let p = plan_for(&t, n);
        assert!(vm(&p).is_subset(&vcache), "{n}: {:?}", p.vcpupin);
        assert!(
            p.emulatorpin.iter().all(|c| other.contains(c)),
            "{n}: emulator on {:?}",
            p.emulatorpin
        );
        // CPU 0 joins the VM only when the VM needs every V-cache core.
        if n <= 14 {
            assert!(
                !p.kernel.nohz_full.is_empty() && !cpus(&p.kernel.nohz_full).contains(&0),
                "{n}: {}",
                p.kernel.nohz_full
            );
        }
    }
    let p = plan_for(&t, 8);
    assert_eq!(vm(&p), cpus("1-4,17-20"), "{:?}", p.vcpupin);
    assert_eq!(validate(&t, &p.pinning()), Vec::new());
}

#[test]
fn a_vm_larger_than_the_vcache_ccd_plans_as_before() {
    // 17 and more do not fit one CCD: core 0 stays the host's, the V-cache
    // CCD is filled first.
    let t = x3d();
    for n in 17..=30 {
        let p = plan_for(&t, n);
        assert_eq!(p.emulatorpin, vec![0, 16], "{n}");
    }
    let p = plan_for(&t, 20);
    let on_vcache = vm(&p).intersection(&cpus(VCACHE_CCD)).count();
    assert_eq!(on_vcache, 14, "{:?}", p.vcpupin);
}

#[test]
fn a_reserve_given_by_hand_still_wins() {
    let t = x3d();
    let p = plan(
        &t,
        &PinRequest {
            vcpus: 8,
            reserve: Some(set(&[0])),
            ..PinRequest::default()
        },
    )
    .unwrap();
    assert_eq!(p.emulatorpin, vec![0, 16]);
    assert!(vm(&p).is_subset(&cpus(VCACHE_CCD)), "{:?}", p.vcpupin);
}

#[test]
fn a_7900x3d_shape_gives_the_vm_its_six_vcache_cores() {
    // Cores 6-7 and 14-15 offline: 6 cores with the 96 MiB L3, 6 with 32 MiB.
    let t = variant(None, None, "6-7,14-15,22-23,30-31");
    assert_eq!(t.summary.cores, 12);
    let p = plan_for(&t, 12);
    assert_eq!(vm(&p), cpus("0-5,16-21"), "{:?}", p.vcpupin);
    let other = cpus("8-13,24-29");
    assert!(
        p.emulatorpin.iter().all(|c| other.contains(c)),
        "emulator on {:?}",
        p.emulatorpin
    );
    assert_eq!(set(&p.housekeeping_cpus), other);
}

#[test]
fn vcache_on_both_ccds_plans_like_a_plain_dual_ccd_part() {
    // Both 96 MiB (V-Cache on both CCDs) and both 32 MiB (a plain 7950X):
    // nothing to prefer by cache, so the same pins for every size, core 0 for
    // the host, and no word about a bigger cache.
    let both = variant(Some(96 * 1024), Some(96 * 1024), "");
    let plain = variant(Some(32 * 1024), Some(32 * 1024), "");
    for n in 1..=30 {
        let (a, b) = (plan_for(&both, n), plan_for(&plain, n));
        assert_eq!(a.vcpupin, b.vcpupin, "{n}");
        assert_eq!(a.emulatorpin, vec![0, 16], "{n}");
        assert_eq!(a.emulatorpin, b.emulatorpin, "{n}");
        assert_eq!(a.housekeeping_cpus, b.housekeeping_cpus, "{n}");
        assert!(
            !a.reasons.iter().any(|r| r.contains("V-Cache")),
            "{n}: {:?}",
            a.reasons
        );
    }
    // 16 vCPUs: the CCD without core 0 holds them all.
    assert_eq!(vm(&plan_for(&both, 16)), cpus(OTHER_CCD));
}

#[test]
fn a_single_ccd_x3d_plans_as_before() {
    // CCD1 offline: one 96 MiB L3 (a 7800X3D / 9800X3D shape), the same plan
    // as with a 32 MiB one.
    let x3d = variant(None, None, OTHER_CCD);
    let plain = variant(Some(32 * 1024), None, OTHER_CCD);
    assert_eq!(x3d.l3_groups.len(), 1);
    for n in 1..=14 {
        let (a, b) = (plan_for(&x3d, n), plan_for(&plain, n));
        assert_eq!(a.vcpupin, b.vcpupin, "{n}");
        assert_eq!(a.emulatorpin, vec![0, 16], "{n}");
        assert!(!a.reasons.iter().any(|r| r.contains("V-Cache")), "{n}");
    }
}

#[test]
fn an_unreadable_l3_size_prefers_nothing() {
    // No guess from the one size that is there: the plan of old, core 0 for
    // the host.
    let copy = tree::copy_cpu_part(&upstream::fixture(X3D));
    for c in cpus(OTHER_CCD) {
        fs::remove_file(
            copy.path()
                .join(format!("sys/devices/system/cpu/cpu{c}/cache/index3/size")),
        )
        .unwrap();
    }
    let t = topo_at(copy.path());
    assert_eq!(t.l3_groups[1].size_kib, None);
    for n in [8, 16] {
        let p = plan_for(&t, n);
        assert_eq!(p.emulatorpin, vec![0, 16], "{n}");
        assert!(!p.reasons.iter().any(|r| r.contains("V-Cache")), "{n}");
    }
}

fn pinning(vcpus: &[u32], emulator: &[u32]) -> Pinning {
    Pinning {
        vcpus: vcpus
            .iter()
            .enumerate()
            .map(|(v, c)| (v as u32, set(&[*c])))
            .collect(),
        emulator: set(emulator),
        guest: None,
    }
}

#[test]
fn cpu0_in_the_vm_is_flagged_unless_the_host_moved_off_the_vcache_ccd() {
    let kinds = |t: &Topology, p: &Pinning| -> BTreeSet<String> {
        validate(t, p).into_iter().map(|x| x.kind).collect()
    };
    let whole_ccd: Vec<u32> = cpus(VCACHE_CCD).into_iter().collect();
    // The V-cache CCD whole, the emulator on the other CCD: what the planner does.
    let k = kinds(&x3d(), &pinning(&whole_ccd, &[8, 24]));
    assert!(!k.contains("cpu0"), "{k:?}");
    // The emulator left on the V-cache CCD: CPU 0 should have stayed the host's.
    let k = kinds(&x3d(), &pinning(&[0, 16, 1, 17], &[7, 23]));
    assert!(k.contains("cpu0"), "{k:?}");
    // Equal L3s: CPU 0 is the host's, as everywhere.
    let plain = variant(Some(32 * 1024), Some(32 * 1024), "");
    let k = kinds(&plain, &pinning(&whole_ccd, &[8, 24]));
    assert!(k.contains("cpu0"), "{k:?}");
}

#[test]
fn pin_on_the_command_line_says_why() {
    let root = upstream::fixture(X3D);
    let run = |vcpus: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
            .args(["pin", "--root", root.to_str().unwrap(), "--vcpus", vcpus])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let out = run("16");
    assert!(out.contains("emulator and iothread: CPUs 8,24"), "{out}");
    assert!(
        out.contains("96 MiB") && out.contains("3D V-Cache"),
        "{out}"
    );
    assert!(!out.contains("check: vCPU on CPU 0"), "{out}");
    assert!(out.contains("irqaffinity=8-15,24-31"), "{out}");
    let out = run("8");
    assert!(out.contains("emulator and iothread: CPUs 8,24"), "{out}");
    assert!(out.contains("nohz_full=1-4,17-20"), "{out}");
}
