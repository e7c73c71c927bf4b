//! One library, two faces: on the same root the app and the CLI give the
//! same answers — the findings (`check --json` against the app's scan), the
//! doctor's verdict for each symptom (`doctor --json` against the
//! Troubleshoot page's `diagnose`), and the one next step.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{bad_host, good_host};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use vfio_assistant::doctor::{SYMPTOMS, diagnose};
use vfio_assistant::report::next_step::next_step;
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::State;

fn cli_json(args: &[&str], root: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The app's scan of `root`, as the window would have it.
fn app_of(root: &Path) -> App {
    let mut app = App::with_source(Source::Root(root.into()), State::default(), || {});
    let end = Instant::now() + Duration::from_secs(60);
    while app.snapshot.is_none() && Instant::now() < end {
        app.poll();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        app.snapshot.is_some(),
        "the app's scan of {root:?} ended: {:?}",
        app.error
    );
    app
}

#[test]
fn the_app_and_the_cli_say_the_same_on_the_same_root() {
    let good = good_host();
    let bad = bad_host();
    let ryzen =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/ghw-amd-ryzen5-1600");
    // A boot GPU (the host's) and a second card, captured on a real host.
    let debian =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/e2e-debian12-grub");
    for root in [good.path(), bad.path(), ryzen.as_path(), debian.as_path()] {
        let app = app_of(root);
        let cli = cli_json(&["check", "--json"], root);
        // Findings: the same ids, statuses and titles, in the same order.
        let app_findings = serde_json::to_value(app.findings.as_slice()).unwrap();
        assert_eq!(cli["findings"], app_findings, "findings on {root:?}");
        // The next step the Overview opens with is the one `check` prints.
        let snap = app.snapshot.as_ref().unwrap();
        let step = serde_json::to_value(next_step(snap, &app.findings)).unwrap();
        assert_eq!(cli["next_step"], step, "next step on {root:?}");
        // Each symptom's verdict and summary, as the Troubleshoot page has it.
        let doctor = cli_json(&["doctor", "--json"], root);
        for (i, s) in SYMPTOMS.iter().enumerate() {
            let d = diagnose(s, &app.findings, false);
            assert_eq!(
                doctor[i]["outcome"],
                serde_json::to_value(d.outcome).unwrap(),
                "{} on {root:?}",
                s.id
            );
            assert_eq!(
                doctor[i]["summary"],
                d.summary.as_str(),
                "{} on {root:?}",
                s.id
            );
        }
    }
}
