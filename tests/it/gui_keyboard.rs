//! The app by keyboard alone: on every page of the demo, Tab walks the focus
//! through every enabled button (the page tabs, Rescan, each page's own),
//! the focused one is drawn with egui's focus outline, and Enter presses it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{harness, wait_for};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use std::collections::BTreeSet;
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

fn demo(page: Page) -> Harness<'static, App> {
    let state = State {
        page,
        ..State::default()
    };
    let mut h = harness(
        App::with_source(Source::Demo, state, || {}),
        [1280.0, 800.0],
    );
    wait_for(&mut h, 60, |a| {
        a.snapshot.is_some() && !a.is_scanning() && !a.is_busy()
    });
    h
}

/// The labels of the enabled buttons now on screen.
fn buttons(h: &Harness<'static, App>) -> BTreeSet<String> {
    h.query_all_by_role(Role::Button)
        .filter(|n| !n.accesskit_node().is_disabled())
        .filter_map(|n| n.accesskit_node().label())
        .filter(|l| !l.is_empty())
        .collect()
}

fn focused(h: &Harness<'static, App>) -> Option<String> {
    h.query_all_by_role(Role::Button)
        .find(|n| n.is_focused())
        .and_then(|n| n.accesskit_node().label())
}

#[test]
fn tab_reaches_every_button_on_every_page() {
    for page in Page::all() {
        let mut h = demo(page);
        let want = buttons(&h);
        assert!(!want.is_empty(), "{page:?}: no buttons");
        let mut seen = BTreeSet::new();
        // Generously more presses than widgets: focus wraps around.
        for _ in 0..400 {
            h.key_press(egui::Key::Tab);
            h.run();
            if let Some(l) = focused(&h) {
                seen.insert(l);
            }
            if want.is_subset(&seen) {
                break;
            }
        }
        let missing: Vec<&String> = want.difference(&seen).collect();
        assert!(
            missing.is_empty(),
            "{page:?}: Tab never reaches {missing:?}"
        );
    }
}

#[test]
fn enter_presses_the_focused_button_and_focus_is_drawn() {
    let mut h = demo(Page::Overview);
    // The demo host has two cards: the Overview asks which is the VM's.
    // Tab to the first, Enter picks it; then the step is to create the VM.
    let mut on_pick = false;
    for _ in 0..200 {
        h.key_press(egui::Key::Tab);
        h.run();
        if focused(&h).is_some_and(|f| f.starts_with("Use the") && f.contains("1080 Ti")) {
            on_pick = true;
            break;
        }
    }
    assert!(
        on_pick,
        "Tab never reached the 1080 Ti's \"Use the … for the VM\""
    );
    h.key_press(egui::Key::Enter);
    h.run();
    assert_eq!(h.state().state.vm_gpu.as_deref(), Some("0000:0b:00.0"));
    let mut on_create = false;
    for _ in 0..200 {
        h.key_press(egui::Key::Tab);
        h.run();
        if focused(&h).as_deref() == Some("Create the VM") {
            on_create = true;
            break;
        }
    }
    assert!(on_create, "Tab never reached \"Create the VM\"");
    // egui draws a focused widget as "active" (Style::interact): its
    // outline must be there and differ from a resting button's.
    let style = h.ctx.global_style();
    let (focus, rest) = (
        style.visuals.widgets.active.bg_stroke,
        style.visuals.widgets.inactive.bg_stroke,
    );
    assert!(
        focus.width >= 1.0 && focus != rest,
        "focus outline {focus:?} vs {rest:?}"
    );
    h.key_press(egui::Key::Enter);
    h.run();
    assert_eq!(h.state().state.page, Page::NewVm);
}
