//! The app on another machine over SSH (a real sshd on 127.0.0.1, the
//! "remote" a captured root there): its snapshot fetched and scanned, the
//! host picker, and the Tuning page's Apply run by the helper there,
//! changing that root and read back from a new snapshot.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{wait_for, wgpu_harness};
use crate::support::sshd::sshd;
use crate::support::tuning::{differ, runtime_host, tree};
use egui_kittest::SnapshotOptions;
use egui_kittest::kittest::Queryable;
use vfio_assistant::remote::{SshTarget, Via};
use vfio_assistant::tuning::apply::Progress;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State, TuningChoices};

#[test]
fn another_machine_is_read_shown_and_tuned_from_the_app() {
    let s = sshd();
    let host = runtime_host();
    let before = tree(host.path());
    let mut target = SshTarget::parse(&s.target(Some(host.path()))).unwrap();
    target.via = Via {
        ssh: Some(s.ssh("client", &s.known_hosts())),
        program: Some(env!("CARGO_BIN_EXE_vfio-assistant").into()),
        helper: Some(crate::support::helper_bin().into()),
    };
    let mut state = State {
        page: Page::Overview,
        tuning: TuningChoices {
            gpus: vec!["0000:0b:00.0".into()],
            reserve_hugepages: true,
            ..TuningChoices::default()
        },
        ..State::default()
    };
    state.board.set_vcpus(4);
    state.vm.memory_gib = 1;
    let app = App::with_remote(target, state, || {});
    let mut h = wgpu_harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 90, |a| {
        (a.snapshot.is_some() || a.error.is_some()) && !a.is_scanning() && !a.is_busy()
    });
    assert!(h.state().error.is_none(), "{:?}", h.state().error);
    // The label is the place, whatever the port this run got.
    h.get_by_label_contains("(over SSH)");
    // Tune that machine from its Tuning page.
    h.state_mut().state.page = Page::Tuning;
    wait_for(&mut h, 60, |a| a.tuning.facts.is_some() && !a.is_busy());
    h.get_by_label("Apply to this captured host's files")
        .click();
    wait_for(&mut h, 120, |a| {
        !a.tuning.is_running()
            && a.tuning.ended.is_some()
            && !a.is_scanning()
            && !a.is_busy()
            && a.tuning.facts.is_some()
            && !a.tuning.status.is_empty()
    });
    let lines = h.state().tuning.lines.clone();
    assert!(
        lines
            .iter()
            .any(|l| matches!(l.progress(), Some(Progress::Done { .. }))),
        "{lines:?}"
    );
    let changed = differ(&before, &tree(host.path()));
    assert!(
        changed.iter().any(|p| p.contains("vfio-assistant")),
        "the helper there wrote that root: {changed:?}"
    );
    // The journal read back from the new snapshot: Undo, there too.
    h.get_by_label("Undo").click();
    wait_for(&mut h, 120, |a| {
        !a.tuning.is_running() && a.tuning.ended.is_some() && !a.is_scanning() && !a.is_busy()
    });
    let left: Vec<String> = differ(&before, &tree(host.path()))
        .into_iter()
        .filter(|p| !p.contains("var/lib/vfio-assistant"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
    // The Overview of that machine with the host picker open.
    h.state_mut().state.page = Page::Overview;
    h.run();
    h.get_by_label_contains("Host: ").click();
    h.run();
    h.get_by_label("Another machine over SSH");
    h.get_by_label("Connect");
    h.state_mut().set_source_label("anna@server (over SSH)");
    h.state_mut().picker.ssh = "ssh://anna@server".into();
    h.run();
    let options = SnapshotOptions::new()
        .output_path(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots"))
        .threshold(0.6)
        .max_failed_pixels(400);
    h.snapshot_options("remote-overview-host-picker", &options);
}

/// The host picker by keyboard, as a user types: a click into its SSH
/// field keeps the menu open, the typed address goes into the field, Tab
/// walks to its Connect, Enter connects (to a test sshd); then a snapshot's
/// path typed into its own field and Enter opens it.
#[test]
fn the_host_picker_is_typed_into_and_connects_and_opens() {
    use egui::accesskit::Role;
    use egui_kittest::kittest::NodeT;
    let s = sshd();
    let host = runtime_host();
    let app = App::with_source(vfio_assistant::ui::Source::Demo, State::default(), || {});
    let mut h = crate::support::gui::harness(app, [1280.0, 800.0]);
    h.state_mut().picker.via = Via {
        ssh: Some(s.ssh("client", &s.known_hosts())),
        program: Some(env!("CARGO_BIN_EXE_vfio-assistant").into()),
        helper: Some(crate::support::helper_bin().into()),
    };
    wait_for(&mut h, 60, |a| a.snapshot.is_some() && !a.is_scanning());
    let field = |h: &egui_kittest::Harness<'static, App>, label: &str| {
        h.get_all_by_role(Role::TextInput)
            .find(|n| n.accesskit_node().label().as_deref() == Some(label))
            .map(|n| n.rect().center())
            .unwrap()
    };
    h.get_by_label_contains("Host: ").click();
    h.run();
    let at = field(&h, "Another machine over SSH");
    h.get_all_by_role(Role::TextInput)
        .find(|n| n.rect().center() == at)
        .unwrap()
        .click();
    h.run();
    // Still open after the click into the field, and the field has the focus.
    h.get_by_label("Connect");
    let address = s.target(Some(host.path()));
    h.get_all_by_role(Role::TextInput)
        .find(|n| n.rect().center() == at)
        .unwrap()
        .type_text(&address);
    h.run();
    assert_eq!(h.state().picker.ssh, address, "typed into the field");
    h.key_press(egui::Key::Tab);
    h.run();
    let focused = h
        .get_all_by_role(Role::Button)
        .find(|n| n.is_focused())
        .and_then(|n| n.accesskit_node().label());
    assert_eq!(focused.as_deref(), Some("Connect"), "Tab walks the menu");
    // Back into the field; Enter there connects.
    h.get_all_by_role(Role::TextInput)
        .find(|n| n.rect().center() == at)
        .unwrap()
        .click();
    h.run();
    h.key_press(egui::Key::Enter);
    h.step();
    wait_for(&mut h, 90, |a| {
        (a.snapshot.is_some() || a.error.is_some()) && !a.is_scanning() && !a.is_fetching()
    });
    assert!(h.state().error.is_none(), "{:?}", h.state().error);
    assert!(
        h.state().state_key().contains("ssh:"),
        "connected over SSH: {}",
        h.state().state_key()
    );
    h.get_by_label_contains("(over SSH)");
    // A snapshot (a captured root), by its field and Enter.
    h.get_by_label_contains("Host: ").click();
    h.run();
    let at = field(&h, "A snapshot (file or folder)");
    let node = h
        .get_all_by_role(Role::TextInput)
        .find(|n| n.rect().center() == at)
        .unwrap();
    node.click();
    h.run();
    let path = host.path().display().to_string();
    h.get_all_by_role(Role::TextInput)
        .find(|n| n.rect().center() == at)
        .unwrap()
        .type_text(&path);
    h.run();
    assert_eq!(h.state().picker.snapshot, path);
    h.key_press(egui::Key::Enter);
    h.step();
    wait_for(&mut h, 60, |a| a.snapshot.is_some() && !a.is_scanning());
    assert!(h.state().error.is_none(), "{:?}", h.state().error);
    assert_eq!(
        h.state().state_key(),
        vfio_assistant::ui::state::state_key(&format!("root:{path}"))
    );
}
