//! `check` reads each file once and says the same about it everywhere: the
//! kernel command line the scan could not read is "not read" in every finding
//! that cites it (not "(unreadable)" in one and "no isolcpus" in another),
//! and what depends on it is unknown, not "not set".

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use serde_json::Value;
use std::process::Command;

fn json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// (finding id, status, value) of every piece of evidence from the command line.
fn cmdline_evidence(check: &Value) -> Vec<(String, String, String)> {
    let mut seen = Vec::new();
    for f in check["findings"].as_array().unwrap() {
        for e in f["evidence"].as_array().unwrap() {
            if e["source"] == "/proc/cmdline" {
                seen.push((
                    f["id"].as_str().unwrap().to_string(),
                    f["status"].as_str().unwrap().to_string(),
                    e["value"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    seen
}

#[test]
fn one_reading_of_the_command_line_gives_one_answer_everywhere() {
    for host in [&["--demo"][..], &[][..]] {
        let scan = json(&[&["scan", "--json"][..], host].concat());
        let check = json(&[&["check", "--json"][..], host].concat());
        let seen = cmdline_evidence(&check);
        assert!(
            !seen.is_empty(),
            "{host:?}: no finding cites the command line"
        );
        if scan["kernel"]["cmdline"].is_null() {
            // The demo capture has no /proc/cmdline.
            let first = &seen[0].2;
            assert!(first.starts_with("not read"), "{host:?}: {seen:?}");
            assert!(
                seen.iter().all(|(_, _, v)| v == first),
                "{host:?}: {seen:?}"
            );
            for id in ["cpu.isolation", "iommu.passthrough_mode"] {
                if let Some((_, status, _)) = seen.iter().find(|(i, _, _)| i == id) {
                    assert_eq!(status, "unknown", "{host:?}: {id} claims to know: {seen:?}");
                }
            }
        } else {
            assert!(
                seen.iter()
                    .all(|(_, _, v)| !v.contains("not read") && !v.contains("unreadable")),
                "{host:?}: {seen:?}"
            );
        }
    }
}
