//! A change and what it needs (issue 42's window journey): where the IDs
//! vfio-pci claims at boot are on the kernel command line, the binding at
//! boot alone binds nothing. So asking for it (the Overview's "Bind it on
//! the Tuning page", `tune apply --only vfio-boot`) brings the command
//! line with it, the Tuning page keeps the two ticked together, and after
//! the reboot "took effect" means the card is on vfio-pci, not only that
//! the parameters are in /proc/cmdline.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::boot_hosts::*;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::kinds::{ChangeId, Kind};
use vfio_assistant::tuning::model::{Plan, Request};
use vfio_assistant::tuning::plan::plan;
use vfio_assistant::tuning::status::{Standing, status};

fn only_binding() -> Request {
    Request {
        only: vec![ChangeId::of(Kind::VfioBoot)],
        ..request()
    }
}

fn plan_on(dir: &std::path::Path, req: &Request) -> Plan {
    let root = HostRoot::at(dir);
    plan(&scan(&root).unwrap(), &gather(&root), req).unwrap()
}

fn ids(p: &Plan) -> Vec<String> {
    p.changes.iter().map(|c| c.id.to_string()).collect()
}

#[test]
fn asking_for_the_binding_at_boot_brings_the_command_line_it_needs() {
    let dir = sdboot_host();
    let p = plan_on(dir.path(), &only_binding());
    assert_eq!(ids(&p), ["vfio-boot", "cmdline"], "{:#?}", p.changes);
    let boot = &p.changes[0];
    assert_eq!(boot.needs, [ChangeId::of(Kind::Cmdline)]);
    // Only what the command line change carries the binding for, and the
    // request's own: the IDs are among its tokens.
    let title = &p.changes[1].title;
    assert!(title.contains("vfio_pci.ids=10de:"), "{title}");
    // The window's first ticks: the focus with its needs.
    assert_eq!(
        p.with_needs(&["vfio-boot".into()]),
        ["vfio-boot", "cmdline"]
    );
    assert_eq!(p.with_needs(&["cmdline".into()]), ["cmdline"]);
}

#[test]
fn the_tuning_page_keeps_a_change_and_its_need_ticked_together() {
    let dir = sdboot_host();
    let p = plan_on(dir.path(), &request());
    // The command line unticked by a saved state: ticked again.
    let mut off = vec!["cmdline".to_string()];
    let said = p.keep_needs(&mut off, &[]);
    assert!(off.is_empty(), "{off:?}");
    assert_eq!(said, ["cmdline ticked too: vfio-boot needs it"]);
    // The user unticks the command line: the binding goes with it.
    let mut off = vec!["cmdline".to_string()];
    let said = p.keep_needs(&mut off, &["cmdline".into()]);
    assert_eq!(off, ["cmdline", "vfio-boot"]);
    assert_eq!(
        said,
        ["vfio-boot unticked too: it does nothing without cmdline"]
    );
    // Nothing to keep: nothing changes.
    let mut off = vec!["thp".to_string()];
    assert!(p.keep_needs(&mut off, &[]).is_empty());
    assert_eq!(off, ["thp"]);
}

#[test]
fn took_effect_means_the_card_is_on_vfio_pci_after_the_reboot() {
    let dir = sdboot_host();
    let r = dir.path();
    let (o, _) = apply_once(r, &env(r));
    assert_eq!(o.state, EntryState::Applied, "{o:?}");
    let st = status(&env(r));
    assert_eq!(st[0].standing, Standing::WaitingForReboot, "{:?}", st[0]);
    assert!(st[0].unbound.is_empty(), "{:?}", st[0]);

    // The boot came up from our entry, parameters and all, but nouveau
    // took the card first (the initramfs lacked vfio-pci, say).
    boot_from_our_entry(r);
    crate::support::hosts::bind(r, "0000:0b:00.0", "nouveau");
    crate::support::hosts::bind(r, "0000:0b:00.1", "snd_hda_intel");
    let st = status(&env(r));
    let s = &st[0];
    assert!(s.pending_tokens.is_empty(), "{s:?}");
    assert_eq!(s.standing, Standing::DidNotTake, "{s:?}");
    assert_eq!(s.unbound.len(), 2, "{:?}", s.unbound);
    assert!(
        s.unbound[0]
            .starts_with("0000:0b:00.0 is on nouveau, not vfio-pci: its own driver took it first"),
        "{:?}",
        s.unbound
    );
    // And no keep is offered for a try that did not take.
    assert_eq!(s.keep, None, "{s:?}");

    // The same boot with the card on vfio-pci: it took effect.
    card_taken_by_vfio(r);
    let st = status(&env(r));
    assert_eq!(st[0].standing, Standing::TookEffect, "{:?}", st[0]);
    assert!(st[0].unbound.is_empty());
}
