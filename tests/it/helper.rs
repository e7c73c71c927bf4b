//! The privileged helper fed hostile requests, run directly (no pkexec) on
//! a temporary root: each is refused with exit 2 and one line why, and the
//! root is byte-identical afterwards. A well-formed request applies, streams
//! one JSON line per step, and is undone.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::tuning::{differ, runtime_host, tree};
use std::io::Write;
use std::process::{Command, Stdio};

fn helper(root: &std::path::Path, input: &[u8], envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut child = Command::new(crate::support::helper_bin())
        .arg("--root")
        .arg(root)
        // As pkexec and sudo start it: without cargo's loader path (with
        // PKEXEC_UID set it would be refused first, issue 41).
        .env_remove("LD_LIBRARY_PATH")
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The helper may refuse before reading everything (a closed pipe is fine).
    let _ = child.stdin.take().unwrap().write_all(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn hostile_requests_are_refused_and_change_nothing() {
    let dir = runtime_host();
    let before = tree(dir.path());
    let big = format!(
        "{{\"kind\":\"status\",\"pad\":\"{}\"}}",
        "x".repeat(2 << 20)
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "path traversal in a device",
            br#"{"kind":"apply","request":{"gpus":["../../../etc/passwd"]}}"#.to_vec(),
        ),
        (
            "path traversal in an sriov key",
            br#"{"kind":"apply","request":{"sriov":{"/etc/shadow":1}}}"#.to_vec(),
        ),
        (
            "path traversal in a change id",
            br#"{"kind":"apply","request":{"only":["../../x"]}}"#.to_vec(),
        ),
        (
            "path traversal in an undo id",
            br#"{"kind":"undo","id":"../../../../etc"}"#.to_vec(),
        ),
        (
            "a governor of its own",
            br#"{"kind":"apply","request":{"governor":"../../x"}}"#.to_vec(),
        ),
        (
            "CPU 4096",
            br#"{"kind":"apply","request":{"cpus":[4096]}}"#.to_vec(),
        ),
        (
            "a CPU that is not online",
            br#"{"kind":"apply","request":{"cpus":[2,4000]}}"#.to_vec(),
        ),
        (
            "a kernel token",
            br#"{"kind":"apply","request":{"tokens":["quiet $(reboot)"]}}"#.to_vec(),
        ),
        (
            "a file's content",
            br#"{"kind":"apply","request":{"files":{"/etc/x":"y"}}}"#.to_vec(),
        ),
        ("2 MiB of input", big.into_bytes()),
        (
            "an unknown kind",
            br#"{"kind":"shell","argv":["sh"]}"#.to_vec(),
        ),
        (
            "a second request",
            br#"{"kind":"status"}{"kind":"apply","request":{}}"#.to_vec(),
        ),
        ("not JSON", b"apply everything".to_vec()),
        (
            "a device that is not there",
            br#"{"kind":"apply","request":{"gpus":["42:00.0"]}}"#.to_vec(),
        ),
        (
            "too many VFs",
            br#"{"kind":"apply","request":{"sriov":{"0b:00.0":5000}}}"#.to_vec(),
        ),
    ];
    for (what, input) in cases {
        let (code, out) = helper(dir.path(), &input, &[]);
        assert_eq!(code, Some(2), "{what}: {out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{what}: one line why: {out}");
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert!(
            v["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{what}: {out}"
        );
        assert_eq!(
            differ(&before, &tree(dir.path())),
            Vec::<String>::new(),
            "{what} changed the root"
        );
    }
    // --root with PKEXEC_UID set: refused before reading anything.
    let (code, out) = helper(
        dir.path(),
        br#"{"kind":"status"}"#,
        &[("PKEXEC_UID", "1000")],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("refused when pkexec, sudo"), "{out}");
}

#[test]
fn a_symlink_planted_where_a_file_goes_is_refused() {
    let dir = runtime_host();
    let outside = tempfile::tempdir().unwrap();
    let target = dir.path().join("etc/modprobe.d/vfio-assistant.conf");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(outside.path().join("owned"), &target).unwrap();
    let before = tree(dir.path());
    let (code, out) = helper(
        dir.path(),
        br#"{"kind":"apply","request":{"gpus":["0b:00.0"]}}"#,
        &[],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("link"), "{out}");
    assert!(!outside.path().join("owned").exists());
    assert_eq!(differ(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn a_good_request_streams_its_steps_and_is_undone() {
    let dir = runtime_host();
    let before = tree(dir.path());
    let (code, out) = helper(
        dir.path(),
        br#"{"kind":"apply","request":{"only":["thp","ksm"]}}"#,
        &[],
    );
    assert_eq!(code, Some(0), "{out}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().any(|l| l["event"] == "done"), "{out}");
    let last = lines.last().unwrap();
    assert_eq!(last["result"]["state"], "applied", "{out}");
    let id = last["result"]["id"].as_str().unwrap().to_string();
    assert!(
        std::fs::read_to_string(
            dir.path()
                .join("sys/kernel/mm/transparent_hugepage/enabled")
        )
        .unwrap()
        .starts_with("madvise")
    );
    let (code, out) = helper(dir.path(), br#"{"kind":"status"}"#, &[]);
    assert_eq!(code, Some(0));
    assert!(out.contains(&id), "{out}");
    let undo = format!("{{\"kind\":\"undo\",\"id\":\"{id}\"}}");
    let (code, out) = helper(dir.path(), undo.as_bytes(), &[]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        differ(&before, &tree(dir.path())),
        Vec::<String>::new(),
        "undo gives the tree back"
    );
}

/// The helper runs as root: it links no display, GUI or libvirt library, and
/// none of the app's window code is in it.
#[test]
fn the_helper_carries_no_gui_and_no_libvirt() {
    let bin = crate::support::helper_bin();
    let ldd = std::process::Command::new("ldd").arg(bin).output().unwrap();
    let libs = String::from_utf8_lossy(&ldd.stdout);
    assert!(libs.contains("libc.so"), "ldd said: {libs}");
    // What a Rust binary on glibc links with nothing added: anything else
    // (libvirt, X11, GL, wayland…) came in through a dependency.
    for lib in libs.lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(
            ["linux-vdso.so", "libgcc_s.so", "libc.so", "/lib64/ld-linux"]
                .iter()
                .any(|ok| lib.starts_with(ok)),
            "the helper links {lib}: {libs}"
        );
    }
    let nm = std::process::Command::new("nm")
        .args(["-C", bin])
        .output()
        .unwrap();
    let symbols = String::from_utf8_lossy(&nm.stdout);
    assert!(
        symbols.contains("vfio_assistant_core::helper"),
        "nm read no symbols"
    );
    for krate in ["egui::", "eframe::", "virt::"] {
        assert!(!symbols.contains(krate), "the helper holds {krate} code");
    }
}
