//! The Tuning page when a step fails: the helper (run directly on a
//! temporary root, told to fail its second step with `--fail-at`, which it
//! takes only with `--root`) rolls back, and the page shows which step failed,
//! what was undone, and that nothing was applied; the tree is as it was.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::wait_for;
use crate::support::tuning::{differ, runtime_host, tree, tuning_app};
use egui_kittest::kittest::Queryable;
use vfio_assistant::tuning::apply::Progress;

#[test]
fn a_failing_step_shows_which_and_the_rollback() {
    let dir = runtime_host();
    let before = tree(dir.path());
    // The real helper, told to fail its second step (it takes --fail-at only
    // with --root, which the page adds for a captured host).
    let app = tuning_app(dir.path(), &["--fail-at", "1"]);
    let mut h = crate::support::gui::harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 30, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some()
    });
    h.get_by_label("Apply to this captured host's files")
        .click();
    wait_for(&mut h, 60, |a| {
        !a.tuning.is_running()
            && a.tuning.ended.is_some()
            && !a.is_busy()
            && a.tuning.facts.is_some()
    });
    let lines = h.state().tuning.lines.clone();
    let failed: Vec<(&String, &String)> = lines
        .iter()
        .filter_map(|l| match l.progress() {
            Some(Progress::Failed { step, why }) => Some((step, why)),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "{lines:?}");
    assert!(
        failed[0].1.contains("injected failure at step 1"),
        "{failed:?}"
    );
    // The step that failed, named; the one before it, undone; and the end.
    let step = failed[0].0;
    h.get_by_label_contains(&format!("FAILED {step}: injected failure at step 1"));
    assert!(
        lines
            .iter()
            .any(|l| matches!(l.progress(), Some(Progress::RolledBack { .. }))),
        "the first step was undone: {lines:?}"
    );
    h.get_by_label_contains("undone: ");
    h.get_by_label_contains("Nothing applied: ");
    h.get_by_label_contains("Everything before it was put back.");
    assert_eq!(differ(&before, &tree(dir.path())), Vec::<String>::new());
}

/// A power cut in the middle of an apply: the next start's Overview opens
/// on it, with the button that restores the host; one click, and the tree
/// is as it was before the apply.
#[test]
fn an_interrupted_tuning_is_the_next_step_with_its_button() {
    use vfio_assistant::sysroot::HostRoot;
    use vfio_assistant::tuning::apply::{Env, apply};
    let dir = runtime_host();
    let before = tree(dir.path());
    let root = HostRoot::at(dir.path());
    let req = vfio_assistant::tuning::model::Request {
        gpus: vec!["0b:00.0".parse().unwrap()],
        vcpus: Some(4),
        memory_mib: Some(1024),
        ..Default::default()
    };
    let facts = vfio_assistant::tuning::facts::gather(&root);
    let p = vfio_assistant::tuning::plan::plan(
        &vfio_assistant::host::scan(&root).unwrap(),
        &facts,
        &req,
    )
    .unwrap();
    let mut e = Env::new(root, None, false);
    e.crash_at = Some(3);
    apply(&e, &facts, &p, &req, &mut |_| {}).unwrap();
    assert_ne!(
        differ(&before, &tree(dir.path())),
        Vec::<String>::new(),
        "half applied"
    );
    let mut app = tuning_app(dir.path(), &[]);
    app.state.page = vfio_assistant::ui::state::Page::Overview;
    let mut h = crate::support::gui::harness(app, [1280.0, 1600.0]);
    wait_for(&mut h, 30, |a| a.snapshot.is_some() && !a.is_busy());
    assert!(
        h.get_all_by_label_contains("A host tuning was interrupted")
            .count()
            >= 1
    );
    h.get_all_by_label("Restore the host")
        .next()
        .unwrap()
        .click();
    wait_for(&mut h, 60, |a| {
        !a.tuning.is_running() && a.tuning.ended.is_some() && !a.is_busy()
    });
    assert_eq!(differ(&before, &tree(dir.path())), Vec::<String>::new());
}
