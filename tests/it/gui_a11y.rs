//! Every control a user can reach has a name in the accessibility tree (what
//! AccessKit hands a screen reader, and what AT-SPI drivers such as dogtail
//! find controls by). On every page of the demo and of captured real hosts,
//! each New VM step, the host menu open, every collapsed section opened, the
//! tree is walked and every interactive node without a name is listed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{harness, wait_for};
use egui::accesskit::{Action, Role};
use egui_kittest::kittest::{AccessKitNode, NodeT, Queryable, by};
use egui_kittest::{Harness, Node};
use std::path::Path;
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};
use vfio_assistant::ui::views::wizard::STEPS;

/// Roles a user operates, whether or not egui says the node takes a click.
const CONTROLS: &[Role] = &[
    Role::Button,
    Role::DefaultButton,
    Role::CheckBox,
    Role::RadioButton,
    Role::Switch,
    Role::TextInput,
    Role::MultilineTextInput,
    Role::SearchInput,
    Role::PasswordInput,
    Role::EmailInput,
    Role::NumberInput,
    Role::ComboBox,
    Role::EditableComboBox,
    Role::SpinButton,
    Role::Slider,
    Role::Link,
    Role::MenuItem,
    Role::MenuItemCheckBox,
    Role::MenuItemRadio,
    Role::Tab,
    Role::ListItem,
    Role::TreeItem,
    Role::Row,
    Role::Cell,
];

/// The name a screen reader says: the node's label (its own, or the nodes
/// it is labelled by), or for a label the text it shows.
fn name(n: &AccessKitNode<'_>) -> String {
    let said = if n.role() == Role::Label {
        n.value()
    } else {
        n.label()
    };
    said.unwrap_or_default().trim().to_owned()
}

/// A control: a role a user operates, or any node that takes a click or
/// the keyboard's focus (egui gives such a node without a widget's info
/// the role `Unknown`: an area made clickable or draggable by hand). A
/// scroll bar is not one: it is its scroll area's part, which a screen
/// reader says by its role and position, and egui gives it no name.
fn is_control(n: &AccessKitNode<'_>) -> bool {
    let data = n.data();
    n.role() != Role::ScrollBar
        && (CONTROLS.contains(&n.role())
            || data.supports_action(Action::Click)
            || data.supports_action(Action::Focus))
}

/// Every control on screen that has no name, said with its role, its box
/// and the nearest named node before it in the tree (usually the text
/// beside it), so that the failure says where to look.
fn unnamed<'t>(within: &'t impl Queryable<'t, 't, Node<'t>>) -> Vec<String> {
    let mut before = String::new();
    let mut found = Vec::new();
    for n in within.query_all(by().include_labels()) {
        let a = n.accesskit_node();
        let said = name(&a);
        if !said.is_empty() {
            before = said.chars().take(60).collect();
        } else if !a.is_hidden() && is_control(&a) {
            let at = a.bounding_box().map_or("no box".into(), |r| {
                format!("at ({:.0},{:.0})-({:.0},{:.0})", r.x0, r.y0, r.x1, r.y1)
            });
            found.push(format!("{:?} {at} after {before:?}", a.role()));
        }
        // Disabled, and said so (AT-SPI's own state says ENABLED: a11y.rs).
        if !a.is_hidden() && is_control(&a) && a.is_disabled() && !says_unavailable(&a) {
            found.push(format!(
                "{:?} {said:?} is disabled but not said 'unavailable'",
                a.role()
            ));
        }
    }
    found
}

fn says_unavailable(a: &AccessKitNode<'_>) -> bool {
    a.description()
        .is_some_and(|d| d.starts_with("unavailable"))
}

/// Open every collapsed section, round after round (an opened one may hold
/// more), so that what is inside is walked too; none may stay shut.
fn open_all(h: &mut Harness<'static, App>) {
    let collapsed = |h: &Harness<'static, App>| {
        h.query_all(by().include_labels())
            .filter(|n| n.accesskit_node().data().is_expanded() == Some(false))
            .map(|n| n.accesskit_node().id())
            .collect::<Vec<_>>()
    };
    for _ in 0..20 {
        let shut = collapsed(h);
        if shut.is_empty() {
            return;
        }
        for id in shut {
            if let Some(n) = h
                .query_all(by().include_labels())
                .find(|n| n.accesskit_node().id() == id)
            {
                n.click_accesskit();
            }
        }
        h.run();
    }
    let left: Vec<String> = h
        .query_all(by().include_labels())
        .filter(|n| n.accesskit_node().data().is_expanded() == Some(false))
        .map(|n| name(&n.accesskit_node()))
        .collect();
    assert!(left.is_empty(), "these sections would not open: {left:?}");
}

fn settle(h: &mut Harness<'static, App>) {
    wait_for(h, 60, |a| {
        a.snapshot.is_some() && !a.is_scanning() && !a.is_busy()
    });
}

/// Walk `page` on `h` (reached through its tab in the top bar, as a user
/// does), every wizard step on the New VM page; add what is unnamed to
/// `found`, each line prefixed with `host`.
fn walk_page(h: &mut Harness<'static, App>, host: &str, page: Page, found: &mut Vec<String>) {
    h.get_by_role_and_label(Role::Button, page.title())
        .click_accesskit();
    settle(h);
    let mut check = |h: &mut Harness<'static, App>, at: String| {
        open_all(h);
        found.extend(
            unnamed(h)
                .into_iter()
                .map(|u| format!("{host} · {at}: {u}")),
        );
    };
    if page == Page::NewVm {
        for spec in STEPS {
            h.state_mut().state.wizard.step = spec.step;
            settle(h);
            check(h, format!("New VM · {}", spec.title));
        }
    } else {
        check(h, page.title().to_owned());
    }
}

/// Every page of the app on `source`, and the host menu open.
fn walk_host(source: Source, host: &str) -> Vec<String> {
    // The Troubleshoot page's symptom chosen, and the VM's 4 vCPUs on the
    // CPU page's board (its chips in the tray, to be dragged or chosen).
    let mut state = State {
        symptom: Some("stutter".into()),
        ..State::default()
    };
    state.board.set_vcpus(4);
    let mut h = harness(App::with_source(source, state, || {}), [1280.0, 800.0]);
    settle(&mut h);
    let mut found = Vec::new();
    for page in Page::all() {
        walk_page(&mut h, host, page, &mut found);
    }
    // The host menu (this machine, the demo, SSH, a snapshot).
    h.get_by_label_contains("Host: ").click_accesskit();
    h.run();
    let menu = h.get_by_role(Role::Menu);
    menu.get_by_label("Connect");
    found.extend(
        unnamed(&menu)
            .into_iter()
            .map(|u| format!("{host} · host menu: {u}")),
    );
    found
}

fn captured(rel: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    crate::support::tree::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(rel),
        dir.path(),
    );
    dir
}

fn assert_all_named(found: &[String]) {
    assert!(
        found.is_empty(),
        "{} controls without an accessible name:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn every_control_of_the_demo_is_named() {
    assert_all_named(&walk_host(Source::Demo, "demo"));
}

/// The captured hosts the other GUI tests draw: a server without GPUs, a
/// laptop with one iGPU, the Debian host the e2e run boots, a real AM5
/// desktop, a TRX40 host set up wrong, and the X570 tuning host.
#[test]
fn every_control_of_the_captured_hosts_is_named() {
    let mut found = Vec::new();
    for (rel, host) in [
        ("topology/hwloc-16em64t-4s2c2t", "server without GPUs"),
        ("topology/ghw-intel-i7-1270P", "laptop"),
        ("hosts/e2e-debian12-grub", "Debian 12 e2e host"),
    ] {
        let dir = captured(rel);
        found.extend(walk_host(Source::Root(dir.path().into()), host));
    }
    {
        use crate::support::desktops::{AM5_CARD, am5};
        let desk = am5((0x1002, 0x164e), (0x10de, 0x2786, "nvidia"), AM5_CARD);
        found.extend(walk_host(Source::Root(desk.path().into()), "AM5 desktop"));
    }
    let bad = crate::support::hosts::bad_host();
    found.extend(walk_host(
        Source::Root(bad.path().into()),
        "TRX40 set up wrong",
    ));
    let x570 = crate::support::tuning::runtime_host();
    found.extend(walk_host(Source::Root(x570.path().into()), "X570"));
    assert_all_named(&found);
}

/// The Tuning page after an apply on the X570 tuning host: the helper's
/// progress lines, the journal's entry with its Undo, as a user meets them.
#[test]
fn the_tuning_page_after_an_apply_is_named() {
    let dir = crate::support::tuning::runtime_host();
    let app = crate::support::tuning::tuning_app(dir.path(), &[]);
    let mut h = harness(app, [1280.0, 1100.0]);
    let settled = |h: &mut Harness<'static, App>| {
        wait_for(h, 60, |a| {
            a.snapshot.is_some()
                && a.tuning.facts.is_some()
                && !a.tuning.is_running()
                && !a.is_busy()
        });
    };
    settled(&mut h);
    h.get_by_label("Apply to this captured host's files")
        .click_accesskit();
    settled(&mut h);
    h.get_by_label_contains("Applied (");
    open_all(&mut h);
    let found: Vec<String> = unnamed(&h)
        .into_iter()
        .map(|u| format!("X570 · Tuning after Apply: {u}"))
        .collect();
    assert_all_named(&found);
}

/// A disabled control is said to be one: the New VM page's first step has
/// Back, which cannot go back, and the top bar's Rescan while it scans.
#[test]
fn a_disabled_control_is_said_unavailable() {
    let mut h = harness(
        App::with_source(Source::Demo, State::default(), || {}),
        [1280.0, 800.0],
    );
    settle(&mut h);
    h.get_by_role_and_label(Role::Button, Page::NewVm.title())
        .click_accesskit();
    settle(&mut h);
    h.run();
    let disabled: Vec<(String, Option<String>)> = h
        .query_all(by().include_labels())
        .map(|n| n.accesskit_node())
        .filter(|a| is_control(a) && a.is_disabled())
        .map(|a| (name(&a), a.description()))
        .collect();
    assert!(
        !disabled.is_empty(),
        "no disabled control on the first step"
    );
    for (n, d) in &disabled {
        assert!(
            d.as_deref().is_some_and(|d| d.starts_with("unavailable")),
            "{n:?}: {d:?}"
        );
    }
}
