//! The CLI as a user drives it: `scan` (report and JSON) and `snapshot`, on the
//! live host and on fixture roots, with the exit codes a script relies on.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn json_of(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn all_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = std::fs::read_dir(fixtures().join("topology"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    roots.push(fixtures().join("pci-sysfs/prometheus-procfs"));
    roots.sort();
    roots
}

#[test]
fn scan_json_has_the_promised_fields_on_every_fixture() {
    for root in all_roots() {
        let v = json_of(&["scan", "--json", "--root", root.to_str().unwrap()]);
        let s = &v["topology"]["summary"];
        for k in [
            "packages",
            "numa_nodes",
            "l3_groups",
            "cores",
            "cpus_online",
            "cpus_offline",
        ] {
            assert!(s[k].is_u64(), "{}: topology.summary.{k}", root.display());
        }
        for g in v["iommu_groups"].as_array().unwrap() {
            assert!(g["id"].is_u64() && g["devices"].is_array());
        }
        for d in v["pci_devices"].as_array().unwrap() {
            for k in ["address", "vendor_id", "device_id", "class"] {
                assert!(d[k].is_string(), "{}: pci_devices[].{k}", root.display());
            }
            assert!(d.get("driver").is_some() && d.get("iommu_group").is_some());
            assert!(d["passthrough"]["verdict"].is_string());
            assert!(d["passthrough"]["reason"].as_str().unwrap().len() > 10);
        }
    }
}

#[test]
fn every_json_field_is_documented() {
    let mut keys = BTreeSet::new();
    for root in all_roots() {
        crate::support::json::key_paths(
            &json_of(&["scan", "--json", "--root", root.to_str().unwrap()]),
            "",
            &mut keys,
        );
    }
    crate::support::json::key_paths(&json_of(&["scan", "--json", "--demo"]), "", &mut keys);
    crate::support::json::key_paths(&json_of(&["scan", "--json"]), "", &mut keys);
    // A list is documented by its elements' row (`x[]`).
    let missing = crate::support::json::undocumented(&keys, "scan-json.md");
    assert!(
        missing.is_empty(),
        "fields missing from docs/scan-json.md: {missing:#?}"
    );
}

#[test]
fn json_is_stable_between_two_scans() {
    let root = fixtures().join("topology/hwloc-32intel64-2p8co2t+8ve");
    let a = run(&["scan", "--json", "--root", root.to_str().unwrap()]);
    let b = run(&["scan", "--json", "--root", root.to_str().unwrap()]);
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn live_host_scan_says_in_words_that_there_is_no_iommu() {
    let out = run(&["scan"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let v = json_of(&["scan", "--json"]);
    if v["iommu"]["active"] == Value::Bool(false) {
        assert!(
            text.contains("IOMMU:      not active: no device can be passed through yet"),
            "{text}"
        );
        assert!(
            text.contains("PCI devices (no IOMMU groups on this host"),
            "{text}"
        );
    }
    assert!(text.contains("Topology:"));
    assert!(v["topology"]["summary"]["cpus_online"].as_u64().unwrap() >= 1);
}

#[test]
fn a_bad_root_gets_a_clear_message_and_exit_2() {
    let out = run(&["scan", "--root", "/definitely/not/here"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/definitely/not/here: not a directory"));
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["scan", "--root", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("does not look like a Linux host root"),
        "{err}"
    );
}

#[test]
fn report_groups_devices_with_names_and_verdicts() {
    let out = run(&["scan", "--demo"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Group 30"));
    assert!(text.contains("GeForce GTX 1080 Ti"));
    assert!(text.contains("[OK with companions]"));
    assert!(text.contains("[BLOCKED]"));
    assert!(text.contains("L3 #1"));
}

fn extract(archive: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let st = Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-C")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    dir
}

fn without_root(mut v: Value) -> Value {
    v["root"] = Value::Null;
    v
}

#[test]
fn snapshot_of_every_fixture_scans_the_same() {
    for root in all_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let archive = tmp.path().join("host.tar.gz");
        let out = run(&[
            "snapshot",
            "--root",
            root.to_str().unwrap(),
            archive.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = extract(&archive);
        let original = json_of(&["scan", "--json", "--root", root.to_str().unwrap()]);
        let again = json_of(&["scan", "--json", "--root", dir.path().to_str().unwrap()]);
        assert_eq!(
            without_root(original),
            without_root(again),
            "{}",
            root.display()
        );
    }
    // Symlinks stay symlinks.
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("host.tar.gz");
    let root = fixtures().join("topology/ghw-intel-i7-1270P");
    assert!(
        run(&[
            "snapshot",
            "--root",
            root.to_str().unwrap(),
            archive.to_str().unwrap()
        ])
        .status
        .success()
    );
    let dir = extract(&archive);
    assert!(
        dir.path()
            .join("sys/bus/pci/devices/0000:00:02.0")
            .is_symlink()
    );
    assert!(dir.path().join("SNAPSHOT.txt").is_file());
}

/// A libvirt hook that is executable is still so in the snapshot (found
/// by reading another machine over SSH: every hook looked not executable).
#[test]
fn a_snapshot_keeps_what_is_executable() {
    let host = crate::support::hosts::good_host();
    let hook = host.path().join("etc/libvirt/hooks/qemu");
    let tmp = tempfile::tempdir().unwrap();
    for (mode, executable) in [(0o755, true), (0o644, false)] {
        std::fs::set_permissions(
            &hook,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(mode),
        )
        .unwrap();
        let archive = tmp.path().join(format!("host-{mode:o}.tar.gz"));
        let out = run(&[
            "snapshot",
            "--root",
            host.path().to_str().unwrap(),
            archive.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = json_of(&["scan", "--json", "--root", archive.to_str().unwrap()]);
        assert_eq!(
            v["system"]["libvirt_hooks"][0]["executable"],
            Value::Bool(executable),
            "{mode:o}"
        );
    }
}

#[test]
fn snapshot_of_the_live_host_round_trips_and_masks_identifiers() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("live.tar.gz");
    let out = run(&["snapshot", archive.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = extract(&archive);
    let live = json_of(&["scan", "--json"]);
    let again = json_of(&["scan", "--json", "--root", dir.path().to_str().unwrap()]);
    assert_eq!(live["pci_devices"], again["pci_devices"]);
    assert_eq!(live["topology"]["summary"], again["topology"]["summary"]);
    assert_eq!(live["topology"]["cores"], again["topology"]["cores"]);
    assert_eq!(live["iommu_groups"], again["iommu_groups"]);
    // No MAC address survives anywhere in the archive.
    for entry in walk(dir.path()) {
        if let Ok(text) = std::fs::read_to_string(&entry) {
            assert!(
                !has_real_mac(&text),
                "{} holds a MAC address",
                entry.display()
            );
        }
    }
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                out.extend(walk(&e.path()));
            } else if ft.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

fn has_real_mac(text: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == '=')
        .any(|w| {
            w.len() == 17
                && w.split(':').count() == 6
                && w.split(':')
                    .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
                && w != "00:00:00:00:00:00"
        })
}

#[test]
fn help_names_the_subcommands() {
    let out = run(&["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for word in ["scan", "snapshot", "--root", "--demo"] {
        assert!(text.contains(word), "{word} missing from --help");
    }
}

#[test]
fn latency_probe_measures_and_refuses_nonsense() {
    let v = json_of(&[
        "latency",
        "--cpus",
        "0",
        "--interval-us",
        "1000",
        "--duration-s",
        "1",
        "--json",
    ]);
    let r = &v[0];
    assert_eq!(r["cpu"], 0);
    let samples = r["samples"].as_u64().unwrap();
    assert!(
        (900..=1000).contains(&samples),
        "{samples} wake-ups in 1 s at 1 ms"
    );
    assert!(r["min_us"].as_u64().unwrap() <= r["p99_us"].as_u64().unwrap());
    assert!(r["p99_us"].as_u64().unwrap() <= r["max_us"].as_u64().unwrap());
    let out = run(&["latency", "--cpus", "x-y"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cpus"));
    let out = run(&[
        "latency",
        "--cpus",
        "0",
        "--interval-us",
        "5",
        "--duration-s",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    // A captured host cannot be measured: refused, nothing measured here.
    for host in [&["--demo"][..], &["--root", "/nonexistent-capture"][..]] {
        let mut args = host.to_vec();
        args.extend(["latency", "--cpus", "0", "--duration-s", "1"]);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("captured host"));
        assert!(out.stdout.is_empty(), "no measurement printed");
    }
}

/// `latency --compare-idle`: measured as configured and with every CPU kept
/// to shallow idle states. As root the PM QoS request is made and withdrawn
/// when the process ends (cyclictest holds one by default); otherwise the
/// command says it needs root, before measuring anything.
#[test]
fn latency_compares_with_deep_idle_held_off() {
    let out = run(&[
        "latency",
        "--cpus",
        "0",
        "--duration-s",
        "1",
        "--compare-idle",
        "--json",
    ]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert_ne!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stderr).contains("root"));
        return;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["as_configured", "shallow_idle_only"] {
        let r = &v[key][0];
        assert_eq!(r["cpu"], 0, "{key}");
        assert!(r["samples"].as_u64().unwrap() >= 900, "{key}: {r}");
    }
    // The request ended with the process: the limit is no longer ours (10 µs).
    let now = std::fs::read("/dev/cpu_dma_latency").unwrap();
    let limit = i32::from_ne_bytes(now[..4].try_into().unwrap());
    assert_ne!(limit, 10, "the PM QoS request was withdrawn");
}

/// `monitor --json` on this machine: one object per sample, every field in
/// docs/monitor-json.md (the VM's fields are checked with a real guest in
/// tests/it/monitor.rs).
#[test]
fn monitor_json_fields_are_documented() {
    let out = run(&[
        "monitor",
        "--json",
        "--duration-s",
        "1",
        "--interval-ms",
        "250",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut keys = BTreeSet::new();
    let mut lines = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        crate::support::json::key_paths(&v, "", &mut keys);
        lines += 1;
    }
    assert!(lines >= 2, "one object per sample: {lines}");
    let missing = crate::support::json::undocumented(&keys, "monitor-json.md");
    assert!(
        missing.is_empty(),
        "missing from docs/monitor-json.md: {missing:#?}"
    );
}
