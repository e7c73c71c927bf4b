//! The Tuning page's defaults do what was asked and say the rest: the VM's
//! CPUs are isolated only while it runs unless boot-time isolation is
//! chosen (with its cost said); a binding now of the card the host's screen
//! is on is never pre-ticked; the Overview's "Bind it on the Tuning page"
//! ticks that change alone.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{harness, wait_for};
use crate::support::tuning::{tuning_app, tuning_host};
use egui_kittest::kittest::Queryable;
use vfio_assistant::ui::state::Page;

#[test]
fn boot_isolation_is_its_own_choice_with_its_cost() {
    let dir = tuning_host();
    let mut h = harness(tuning_app(dir.path(), &[]), [1280.0, 2400.0]);
    wait_for(&mut h, 30, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some()
    });
    // By default nothing isolates the VM's CPUs at boot.
    assert!(h.query_by_label_contains("isolcpus=").is_none());
    assert!(h.query_by_label_contains("nohz_full=").is_none());
    h.get_by_label_contains("--no-isolcpus");
    h.get_by_label("at boot, for good").click();
    h.run();
    assert!(h.state().state.tuning.boot_isolation);
    h.get_by_label_contains("Costs: the host never runs its own work on");
    assert!(
        !h.get_all_by_label_contains("isolcpus=managed_irq")
            .collect::<Vec<_>>()
            .is_empty()
    );
    assert!(h.query_by_label_contains("--no-isolcpus").is_none());
}

#[test]
fn a_binding_that_takes_the_screen_is_not_ticked() {
    let dir = tuning_host();
    // A monitor plugged into the VM's card: the host shows a screen there.
    let r = dir.path();
    crate::support::hosts::bind(r, "0000:0b:00.0", "nvidia");
    crate::support::hosts::bind(r, "0000:0b:00.1", "snd_hda_intel");
    let card = "devices/pci0000:00/0000:0b:00.0/drm/card1";
    crate::support::hosts::put(r, &format!("sys/{card}/card1-DP-1/status"), "connected\n");
    std::fs::create_dir_all(r.join("sys/class/drm")).unwrap();
    std::os::unix::fs::symlink(format!("../../{card}"), r.join("sys/class/drm/card1")).unwrap();
    std::os::unix::fs::symlink(
        format!("../../{card}/card1-DP-1"),
        r.join("sys/class/drm/card1-DP-1"),
    )
    .unwrap();
    let mut h = harness(tuning_app(r, &[]), [1280.0, 2400.0]);
    wait_for(&mut h, 30, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some()
    });
    h.get_by_label_contains("The host's screen is on 0000:0b:00.0 now");
    h.get_by_label_contains("Bind 0000:0b:00.0");
    let off = &h.state().state.tuning.off;
    assert!(off.iter().any(|id| id == "vfio-bind"), "{off:?}");
}

#[test]
fn bind_it_on_the_tuning_page_ticks_that_change_and_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    crate::support::tree::copy_tree(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hosts/e2e-debian12-grub"),
        dir.path(),
    );
    let app = vfio_assistant::ui::app::App::with_source(
        vfio_assistant::ui::Source::Root(dir.path().into()),
        vfio_assistant::ui::state::State::default(),
        || {},
    );
    let mut h = harness(app, [1280.0, 1600.0]);
    wait_for(&mut h, 60, |a| a.snapshot.is_some());
    h.run_steps(3);
    h.get_by_label("Bind it on the Tuning page").click();
    wait_for(&mut h, 30, |a| a.tuning.facts.is_some());
    assert_eq!(h.state().state.page, Page::Tuning);
    let off = h.state().state.tuning.off.clone();
    assert!(!off.contains(&"vfio-boot".to_string()), "{off:?}");
    // The IDs vfio-pci claims at boot are on the kernel command line
    // (GRUB's entry booted once): the binding alone would bind nothing
    // (the desktop's window journey met that), so that change comes too.
    assert!(!off.contains(&"cmdline".to_string()), "{off:?}");
    h.get_by_label_contains("needs [cmdline]");
    assert!(!off.is_empty(), "the other changes are not ticked");
    for other in ["thp", "persist"] {
        if h.query_by_label_contains(&format!("[{other}]")).is_some() {
            assert!(off.contains(&other.to_string()), "{other} ticked: {off:?}");
        }
    }
}
