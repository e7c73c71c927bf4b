//! The app opened again on a journal that holds an unfinished transaction.
//! Interrupted (a power cut, a killed helper): the Tuning page says so at
//! its top — the changes done, the one it stopped in, the ones not started —
//! with the button that restores the host, and the Overview makes it the
//! next step. Still running (the app was closed during an apply; the helper,
//! which ignores the hangup, goes on): both say to wait, nothing offers to
//! restore or apply, an undo is refused, and the page follows the journal
//! by itself until the transaction ends.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::wait_for;
use crate::support::tuning::{runtime_host, tuning_app};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use std::path::Path;
use std::time::{Duration, Instant};
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Env, apply};
use vfio_assistant::tuning::status::{EntryStatus, status};
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::Page;

/// An apply on `root` cut in its fourth change (as a power cut leaves it).
fn cut_apply(root: &Path) -> EntryStatus {
    let host = HostRoot::at(root);
    let req = vfio_assistant::tuning::model::Request {
        gpus: vec!["0b:00.0".parse().unwrap()],
        vcpus: Some(4),
        memory_mib: Some(1024),
        ..Default::default()
    };
    let facts = vfio_assistant::tuning::facts::gather(&host);
    let p = vfio_assistant::tuning::plan::plan(
        &vfio_assistant::host::scan(&host).unwrap(),
        &facts,
        &req,
    )
    .unwrap();
    let mut e = Env::new(host.clone(), None, false);
    e.crash_at = Some(3);
    apply(&e, &facts, &p, &req, &mut |_| {}).unwrap();
    let mut st = status(&Env::new(host, None, false));
    assert_eq!(st.len(), 1);
    st.remove(0)
}

/// The process that wrote the entry, alive in the root's /proc: started
/// (100 ticks after the boot) before the entry was made.
fn writer_alive(root: &Path, id: &str) {
    let pid = id.split('-').nth(1).unwrap().trim_start_matches('0');
    let put = |rel: &str, text: &str| crate::support::hosts::put(root, rel, text);
    put("proc/stat", "cpu  1 2 3 4\nbtime 1000\n");
    put(
        &format!("proc/{pid}/stat"),
        &format!(
            "{pid} (vfio-assistant-) S 1 {pid} {pid} 0 -1 4194560 157 0 0 0 0 0 0 0 20 0 1 0 100 8441856 512 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 3 0 0 0 0 0\n"
        ),
    );
}

fn app_on(root: &Path, page: Page) -> Harness<'static, App> {
    let mut app = tuning_app(root, &[]);
    app.state.page = page;
    let mut h = crate::support::gui::harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 60, |a| {
        a.snapshot.is_some()
            && !a.is_busy()
            && (page != Page::Tuning || !a.tuning.status.is_empty())
    });
    h
}

fn says(h: &Harness<'static, App>, words: &str) -> bool {
    h.query_all_by_label_contains(words).next().is_some()
}

#[track_caller]
fn assert_says(h: &Harness<'static, App>, words: &str) {
    assert!(says(h, words), "the page does not say {words:?}");
}

#[test]
fn an_interrupted_apply_is_said_with_where_it_stopped_and_the_way_back() {
    let dir = runtime_host();
    let entry = cut_apply(dir.path());
    let (done, rest) = entry.changes.split_at(entry.completed);
    let (stopped, not_started) = rest.split_first().unwrap();
    let joined = vfio_assistant::tuning::kinds::ChangeId::joined;

    let h = app_on(dir.path(), Page::Tuning);
    assert_says(&h, &format!("A tuning was interrupted ({})", entry.id));
    assert_says(&h, &format!("Changes done: {}", joined(done)));
    assert_says(&h, &format!("Stopped in: {stopped}"));
    assert_says(&h, &format!("Not started: {}", joined(not_started)));
    assert_says(
        &h,
        &format!(
            "Interrupted while applying (a power cut or a killed process), after {} of {} changes; it was in '{stopped}'",
            entry.completed,
            entry.changes.len()
        ),
    );
    assert_says(&h, "the host can be put back in one step");
    assert_eq!(h.get_all_by_label("Restore the host").count(), 1);

    let h = app_on(dir.path(), Page::Overview);
    assert_says(&h, &format!("A host tuning was interrupted ({})", entry.id));
    assert_says(&h, &format!("interrupted in = {stopped}"));
    assert!(h.get_all_by_label("Restore the host").count() >= 1);
}

#[test]
fn an_apply_still_running_after_the_app_was_closed_is_waited_for() {
    let dir = runtime_host();
    let entry = cut_apply(dir.path());
    writer_alive(dir.path(), &entry.id);
    let pid = std::process::id();
    let stopped = &entry.changes[entry.completed];

    let mut h = app_on(dir.path(), Page::Tuning);
    assert_says(&h, &format!("A tuning is still running ({})", entry.id));
    assert_says(&h, &format!("Now in: {stopped}"));
    assert_says(&h, &format!("Still being applied by process {pid}"));
    assert_says(&h, "Waiting for the tuning still running (above) to end");
    assert_eq!(h.query_all_by_label("Restore the host").count(), 0);
    assert!(
        h.get_by_label("Apply to this captured host's files")
            .accesskit_node()
            .is_disabled()
    );
    // The helper's way back refuses it too while it runs.
    let env = Env::new(HostRoot::at(dir.path()), None, false);
    let refused = vfio_assistant::tuning::undo::undo(&env, &entry.id, false, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!("still being applied by process {pid}")),
        "{refused}"
    );

    // It ends (here: its process is gone without finishing, so it was cut
    // after all): the page reads the journal again by itself.
    std::fs::remove_file(dir.path().join(format!("proc/{pid}/stat"))).unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end && !says(&h, "A tuning was interrupted") {
        h.step();
        std::thread::sleep(Duration::from_millis(50));
    }
    h.run();
    assert_says(&h, &format!("A tuning was interrupted ({})", entry.id));
    assert_eq!(h.get_all_by_label("Restore the host").count(), 1);

    writer_alive(dir.path(), &entry.id);
    let h = app_on(dir.path(), Page::Overview);
    assert_says(
        &h,
        &format!("A host tuning is still running ({})", entry.id),
    );
    assert_says(&h, "Wait for it to end");
    assert_eq!(h.query_all_by_label("Restore the host").count(), 0);
}
