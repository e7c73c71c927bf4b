//! The Tuning page plans once per request, not once per frame: on the demo,
//! frames drawn with the same choices make no new plan, a changed choice
//! makes one. Also prints the page's frame time with the plan kept and
//! with it made again every frame (as the page did before), for the notes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{harness, wait_for};
use std::time::Instant;
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State, TuningChoices};

#[test]
fn the_tuning_page_plans_once_per_request() {
    let state = State {
        page: Page::Tuning,
        tuning: TuningChoices {
            gpus: vec!["0000:0b:00.0".into()],
            reserve_hugepages: true,
            ..TuningChoices::default()
        },
        ..State::default()
    };
    let mut state = state;
    state.board.set_vcpus(4);
    let mut h = harness(
        App::with_source(Source::Demo, state, || {}),
        [1280.0, 2400.0],
    );
    wait_for(&mut h, 60, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some() && !a.is_busy()
    });
    let made = h.state().tuning.plans_made.get();
    assert!(made >= 1, "the page planned");
    const FRAMES: usize = 40;
    let mut kept = Vec::new();
    for _ in 0..FRAMES {
        let start = Instant::now();
        h.step();
        kept.push(start.elapsed());
    }
    assert_eq!(
        h.state().tuning.plans_made.get(),
        made,
        "{FRAMES} frames with the same choices made no new plan"
    );
    // A choice changed: one plan for it, then none again.
    h.state_mut().state.tuning.hugepages_1g = true;
    for _ in 0..5 {
        h.step();
    }
    assert_eq!(h.state().tuning.plans_made.get(), made + 1);
    // As before: a plan every frame.
    let mut every = Vec::new();
    for _ in 0..FRAMES {
        h.state().tuning.forget_plan();
        let start = Instant::now();
        h.step();
        every.push(start.elapsed());
    }
    assert_eq!(h.state().tuning.plans_made.get(), made + 1 + FRAMES);
    let median = |mut v: Vec<std::time::Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    eprintln!(
        "Tuning page on the demo, median frame: plan kept {:?}, planned every frame {:?}",
        median(kept),
        median(every)
    );
}
