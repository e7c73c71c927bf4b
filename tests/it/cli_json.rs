//! `--json` as a script relies on it: every subcommand that takes it, in
//! every mode (lists, one item, all of them, failures), prints JSON on stdout
//! and nothing else — a command that could not run prints `{"error": …}`
//! there (exit 2), as do wrong arguments. Run on the demo host, libvirt's
//! test driver and, for what only runs here, this machine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .output()
        .unwrap()
}

/// How stdout is laid out: one document, or one per line (`monitor`).
#[derive(Clone, Copy)]
enum Shape {
    Document,
    Lines,
}

/// What a case must answer: its exit code, and whether stdout is an error.
struct Case {
    args: Vec<String>,
    shape: Shape,
    exit: i32,
    error: bool,
}

fn case(args: &[&str], exit: i32) -> Case {
    Case {
        args: args.iter().map(|s| s.to_string()).collect(),
        shape: Shape::Document,
        exit,
        error: false,
    }
}

fn error(args: &[&str]) -> Case {
    Case {
        error: true,
        ..case(args, 2)
    }
}

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
        .display()
        .to_string()
}

/// A domain file the demo host's `domain new` wrote.
fn demo_domain(dir: &Path) -> String {
    let out = run(&[
        "--demo",
        "domain",
        "new",
        "--name",
        "json-test",
        "--gpu",
        "0b:00.0",
        "--vcpus",
        "4",
        "--memory",
        "8G",
        "--disk",
        "/var/lib/libvirt/images/json-test.qcow2",
    ]);
    let file = dir.join("json-test.xml");
    std::fs::write(&file, &out.stdout).unwrap();
    file.display().to_string()
}

/// What is wrong with a case's answer, if anything.
fn check(c: &Case) -> Result<(), String> {
    let out = run(&c.args.iter().map(String::as_str).collect::<Vec<_>>());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = format!("{:?}\nstdout: {stdout}\nstderr: {stderr}", c.args);
    if out.status.code() != Some(c.exit) {
        return Err(format!(
            "exit {:?}, not {}: {said}",
            out.status.code(),
            c.exit
        ));
    }
    let docs: Result<Vec<Value>, _> = match c.shape {
        Shape::Document => serde_json::from_str(&stdout).map(|d| vec![d]),
        Shape::Lines => stdout.lines().map(serde_json::from_str).collect(),
    };
    let docs = docs.map_err(|e| format!("not JSON ({e}): {said}"))?;
    if docs.is_empty() {
        return Err(format!("no JSON at all: {said}"));
    }
    for d in &docs {
        let message = d.get("error").and_then(Value::as_str);
        if message.is_some() != c.error {
            return Err(format!(
                "an error object: {}, expected {}: {said}",
                message.is_some(),
                c.error
            ));
        }
        if let Some(m) = message
            && !stderr.contains(m)
        {
            return Err(format!("stderr does not say it too: {said}"));
        }
    }
    Ok(())
}

#[test]
fn every_json_mode_prints_json() {
    let dir = tempfile::tempdir().unwrap();
    let domain = demo_domain(dir.path());
    let rom = fixture("roms/efi-virtio.rom");
    let ryzen = fixture("topology/ghw-amd-ryzen5-1600");
    let mut cases = vec![
        case(&["scan", "--json", "--demo"], 0),
        case(&["scan", "--json"], 0),
        case(&["check", "--json", "--demo"], 0),
        case(&["check", "--json", "--demo", "--device", "0b:00.0"], 0),
        // A captured host without an IOMMU fails checks (exit 1), and the
        // doctor finds causes (exit 1): JSON all the same.
        case(&["check", "--json", "--root", &ryzen], 1),
        case(&["doctor", "--list", "--json"], 0),
        case(&["doctor", "stutter", "--json", "--demo"], 0),
        case(&["doctor", "--json", "--demo"], 0),
        case(
            &["doctor", "group-not-viable", "--json", "--root", &ryzen],
            1,
        ),
        case(&["doctor", "--json", "--root", &ryzen], 1),
        case(&["pin", "--vcpus", "4", "--json", "--demo"], 0),
        case(&["domain", "list", "--json", "--demo"], 0),
        case(&["domain", "validate", &domain, "--json", "--demo"], 0),
        // The test driver's one domain runs already: the start fails (exit 1) and says why.
        case(&["domain", "start", "test", "--json", "--demo"], 1),
        case(&["domain", "stop", "test", "--json", "--demo"], 0),
        case(&["domain", "destroy", "test", "--json", "--demo"], 0),
        case(&["rom", "--file", &rom, "--json"], 0),
        case(
            &["latency", "--cpus", "0", "--duration-s", "1", "--json"],
            0,
        ),
        Case {
            shape: Shape::Lines,
            ..case(
                &[
                    "monitor",
                    "--json",
                    "--demo",
                    "--interval-ms",
                    "100",
                    "--duration-s",
                    "0.3",
                ],
                0,
            )
        },
        // Could not run: the error as JSON.
        error(&["doctor", "no-such-symptom", "--json", "--demo"]),
        error(&["pin", "--vcpus", "999", "--json", "--demo"]),
        error(&["check", "--json", "--root", "/definitely/not/here"]),
        error(&["scan", "--json", "--root", "/definitely/not/here"]),
        error(&["domain", "stop", "no-such-domain", "--json", "--demo"]),
        error(&[
            "domain",
            "list",
            "--json",
            "--connect",
            "test:///nowhere.xml",
        ]),
        error(&["domain", "validate", "/definitely/not/here.xml", "--json"]),
        error(&["latency", "--cpus", "0", "--json", "--demo"]),
        error(&["latency", "--cpus", "100000", "--duration-s", "1", "--json"]),
        error(&["rom", "--json"]),
        // Wrong arguments, found before the command runs.
        error(&["monitor", "--json", "--duration-s", "-1"]),
        error(&["latency", "--cpus", "0", "--interval-us", "1", "--json"]),
    ];
    if std::env::var_os("CI").is_some() {
        // qemu:///system runs in CI: the live host's checks and libvirt.
        cases.push(case(&["domain", "list", "--json"], 0));
    }
    let wrong: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn every_latency_field_is_documented() {
    let out = run(&["latency", "--cpus", "0", "--duration-s", "1", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        matches!(v[0]["verdict"].as_str(), Some("good" | "fair" | "poor")),
        "{v}"
    );
    let mut keys = BTreeSet::new();
    crate::support::json::key_paths(&v, "", &mut keys);
    let missing = crate::support::json::undocumented(&keys, "latency-json.md");
    assert!(
        missing.is_empty(),
        "missing from docs/latency-json.md: {missing:#?}"
    );
}
