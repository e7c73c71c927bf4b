//! A transaction on another machine whose connection is cut halfway (a real
//! sshd on 127.0.0.1, the "remote" a captured root there; the helper told to
//! wait at a step with `--pause-at`, tests only, so the cut lands inside the
//! transaction): the ssh client killed while the helper there waits — the
//! helper runs to its end, and a new connection finds it applied and undoes
//! it byte for byte; and the helper itself killed there (the machine's power
//! cut) — a new connection finds the interrupted transaction, says how to go
//! back, and `tune undo --last` gives every file back.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::sshd::{Sshd, script, sshd};
use crate::support::tuning::{differ, tree, tuning_host};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use vfio_assistant::helper::HelperRequest;
use vfio_assistant::remote::{SshTarget, Via};
use vfio_assistant::tuning::model::Request;

const PAUSE_AT: usize = 1;

fn ours() -> &'static str {
    env!("CARGO_BIN_EXE_vfio-assistant")
}

/// The helper there, told to wait at `PAUSE_AT` (a one-word program, as
/// `Via::helper` wants).
fn paused_helper(s: &Sshd) -> PathBuf {
    let w = s.dir.path().join("paused-helper");
    let helper = crate::support::helper_bin();
    script(
        &w,
        &format!("#!/bin/sh\nexec {helper} --pause-at {PAUSE_AT} \"$@\"\n"),
    );
    w
}

fn cli(s: &Sshd, args: &[&str]) -> Output {
    Command::new(ours())
        .args(args)
        .env("VFIO_ASSISTANT_SSH", s.ssh("client", &s.known_hosts()))
        .env("VFIO_ASSISTANT_REMOTE_PROGRAM", ours())
        .output()
        .unwrap()
}

/// The newest transaction's standing there, read over a new connection.
fn standing(s: &Sshd, target: &str) -> (String, serde_json::Value) {
    let out = cli(s, &["tune", "status", "--json", "--host", target]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let last = v.as_array().and_then(|a| a.last()).cloned().unwrap();
    (last["standing"].as_str().unwrap_or("").to_string(), last)
}

/// Start the app's apply on that machine through its helper over SSH, and
/// read its progress until it waits at `PAUSE_AT`. The ssh client is
/// returned, still connected, with its output (kept open).
fn apply_until_paused(
    s: &Sshd,
    host: &Path,
) -> (
    std::process::Child,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
) {
    let mut target = SshTarget::parse(&s.target(Some(host))).unwrap();
    target.via = Via {
        ssh: Some(s.ssh("client", &s.known_hosts())),
        program: Some(ours().into()),
        helper: Some(paused_helper(s).display().to_string()),
    };
    let request = HelperRequest::Apply {
        request: Box::new(Request {
            gpus: vec!["0000:0b:00.0".parse().unwrap()],
            ..Request::default()
        }),
    };
    let mut child = target
        .helper_command()
        .unwrap()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(&serde_json::to_vec(&request).unwrap())
        .unwrap();
    drop(stdin);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut started = 0;
    let mut seen = Vec::new();
    while started <= PAUSE_AT {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the helper ended before step {PAUSE_AT}: {seen:#?}"))
            .unwrap();
        if line.contains("\"event\":\"started\"") {
            started += 1;
        }
        seen.push(line);
    }
    (child, lines)
}

/// The helper there for this root (its command line names the root).
fn helper_there(host: &Path) -> Vec<i32> {
    let root = host.display().to_string();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let words: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        if words.iter().any(|w| w.ends_with("vfio-assistant-helper")) && words.contains(&root) {
            pids.push(pid);
        }
    }
    pids
}

fn wait_for_standing(s: &Sshd, target: &str, want: &str) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let (now, entry) = standing(s, target);
        if now == want {
            return entry;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "still {now}, not {want}: {entry}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn undo_gives_everything_back(s: &Sshd, target: &str, host: &Path, before: &BTreeTree) {
    let undo = cli(s, &["tune", "undo", "--last", "--yes", "--host", target]);
    assert_eq!(
        undo.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&undo.stdout),
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(differ(before, &tree(host)), Vec::<String>::new());
}

type BTreeTree = std::collections::BTreeMap<String, (Vec<u8>, u32)>;

#[test]
fn a_connection_dropped_mid_apply_lets_the_apply_end_there() {
    let s = sshd();
    let host = tuning_host();
    let before = tree(host.path());
    let target = s.target(Some(host.path()));
    let (mut client, _output) = apply_until_paused(&s, host.path());
    assert!(
        !helper_there(host.path()).is_empty(),
        "the helper waits there"
    );
    // The connection is gone while the helper waits between two steps.
    client.kill().unwrap();
    client.wait().unwrap();
    // It goes on to the end (no reader is no reason to stop halfway), and a
    // new connection finds the transaction applied, not cut.
    let entry = wait_for_standing(&s, &target, "waiting_for_reboot");
    let t0 = Instant::now();
    while !helper_there(host.path()).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the helper ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        entry["completed"].as_u64(),
        Some(entry["changes"].as_array().unwrap().len() as u64),
        "{entry}"
    );
    undo_gives_everything_back(&s, &target, host.path(), &before);
}

#[test]
fn the_machine_cut_mid_apply_is_found_and_undone_over_a_new_connection() {
    let s = sshd();
    let host = tuning_host();
    let before = tree(host.path());
    let target = s.target(Some(host.path()));
    let (mut client, _output) = apply_until_paused(&s, host.path());
    // The power cut there: the helper dies between two steps, then the
    // connection goes with it.
    let pids = helper_there(host.path());
    assert!(!pids.is_empty(), "the helper waits there");
    for pid in pids {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
    }
    client.kill().unwrap();
    client.wait().unwrap();
    let (now, entry) = standing(&s, &target);
    assert_eq!(now, "interrupted", "{entry}");
    let detail = entry["detail"].as_str().unwrap_or("");
    assert!(detail.contains("tune undo --last"), "{entry}");
    // The words the user reads there say it too.
    let text = cli(&s, &["tune", "status", "--host", &target]);
    let said = String::from_utf8_lossy(&text.stdout);
    assert!(said.contains("tune undo --last"), "{said}");
    undo_gives_everything_back(&s, &target, host.path(), &before);
}
