//! Nothing drawn past the window's right edge: the pages scroll down, never
//! sideways, so a widget whose rect ends past the width is cut off for the
//! user. Checked at 1280 px on every page of the demo, of a real host set up
//! wrong (long device names, many findings), and on the live Monitor page
//! with its samples and a latency probe in (the right column).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{harness, wait_for};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable, by};
use std::time::{Duration, Instant};
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

const WIDTH: f32 = 1280.0;

/// Every node whose rect ends past the right edge, with its text (the
/// harness draws at 1 pixel per point, so accesskit's boxes are points).
fn past_the_edge(h: &Harness<'static, App>) -> Vec<String> {
    h.query_all(by().include_labels())
        .filter_map(|n| {
            let a = n.accesskit_node();
            let r = a.bounding_box()?;
            (r.x1 as f32 > WIDTH + 0.5 && (r.x0 as f32) < WIDTH).then(|| {
                format!(
                    "{:?} {:?} ends at x={:.0}",
                    a.role(),
                    a.label().or_else(|| a.value()).unwrap_or_default(),
                    r.x1
                )
            })
        })
        .collect()
}

fn app_on(source: Source, page: Page) -> Harness<'static, App> {
    let state = State {
        page,
        symptom: Some("stutter".into()),
        ..State::default()
    };
    let mut h = harness(App::with_source(source, state, || {}), [WIDTH, 800.0]);
    wait_for(&mut h, 60, |a| {
        a.snapshot.is_some() && !a.is_scanning() && !a.is_busy()
    });
    h
}

#[test]
fn no_page_reaches_past_the_right_edge() {
    let wrong = crate::support::hosts::bad_host();
    for source in [Source::Demo, Source::Root(wrong.path().into())] {
        for page in Page::all() {
            let h = app_on(source.clone(), page);
            let over = past_the_edge(&h);
            assert!(over.is_empty(), "{page:?} on {source:?}: {over:#?}");
        }
    }
}

#[test]
fn the_live_monitor_with_a_probe_fits() {
    let mut h = app_on(Source::Live, Page::Monitor);
    let until = |h: &mut Harness<'static, App>, secs: u64, done: &dyn Fn(&App) -> bool| {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end && !done(h.state()) {
            h.step();
            std::thread::sleep(Duration::from_millis(50));
        }
        h.run();
    };
    until(&mut h, 20, &|a| a.monitor.irq_total.len() >= 2);
    h.state_mut().state.latency_cpus = "0".into();
    h.run();
    h.get_by_label_contains("Run the probe").click();
    until(&mut h, 30, &|a| a.monitor.latency.is_some());
    assert!(
        h.state().monitor.latency.is_some(),
        "the probe did not finish"
    );
    let over = past_the_edge(&h);
    assert!(over.is_empty(), "{over:#?}");
}
