//! The demo works end to end: on the bundled captured host the Tuning page
//! with the VM's card ticked (as the Overview's next step ticks it) and the
//! rest as it comes applies without an error — what the capture does not
//! hold (a device's driver_override) is offered unticked and said, not
//! tried — and the Overview does not call the way clear while checks could
//! not look.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{harness, wait_for};
use egui_kittest::kittest::Queryable;
use vfio_assistant::helper::HelperReply;
use vfio_assistant::helper::client::Heard;
use vfio_assistant::tuning::apply::Progress;
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State, TuningChoices};

#[test]
fn the_demo_applies_its_defaults_on_its_captured_tree() {
    let state = State {
        page: Page::Tuning,
        tuning: TuningChoices {
            gpus: vec!["0000:0b:00.0".into()],
            ..TuningChoices::default()
        },
        ..State::default()
    };
    let mut app = App::with_source(Source::Demo, state, || {});
    app.tuning.helper = Some(vfio_assistant::ui::jobs::HelperProgram {
        path: crate::support::helper_bin().into(),
        args: Vec::new(),
    });
    let mut h = harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 60, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some()
    });
    h.get_by_label_contains(
        "Not in this capture: /sys/bus/pci/devices/0000:0b:00.0/driver_override",
    );
    assert!(
        h.state()
            .state
            .tuning
            .off
            .iter()
            .any(|id| id == "vfio-bind"),
        "{:?}",
        h.state().state.tuning.off
    );
    h.get_by_label("Apply to this captured host's files")
        .click();
    wait_for(&mut h, 60, |a| {
        !a.tuning.is_running() && a.tuning.ended.is_some() && !a.is_busy()
    });
    let lines = h.state().tuning.lines.clone();
    assert!(
        lines
            .iter()
            .any(|l| matches!(l.progress(), Some(Progress::Done { .. }))),
        "{lines:?}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| matches!(l, Heard::Reply(HelperReply::Error { .. }))
                || matches!(l.progress(), Some(Progress::Failed { .. }))),
        "{lines:?}"
    );
    h.get_by_label_contains("Applied (");
}

#[test]
fn the_demo_overview_counts_what_could_not_be_looked_at() {
    // The VM's card chosen: the next step is to create the VM.
    let state = State {
        vm_gpu: Some("0000:0b:00.0".into()),
        ..State::default()
    };
    let mut h = harness(
        App::with_source(Source::Demo, state, || {}),
        [1280.0, 1600.0],
    );
    wait_for(&mut h, 60, |a| a.snapshot.is_some());
    h.get_by_label("Create the VM");
    h.get_by_label_contains("checks could not look (they show as unknown)");
    assert!(
        h.query_by_label_contains("Nothing on the host stands in the way")
            .is_none()
    );
    assert!(
        h.query_by_label_contains("nothing on the host stands in the way")
            .is_none()
    );
}
