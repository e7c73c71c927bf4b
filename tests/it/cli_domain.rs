//! `vfio-assistant domain new | list | validate | define | tune --domain` as a
//! user drives them, on the bundled demo host and libvirt's test driver (no
//! daemon needed), with the exit codes a script relies on.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const NEW: &[&str] = &[
    "--demo",
    "domain",
    "new",
    "--name",
    "win11",
    "--gpu",
    "0c:00.0",
    "--vcpus",
    "6",
    "--memory",
    "16G",
    "--disk",
    "/var/lib/libvirt/images/win11.qcow2",
    "--iso",
    "/srv/Win11.iso",
    "--virtio-iso",
    "/srv/virtio-win.iso",
];

#[test]
fn new_prints_a_domain_and_explains_every_part() {
    let out = run(NEW);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let xml = text(&out.stdout);
    assert!(xml.starts_with("<domain type='kvm'>"), "{xml}");
    assert!(xml.contains("<source file='/var/lib/libvirt/images/win11.qcow2'/>"));
    assert!(
        xml.contains("bus='0x0c' slot='0x00' function='0x1'"),
        "the HDMI audio goes too"
    );
    let err = text(&out.stderr);
    for part in [
        "os:",
        "devices/hostdev:",
        "cputune:",
        "features/hyperv:",
        "devices/tpm:",
    ] {
        assert!(err.contains(part), "no why for {part}: {err}");
    }
    let whys = err.lines().filter(|l| l.starts_with("  why: ")).count();
    let parts = err
        .lines()
        .filter(|l| {
            !l.starts_with("  why: ")
                && !l.starts_with("note: ")
                && !l.starts_with("preflight ")
                && !l.starts_with("  fix: ")
        })
        .count();
    assert_eq!(whys, parts, "every part has its why: {err}");

    // The file validates and defines (on the test driver).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("win11.xml");
    std::fs::write(&file, &xml).unwrap();
    let f = file.to_str().unwrap();
    let v = run(&["--demo", "domain", "validate", f]);
    let vo = text(&v.stdout);
    assert!(vo.contains("schema"), "{vo}");
    if std::env::var_os("CI").is_some() {
        assert!(
            vo.contains("PASS    libvirt's domain schema accepts it"),
            "{vo}"
        );
    }
    assert!(v.status.success(), "{vo}{}", text(&v.stderr));
    // Without a terminal define asks nothing and does nothing, unless --yes.
    let d = run(&["--demo", "domain", "define", f]);
    assert_eq!(d.status.code(), Some(1), "{}", text(&d.stdout));
    assert!(text(&d.stderr).contains("--yes"), "{}", text(&d.stderr));
    let d = run(&["--demo", "domain", "define", "--yes", f]);
    assert!(d.status.success(), "{}", text(&d.stderr));
    assert!(text(&d.stdout).contains("Defined 'win11' on test:///default"));
}

/// The README's own `domain new … --iso Win11.iso` (relative paths): made
/// absolute against the folder it runs in, so the schema takes it; the same
/// relative path in a file given to `validate` is named in the failure.
#[test]
fn relative_paths_become_absolute_and_are_named_when_not() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .current_dir(dir.path())
        .args([
            "--demo",
            "domain",
            "new",
            "--name",
            "w",
            "--vcpus",
            "2",
            "--memory",
            "4G",
            "--disk",
            "w.qcow2",
            "--iso",
            "Win11.iso",
            "--virtio-iso",
            "virtio-win.iso",
        ])
        .output()
        .unwrap();
    let xml = text(&out.stdout);
    let base = dir.path().canonicalize().unwrap();
    for f in ["w.qcow2", "Win11.iso", "virtio-win.iso"] {
        let abs = format!("file='{}'", base.join(f).display());
        let plain = format!("file='{}'", dir.path().join(f).display());
        assert!(xml.contains(&abs) || xml.contains(&plain), "{f}: {xml}");
    }
    assert!(text(&out.stderr).contains("libvirt needs absolute paths"));
    let rel = xml.replace(&format!("{}/", dir.path().display()), "");
    let file = dir.path().join("rel.xml");
    std::fs::write(&file, rel).unwrap();
    let v = run(&["--demo", "domain", "validate", file.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(1), "{}", text(&v.stdout));
    assert!(
        text(&v.stdout).contains("The ISO path 'Win11.iso' is relative"),
        "{}",
        text(&v.stdout)
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_2() {
    let mut args = NEW.to_vec();
    let m = args.iter().position(|a| *a == "16G").unwrap();
    args[m] = "sixteen";
    let out = run(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not a memory size"),
        "{}",
        text(&out.stderr)
    );

    let mut args = NEW.to_vec();
    let g = args.iter().position(|a| *a == "0c:00.0").unwrap();
    args[g] = "42:00.0";
    let out = run(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no PCI device"),
        "{}",
        text(&out.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, "<domain type='kvm'>\n  <name>x</nam>\n</domain>\n").unwrap();
    for cmd in ["validate", "define"] {
        let out = run(&["--demo", "domain", cmd, bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let e = text(&out.stderr);
        assert!(
            e.contains("not well-formed") && e.contains("line 2"),
            "{cmd}: {e}"
        );
    }
    // Schema-invalid but well-formed: validate says so and exits 1.
    std::fs::write(
        &bad,
        "<domain type='kvm'><name>x</name><vcpu>many</vcpu></domain>\n",
    )
    .unwrap();
    let out = run(&["--demo", "domain", "validate", bad.to_str().unwrap()]);
    if std::env::var_os("CI").is_some() || text(&out.stdout).contains("does not match") {
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    }
    let out = run(&[
        "domain",
        "list",
        "--connect",
        "qemu+unix:///system?socket=/nonexistent",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("what to try"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn list_and_tune_a_domain_libvirt_has() {
    let out = run(&["--demo", "domain", "list"]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("test  running"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&["--demo", "domain", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["name"], "test");
    assert_eq!(v[0]["state"], "running");

    let out = run(&["--demo", "domain", "tune", "--domain", "test", "--diff"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let diff = text(&out.stdout);
    assert!(
        diff.contains("+    <memballoon model='none'/>") || diff.contains("memballoon"),
        "{diff}"
    );
    assert!(diff.contains("test (test:///default)"), "{diff}");
    let out = run(&["--demo", "domain", "tune", "--domain", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("domain list"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn check_reads_a_domain_on_the_test_driver() {
    let out = run(&["--demo", "check", "--domain", "test", "--json"]);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        text(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    for id in [
        "vm.state",
        "vm.pinning",
        "vm.hyperv",
        "vm.code43",
        "vm.exits",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let state = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "vm.state")
        .unwrap();
    assert_eq!(state["status"], "pass", "{state}");
    // The test driver has no QEMU: the live parts say so instead of guessing.
    let exits = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "vm.exits")
        .unwrap();
    assert_eq!(exits["status"], "unknown", "{exits}");
    let out = run(&["--demo", "check", "--domain", "no-such-vm"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains("no-such-vm"), "{all}");
}

#[test]
fn check_says_whether_libvirt_lets_this_user_in() {
    let finding = |args: &[&str]| -> Option<serde_json::Value> {
        let out = run(args);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == "libvirt.connect")
            .cloned()
    };
    // --demo: the test driver answers.
    let ok = finding(&["--demo", "check", "--json"]).unwrap();
    assert_eq!(ok["status"], "pass", "{ok}");
    assert!(
        ok["evidence"][0]["value"]
            .as_str()
            .unwrap()
            .contains("domain(s) visible")
    );
    // A socket nobody listens on: no daemon, said so with the fix.
    let down = finding(&[
        "--demo",
        "check",
        "--json",
        "--connect",
        "qemu+unix:///system?socket=/nonexistent/libvirt-sock",
    ])
    .unwrap();
    assert_eq!(down["status"], "fail", "{down}");
    assert!(down["title"].as_str().unwrap().contains("does not answer"));
    assert!(down["fix"].as_str().unwrap().contains("systemctl"));
    // A captured host (a snapshot root) has no daemon to ask.
    let dir = crate::support::hosts::base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let root = dir.path().to_str().unwrap();
    assert!(finding(&["--root", root, "check", "--json"]).is_none());
}
