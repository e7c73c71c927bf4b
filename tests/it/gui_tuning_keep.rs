//! The Tuning page after a boot from systemd-boot's entry tried once: the
//! journal row says the next reboot goes back to the old default, and its
//! Keep button keeps it (one more transaction, through the helper), on a
//! Debian 12 systemd-boot tree.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::boot_hosts::*;
use crate::support::gui::wait_for;
use crate::support::tuning::tuning_app;
use egui_kittest::kittest::Queryable;
use vfio_assistant::tuning::apply::Progress;
use vfio_assistant::tuning::status::Standing;

#[test]
fn the_keep_button_makes_the_entry_tried_once_the_default() {
    let dir = sdboot_host();
    let r = dir.path();
    let (first, _) = apply_once(r, &env(r));
    let ours_path = r.join(SD_OURS);
    let ours = boot_from_our_entry(r);
    let opts = entry_options(&ours);
    let app = tuning_app(r, &[]);
    let mut h = crate::support::gui::harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 30, |a| {
        !a.tuning.status.is_empty() && a.tuning.facts.is_some()
    });
    h.get_by_label_contains("This boot came up from the new entry, which is booted once");
    h.get_by_label("Keep it as the default").click();
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
    assert!(!ours_path.exists(), "the copy is gone");
    let entry = std::fs::read_to_string(r.join(SD_ENTRY)).unwrap();
    for t in opts
        .split_whitespace()
        .filter(|t| t.starts_with("vfio") || t.starts_with("iommu") || t.starts_with("isolcpus"))
    {
        assert!(entry.split_whitespace().any(|w| w == t), "{t}: {entry}");
    }
    let st = h.state().tuning.status.clone();
    assert_eq!(st[0].id, first.id);
    assert_eq!(
        (st[0].tried_once.as_deref(), st[1].standing),
        (None, Standing::WaitingForReboot)
    );
    assert!(
        h.query_by_label("Keep it as the default").is_none(),
        "kept: no button"
    );
    // Its way back is the default entry's, as the helper planned the keep:
    // not the words of the entry booted once the page's own plan has.
    h.get_by_label_contains(
        "Reboot for the boot changes. The parameters go into the default entry itself",
    );
}

/// The Overview after that boot: the next step is to keep it (ahead of any
/// advice), and its button opens the Tuning page with the keep planned.
#[test]
fn the_overview_says_keep_it_first() {
    let dir = sdboot_host();
    let r = dir.path();
    apply_once(r, &env(r));
    boot_from_our_entry(r);
    let mut app = tuning_app(r, &[]);
    app.state.page = vfio_assistant::ui::state::Page::Overview;
    let mut h = crate::support::gui::harness(app, [1280.0, 900.0]);
    wait_for(&mut h, 30, |a| a.snapshot.is_some() && !a.is_busy());
    h.get_by_label_contains("fix first: The tuned boot entry is booted once only");
    h.get_by_label("Fix on the Tuning page").click();
    wait_for(&mut h, 30, |a| {
        a.tuning.facts.is_some() && !a.tuning.status.is_empty() && !a.is_busy()
    });
    h.get_by_label_contains("Kernel parameters: keep iommu=pt");
    h.get_by_label("Keep it as the default");
}
