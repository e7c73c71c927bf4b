//! The Tuning page through the accessibility tree (egui_kittest), on a
//! temporary root built from a real host: the plan with its diffs and
//! values, Apply with the helper run directly (no pkexec: a captured host is
//! tuned inside its tree) changing the files and showing each step, and
//! Undo restoring them byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::wait_for;
use crate::support::tuning::{differ, runtime_host, tree, tuning_app};
use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use vfio_assistant::tuning::apply::Progress;

#[test]
fn plan_apply_and_undo_from_the_page() {
    let dir = runtime_host();
    let before = tree(dir.path());
    let app = tuning_app(dir.path(), &[]);
    let mut h = crate::support::gui::harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 30, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some()
    });
    // The plan: grouped, each with why and its exact steps.
    h.get_by_label("Now");
    h.get_by_label("After a reboot");
    h.get_by_label_contains("Transparent hugepages: always -> madvise");
    h.get_by_label_contains("vfio-pci takes 0000:0b:00.0");
    // One at a time: each one opened moves the ones below it.
    let n = h.get_all_by_label("What changes exactly").count();
    for i in 0..n {
        h.get_all_by_label("What changes exactly")
            .nth(i)
            .unwrap()
            .click();
        h.run();
    }
    h.get_by_label_contains("/sys/kernel/mm/transparent_hugepage/enabled: always -> madvise");
    h.get_by_label_contains(
        "or in a terminal: sudo vfio-assistant tune apply --gpu 0000:0b:00.0 --vcpus 4",
    );
    // Switch the boot change off, apply the rest.
    h.run();
    h.get_by_label_contains("vfio-pci takes 0000:0b:00.0")
        .click();
    h.run();
    assert_eq!(h.state().state.tuning.off, vec!["vfio-boot".to_string()]);
    h.get_by_label("Apply to this captured host's files")
        .click();
    wait_for(&mut h, 60, |a| {
        !a.tuning.is_running()
            && a.tuning.ended.is_some()
            && !a.is_busy()
            && a.tuning.facts.is_some()
    });
    let lines = h.state().tuning.lines.clone();
    assert!(
        lines
            .iter()
            .any(|l| matches!(l.progress(), Some(Progress::Done { .. }))),
        "{lines:?}"
    );
    h.get_by_label_contains("ok thp: /sys/kernel/mm/transparent_hugepage/enabled = madvise");
    h.get_by_label_contains("Applied (");
    let after = tree(dir.path());
    let changed = differ(&before, &after);
    assert!(
        changed.iter().any(|p| p.contains("transparent_hugepage")),
        "{changed:?}"
    );
    assert!(
        !dir.path()
            .join("etc/modprobe.d/vfio-assistant.conf")
            .exists(),
        "the switched-off change stayed off"
    );
    // The journal shows it; Undo puts everything back.
    wait_for(&mut h, 30, |a| !a.tuning.status.is_empty());
    h.get_by_label("Undo").click();
    wait_for(&mut h, 60, |a| {
        !a.tuning.is_running()
            && a.tuning.ended.is_some()
            && !a.is_busy()
            && a.tuning.facts.is_some()
    });
    h.get_by_label_contains("Undone: every file and value is back.");
    assert_eq!(differ(&before, &tree(dir.path())), Vec::<String>::new());
}

/// Dynamic isolation from the page: a VM name typed in plans the libvirt
/// hook, and the terminal line names it; on a host without systemd the page
/// says why it cannot, and plans nothing.
#[test]
fn the_isolation_hook_from_the_page() {
    let dir = runtime_host();
    let app = tuning_app(dir.path(), &[]);
    let mut h = crate::support::gui::harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 30, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some()
    });
    // The VM's vCPUs without pins on the board: the planner's, said.
    h.get_by_label_contains("no pins on the CPU page's board yet");
    // Isolation while the VM runs is the default: its name typed in.
    assert!(!h.state().state.tuning.boot_isolation);
    h.get_by_role_and_label(Role::TextInput, "VM name").click();
    h.run();
    h.get_by_role_and_label(Role::TextInput, "VM name")
        .type_text("win11");
    h.run();
    assert_eq!(h.state().state.tuning.isolate_vm, "win11");
    h.get_by_label_contains("Cannot plan: the isolation hook: it needs systemd");
    // The same tree as a systemd host (Debian 12 runs it).
    std::fs::create_dir_all(dir.path().join("run/systemd/system")).unwrap();
    let mut app = tuning_app(dir.path(), &[]);
    app.state.tuning.isolate_vm = "win11".into();
    let mut h = crate::support::gui::harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 30, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some()
    });
    h.get_by_label_contains("only while 'win11' runs (libvirt hook)");
    h.get_by_label_contains("--isolate-vm win11");
}
