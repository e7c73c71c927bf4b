//! Troubleshooting flows on the test hosts (a real machine set up right, and
//! one set up wrong): the CLI, the JSON and the app's Troubleshoot page.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{bad_host, good_host};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use std::path::Path;
use std::process::Command;
use vfio_assistant::checks::run_checks;
use vfio_assistant::doctor::{Outcome, SYMPTOMS, diagnose, find_symptom};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

fn outcome(root: &Path, symptom: &str, device: Option<&str>) -> Outcome {
    let snap = scan(&HostRoot::at(root)).unwrap();
    diagnose(
        find_symptom(symptom).unwrap(),
        &run_checks(&snap, device),
        false,
    )
    .outcome
}

#[test]
fn the_bad_host_has_causes_and_the_good_host_does_not() {
    let bad = bad_host();
    for s in [
        "paused-at-start",
        "stutter",
        "vtx-disabled",
        "high-cpu-exits",
    ] {
        assert_eq!(
            outcome(bad.path(), s, None),
            Outcome::CauseFound,
            "{s} on the bad host"
        );
    }
    assert_eq!(
        outcome(bad.path(), "reset-bug", Some("4c:00.0")),
        Outcome::CauseFound
    );
    assert_eq!(
        outcome(bad.path(), "code43", Some("01:00.0")),
        Outcome::CauseFound,
        "boot VGA + nouveau"
    );
    let good = good_host();
    for s in [
        "paused-at-start",
        "stutter",
        "vtx-disabled",
        "high-cpu-exits",
        "group-not-viable",
    ] {
        assert_eq!(
            outcome(good.path(), s, Some("0b:00.0")),
            Outcome::NothingFound,
            "{s} on the good host"
        );
    }
}

#[test]
fn doctor_cli() {
    let bin = env!("CARGO_BIN_EXE_vfio-assistant");
    let out = Command::new(bin)
        .args(["doctor", "--list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for s in SYMPTOMS {
        assert!(text.contains(s.id), "{} missing from --list", s.id);
    }
    let bad = bad_host();
    let out = Command::new(bin)
        .args(["doctor", "paused-at-start", "--root"])
        .arg(bad.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[LIKELY CAUSE FOUND]"), "{text}");
    assert!(text.contains("Transparent hugepages: always"), "{text}");
    assert!(text.contains("fix:  Set it to madvise"), "{text}");
    assert!(
        text.contains("virsh domstate --reason"),
        "the live next step: {text}"
    );
    let out = Command::new(bin)
        .args(["doctor", "stutter", "--json", "--root"])
        .arg(bad.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["outcome"], "cause_found");
    assert!(
        v[0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "cpu.governor")
    );
    // The live tools come next: the monitor while it stutters, the probe
    // before the VM starts (both are commands of this program).
    let next = v[0]["next_steps"].as_array().unwrap();
    for cmd in [
        "vfio-assistant monitor --domain",
        "vfio-assistant latency --cpus",
    ] {
        assert!(
            next.iter().any(|n| n.as_str().unwrap().contains(cmd)),
            "{cmd}: {next:?}"
        );
    }
    let out = Command::new(bin)
        .args(["doctor", "no-such-symptom"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("doctor --list"));
    let good = good_host();
    let out = Command::new(bin)
        .args(["doctor", "--device", "0b:00.0", "--root"])
        .arg(good.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn troubleshoot_page_walks_a_symptom() {
    let bad = bad_host();
    let snap = scan(&HostRoot::at(bad.path())).unwrap();
    let app = App::with_snapshot(
        snap,
        State {
            page: Page::Troubleshoot,
            ..State::default()
        },
    );
    let mut h = Harness::builder()
        .with_size([1200.0, 900.0])
        .build_ui_state(|ui, app: &mut App| app.ui_content(ui), app);
    h.run();
    h.get_by_label_contains("Pick the symptom");
    h.get_by_label("Stutter, audio crackle, high DPC latency")
        .click();
    h.run();
    h.get_by_label("Likely cause found");
    assert!(
        h.query_all_by_label_contains("CPU(s) are not on the performance governor")
            .count()
            >= 1
    );
    h.get_by_label_contains("MSI mode");
    assert_eq!(h.state().state.symptom.as_deref(), Some("stutter"));
}

/// The app shows these steps as they are: a command in them is only ever
/// the "in a terminal" form next to the page that does it.
#[test]
fn symptom_steps_name_a_page_before_a_command() {
    for s in vfio_assistant::doctor::SYMPTOMS {
        let texts = s
            .next_steps
            .iter()
            .chain([&s.cannot_see])
            .chain(s.cannot_see_named.iter());
        for t in texts {
            if t.contains("vfio-assistant") {
                assert!(t.contains("in a terminal"), "{}: {t}", s.id);
            }
        }
    }
}
