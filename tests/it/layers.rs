//! The layers the compiler keeps (issue 32): the workspace's dependency
//! graph is the architecture. The core (every use case) and the root helper
//! cannot reach the GUI, libvirt's library or the SSH crate, not by a `use`
//! and not by a dependency of a dependency; libvirt's crate and the remote
//! crate cannot reach the GUI; nothing below the app depends on it. The
//! helper's binary is checked too (helper.rs: ldd and nm). A dependency that
//! breaks a layer fails here, before it reaches a user's root.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Every workspace package's dependencies, transitively, by crate name,
/// from cargo's own resolution (the lock file, no network).
fn closure() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        // This machine's packages only: another platform's are never fetched.
        .args([
            "--filter-platform",
            &format!("{}-unknown-linux-gnu", std::env::consts::ARCH),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    // Normal dependencies only: a dev-dependency never reaches a binary.
    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().unwrap() {
        let id = node["id"].as_str().unwrap();
        let normal = node["deps"].as_array().unwrap().iter().filter(|d| {
            d["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null())
        });
        edges.insert(id, normal.map(|d| d["pkg"].as_str().unwrap()).collect());
    }
    let mut out = BTreeMap::new();
    for member in meta["workspace_members"].as_array().unwrap() {
        let member = member.as_str().unwrap();
        let (mut seen, mut todo) = (BTreeSet::new(), vec![member]);
        while let Some(id) = todo.pop() {
            for &d in edges.get(id).into_iter().flatten() {
                if seen.insert(name_of[d].to_string()) {
                    todo.push(d);
                }
            }
        }
        out.insert(name_of[member].to_string(), seen);
    }
    out
}

const GUI: [&str; 5] = ["egui", "eframe", "egui_plot", "rfd", "winit"];
const LIBVIRT: [&str; 2] = ["virt", "virt-sys"];
const SSH: [&str; 3] = ["ssh2", "russh", "openssh"];

fn refuses(all: &BTreeMap<String, BTreeSet<String>>, member: &str, banned: &[&str]) {
    let deps = all
        .get(member)
        .unwrap_or_else(|| panic!("{member} is not a member"));
    for b in banned {
        assert!(!deps.contains(*b), "{member} reaches {b}: {deps:?}");
    }
}

#[test]
fn the_dependency_graph_is_the_architecture() {
    let all = closure();
    let app = ["vfio-assistant"];
    let ours = ["vfio-assistant-libvirt", "vfio-assistant-remote"];
    for member in ["vfio-assistant-core", "vfio-assistant-helper"] {
        refuses(
            &all,
            member,
            &[&GUI[..], &LIBVIRT, &SSH, &app, &ours].concat(),
        );
    }
    refuses(
        &all,
        "vfio-assistant-libvirt",
        &[&GUI[..], &SSH, &app].concat(),
    );
    refuses(
        &all,
        "vfio-assistant-remote",
        &[&GUI[..], &LIBVIRT, &app, &["vfio-assistant-libvirt"]].concat(),
    );
    // The helper is built on the core alone.
    let helper = &all["vfio-assistant-helper"];
    assert!(helper.contains("vfio-assistant-core"));
    // And the check itself sees what it should: the app reaches all of it.
    let top = &all["vfio-assistant"];
    for must in [
        "egui",
        "virt",
        "vfio-assistant-core",
        "vfio-assistant-remote",
    ] {
        assert!(
            top.contains(must),
            "the app does not reach {must}: the check is blind"
        );
    }
}

fn ldd(program: &str) -> String {
    let out = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `vfio-assistant`, what users run, does not load libvirt's library (and
/// the ~55 it pulls in): `scan`, `pin`, `--version` start without them. A
/// command that needs libvirt continues, same arguments, in
/// `vfio-assistant-virt`; without that program the command says so.
#[test]
fn what_users_run_does_not_load_libvirt_and_hands_libvirt_on() {
    let front = env!("CARGO_BIN_EXE_vfio-assistant");
    let virt = env!("CARGO_BIN_EXE_vfio-assistant-virt");
    assert!(!ldd(front).contains("libvirt"), "{}", ldd(front));
    assert!(ldd(virt).contains("libvirt.so"), "{}", ldd(virt));
    let out = std::process::Command::new(front)
        .args(["domain", "list", "--demo"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("test:///default"),
        "{text}"
    );
    // The same program where no vfio-assistant-virt is beside it (a hard
    // link: the program knows itself by the path it was started from).
    if std::path::Path::new("/usr/libexec/vfio-assistant/vfio-assistant-virt").exists() {
        return; // installed on this machine: it would be found there
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let alone = dir.path().join("vfio-assistant");
    std::fs::hard_link(front, &alone).unwrap();
    let out = std::process::Command::new(&alone)
        .args(["domain", "list", "--demo"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("vfio-assistant-virt is not installed"),
        "{err}"
    );
    // What never needs libvirt still runs there: tuning too (issue 43:
    // `tune plan` paid for libvirt's ~55 libraries it never used).
    for args in [
        &["scan", "--demo"][..],
        &["tune", "plan", "--demo"],
        &["tune", "status", "--demo"],
    ] {
        let out = std::process::Command::new(&alone)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// No source file over 600 lines (issue 32): a file that grows past it is
/// split along what it owns, before it becomes the one everyone edits.
#[test]
fn no_source_file_is_over_600_lines() {
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, usize)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let (p, kind) = (e.path(), e.file_type().unwrap());
            // Links are not followed: the fixture trees are sysfs copies
            // whose links lead back up (a walk through them never ends).
            if kind.is_dir() && !p.ends_with("tests/fixtures") {
                walk(&p, out);
            } else if kind.is_file() && p.extension().is_some_and(|x| x == "rs") {
                let n = std::fs::read_to_string(&p).unwrap().lines().count();
                if n > 600 {
                    out.push((p.display().to_string(), n));
                }
            }
        }
    }
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    for d in ["src", "crates", "tests", "benches", "examples"] {
        if top.join(d).is_dir() {
            walk(&top.join(d), &mut long);
        }
    }
    assert!(long.is_empty(), "over 600 lines: {long:?}");
}
