//! The CPU idle-state checks each way: a host whose deep C-states are
//! slow to leave, one that keeps the VM's CPUs shallow, and a real KVM
//! guest's states.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::checks_each_way::{SKYLAKE_STATES, expect, find, findings};
use crate::support::hosts::{good_host, put};
use std::fs;
use std::path::Path;
use vfio_assistant::checks::model::Status;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

fn idle_states(root: &Path, driver: &str, states: &[(&str, u64)], off_from: usize) {
    put(
        root,
        "sys/devices/system/cpu/cpuidle/current_driver",
        &format!("{driver}\n"),
    );
    put(
        root,
        "sys/devices/system/cpu/cpuidle/current_governor",
        "menu\n",
    );
    for cpu in 0..12 {
        for (k, (name, lat)) in states.iter().enumerate() {
            let d = format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state{k}");
            put(root, &format!("{d}/name"), &format!("{name}\n"));
            put(root, &format!("{d}/latency"), &format!("{lat}\n"));
            put(
                root,
                &format!("{d}/disable"),
                if k >= off_from { "1\n" } else { "0\n" },
            );
        }
    }
}

#[test]
fn cpu_idle_states_each_way() {
    let dir = good_host();
    let r = dir.path();
    // No cpuidle at all (the fixture host): nothing said.
    assert!(find(&findings(r, None), "cpu.idle_states", None).is_none());
    // Every Skylake state on: deep states, a suggestion with how to measure.
    idle_states(r, "intel_idle", SKYLAKE_STATES, usize::MAX);
    let f = findings(r, None);
    expect(&f, "cpu.idle_states", None, Status::Info, "--compare-idle");
    let x = find(&f, "cpu.idle_states", None).unwrap();
    assert!(x.title.contains("C8 takes up to 200 µs"), "{}", x.title);
    assert!(
        x.evidence
            .iter()
            .any(|e| e.value == "intel_idle (governor menu)")
    );
    assert!(
        x.evidence
            .iter()
            .any(|e| e.value == "deepest allowed: CPUs 0-11: C8 (200 µs)")
    );
    // C3 and deeper turned off everywhere: C1E is the deepest, shallow enough.
    idle_states(r, "intel_idle", SKYLAKE_STATES, 3);
    put(
        r,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz ro amd_iommu=on iommu=pt intel_idle.max_cstate=2\n",
    );
    let f = findings(r, None);
    expect(&f, "cpu.idle_states", None, Status::Pass, "");
    let x = find(&f, "cpu.idle_states", None).unwrap();
    assert!(x.title.contains("C1E, wakes in 10 µs"), "{}", x.title);
    assert!(
        x.evidence
            .iter()
            .any(|e| e.value == "intel_idle.max_cstate=2")
    );
    // Turned off on the VM's CPUs only (what a libvirt hook does): judged on
    // those once they are isolated, on every CPU otherwise.
    idle_states(r, "intel_idle", SKYLAKE_STATES, usize::MAX);
    for cpu in 2..6 {
        for k in 3..SKYLAKE_STATES.len() {
            put(
                r,
                &format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state{k}/disable"),
                "1\n",
            );
        }
    }
    let f = findings(r, None);
    let x = find(&f, "cpu.idle_states", None).unwrap();
    assert_eq!(x.status, Status::Info, "CPUs 0-1 and 6-11 still go deep");
    assert!(
        x.evidence.iter().any(
            |e| e.value == "deepest allowed: CPUs 2-5: C1E (10 µs); CPUs 0-1,6-11: C8 (200 µs)"
        ),
        "{:#?}",
        x.evidence
    );
    put(r, "sys/devices/system/cpu/isolated", "2-5\n");
    let f = findings(r, None);
    let x = find(&f, "cpu.idle_states", None).unwrap();
    assert_eq!(x.status, Status::Pass, "{}", x.title);
    assert!(
        x.title.contains("the isolated CPUs may use, C1E"),
        "{}",
        x.title
    );
    fs::remove_file(r.join("sys/devices/system/cpu/isolated")).unwrap();
    // A program holding /dev/cpu_dma_latency at 10 µs (tuned's
    // latency-performance does the like): every CPU is kept shallow.
    put(r, "dev/cpu_dma_latency", "");
    fs::write(r.join("dev/cpu_dma_latency"), 10i32.to_ne_bytes()).unwrap();
    let f = findings(r, None);
    let x = find(&f, "cpu.idle_states", None).unwrap();
    assert_eq!(x.status, Status::Pass, "{}", x.title);
    assert!(
        x.evidence
            .iter()
            .any(|e| e.source == "/dev/cpu_dma_latency" && e.value.starts_with("10 µs"))
    );
    // A capture's empty placeholder: no limit known, the table decides.
    fs::write(r.join("dev/cpu_dma_latency"), b"").unwrap();
    assert_eq!(
        find(&findings(r, None), "cpu.idle_states", None)
            .unwrap()
            .status,
        Status::Info
    );
    // A state with a garbage latency is skipped, not a crash.
    idle_states(r, "intel_idle", SKYLAKE_STATES, 3);
    put(
        r,
        "sys/devices/system/cpu/cpu0/cpuidle/state2/latency",
        "ten\n",
    );
    let f = findings(r, None);
    let x = find(&f, "cpu.idle_states", None).unwrap();
    assert!(x.title.contains("C1, wakes in 2 µs"), "{}", x.title);
    // Every state unreadable: unknown, not silence.
    for k in 0..SKYLAKE_STATES.len() {
        fs::remove_file(r.join(format!("sys/devices/system/cpu/cpu0/cpuidle/state{k}/name")))
            .unwrap();
    }
    expect(
        &findings(r, None),
        "cpu.idle_states",
        None,
        Status::Unknown,
        "",
    );
    // The stutter flow looks at it.
    let sym = vfio_assistant::doctor::find_symptom("stutter").unwrap();
    assert!(sym.checks.contains(&"cpu.idle_states"));
}

/// This CI machine's own idle states (a KVM guest with haltpoll), captured.
#[test]
fn cpu_idle_states_of_a_real_kvm_guest() {
    let dir = good_host();
    let r = dir.path();
    let capture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cpuidle/haltpoll-kvm-guest/sys/devices/system/cpu");
    for sub in ["cpuidle", "cpu0/cpuidle", "cpu1/cpuidle"] {
        crate::support::hosts::copy_tree(
            &capture.join(sub),
            &r.join("sys/devices/system/cpu").join(sub),
        );
    }
    let f = findings(r, None);
    expect(&f, "cpu.idle_states", None, Status::Pass, "");
    let x = find(&f, "cpu.idle_states", None).unwrap();
    assert!(
        x.title.contains("haltpoll idle, wakes in 1 µs"),
        "{}",
        x.title
    );
    assert!(
        x.evidence
            .iter()
            .any(|e| e.value == "POLL 0 µs, haltpoll idle 1 µs")
    );
    assert!(
        x.evidence
            .iter()
            .any(|e| e.value.starts_with("haltpoll (governor"))
    );
    // CPU 0 offline: the table comes from CPU 1, and CPU 0 is not judged.
    put(r, "sys/devices/system/cpu/online", "1-11\n");
    put(r, "sys/devices/system/cpu/cpu0/online", "0\n");
    let snap = scan(&HostRoot::at(r)).unwrap();
    assert!(snap.topology.online_cpus().all(|c| c.id != 0));
    assert_eq!(snap.system.cpuidle.cpu, Some(1));
    assert_eq!(snap.system.cpuidle.disabled, vec![(1, vec![])]);
}
