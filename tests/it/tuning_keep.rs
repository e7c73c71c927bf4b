//! Keeping what systemd-boot booted once. The click on systemd-boot writes
//! the parameters into an entry (or a unified kernel image) of its own,
//! booted once; after a boot that came up from it, the same request keeps
//! it: the default entry gets the parameters and the copy goes (or the
//! default image is built the same way), as one more transaction. Before
//! that, `tune status` says the next reboot goes back to the old default;
//! the first transaction cannot be undone from under the keep.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::boot_hosts::*;
use crate::support::hosts::put;
use crate::support::tuning::{differ, tree};
use crate::tuning_uki::{ESP, REL as UKI_REL, debian13_uki};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{apply, undo};
use vfio_assistant::tuning::boot::{Loader, cmdline_change};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::kinds::{ChangeId, Kind};
use vfio_assistant::tuning::model::Verify;
use vfio_assistant::tuning::plan::plan;
use vfio_assistant::tuning::status::{NextBoot, Standing, status};

#[test]
fn the_entry_that_booted_once_is_kept_as_one_more_transaction() {
    let dir = sdboot_host();
    let r = dir.path();
    let original = tree(r);
    let proc_before = std::fs::read_to_string(r.join("proc/cmdline")).unwrap();
    let entry_before = std::fs::read_to_string(r.join(SD_ENTRY)).unwrap();
    let (first, lines) = apply_once(r, &env(r));
    assert_eq!(first.state, EntryState::Applied, "{first:?} {lines:#?}");
    let st = status(&env(r));
    assert_eq!(st[0].standing, Standing::WaitingForReboot);
    assert_eq!(
        (st[0].tried_once.as_deref(), st[0].keep.as_ref()),
        (None, None)
    );
    // Before the boot there is nothing to keep.
    let root = HostRoot::at(r);
    let again = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    assert!(
        again.changes.iter().all(|c| c.id.kind != Kind::Cmdline),
        "{:?}",
        again.changes
    );

    // The one boot, from our entry: its options are the kernel's command line.
    let ours = boot_from_our_entry(r);
    let st = status(&env(r));
    assert_eq!(st[0].standing, Standing::TookEffect);
    assert_eq!(
        st[0].next_boot,
        Some(NextBoot::Old),
        "the one boot is spent"
    );
    assert!(
        st[0]
            .tried_once
            .as_deref()
            .is_some_and(|t| t.contains("next reboot starts the old default")),
        "{:?}",
        st[0].tried_once
    );
    let keep = st[0].keep.clone().expect("the request that keeps it");
    // The checks say it too, with the Tuning page's button and the command.
    let found = vfio_assistant::report::tuning::tuning_findings(&HostRoot::at(r));
    let f = found
        .iter()
        .find(|f| f.id == "tune.tried_once")
        .expect("a finding");
    assert_eq!(f.command.as_deref(), Some("sudo vfio-assistant tune keep"));
    assert!(
        matches!(&f.action, Some(vfio_assistant::finding::Action::Tune { change }) if change == "cmdline"),
        "{:?}",
        f.action
    );
    assert_eq!(keep.only, [ChangeId::of(Kind::Cmdline)]);
    assert_eq!(keep.gpus, request().gpus);

    // The keep: the default entry gets the parameters, the copy goes, no
    // command runs; checked as written.
    let p = plan(&scan(&root).unwrap(), &gather(&root), &keep).unwrap();
    assert_eq!(p.changes.len(), 1, "{:?}", p.changes);
    let c = &p.changes[0];
    assert!(c.title.contains("keep"), "{}", c.title);
    assert!(c.commands.is_empty(), "{:?}", c.commands);
    assert!(
        p.boot.recovery.contains("go into the default entry itself"),
        "not the boot-once words: {}",
        p.boot.recovery
    );
    assert_eq!(
        c.files
            .iter()
            .map(|f| (f.path.as_str(), f.after.is_some()))
            .collect::<Vec<_>>(),
        [
            (format!("/{SD_ENTRY}").as_str(), true),
            (format!("/{SD_OURS}").as_str(), false)
        ]
    );
    vfio_assistant::tuning::targets::check_change(c).expect("within the cmdline kind's allowlist");
    let mut said = Vec::new();
    let kept = apply(&env(r), &gather(&root), &p, &keep, &mut |l| said.push(l)).unwrap();
    assert_eq!(kept.state, EntryState::Applied, "{kept:?} {said:#?}");
    assert!(
        said.iter()
            .any(|l| format!("{l:?}").contains("every default boot entry holds them")),
        "the default entry was checked: {said:#?}"
    );
    assert!(!r.join(SD_OURS).exists(), "the copy is gone");
    let entry_now = std::fs::read_to_string(r.join(SD_ENTRY)).unwrap();
    let Verify::BootEntriesHave { tokens, .. } = &c.verify[0] else {
        panic!("{:?}", c.verify)
    };
    for t in tokens {
        assert!(
            entry_options(&entry_now).split_whitespace().any(|w| w == t),
            "{t}: {entry_now}"
        );
    }
    assert_eq!(
        entry_now.lines().find(|l| l.starts_with("title")),
        entry_before.lines().find(|l| l.starts_with("title")),
        "the default entry keeps its title"
    );
    // Kept: the first transaction no longer says the next boot goes back,
    // and the same request plans nothing more for the command line.
    let found = vfio_assistant::report::tuning::tuning_findings(&HostRoot::at(r));
    assert!(found.iter().all(|f| f.id != "tune.tried_once"), "{found:?}");
    let st = status(&env(r));
    assert_eq!(
        (st[0].tried_once.as_deref(), st[0].keep.as_ref()),
        (None, None)
    );
    let again = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    assert!(
        again.changes.iter().all(|c| c.id.kind != Kind::Cmdline),
        "{:?}",
        again.changes
    );

    // Undo in order: the first one is refused while the keep stands on it.
    let refused = undo(&env(r), &first.id, false, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!("undo {} first", kept.id)),
        "{refused}"
    );
    undo(&env(r), &kept.id, false, &mut |_| {}).unwrap();
    assert_eq!(
        std::fs::read_to_string(r.join(SD_ENTRY)).unwrap(),
        entry_before
    );
    assert_eq!(
        std::fs::read_to_string(r.join(SD_OURS)).unwrap(),
        ours,
        "the copy is back"
    );
    let u = undo(&env(r), &first.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None, "{u:?}");
    put(r, "proc/cmdline", &proc_before);
    put(r, "proc/sys/kernel/random/boot_id", "b00t-1\n");
    crate::support::tuning::kernel_gives_hugepages(r);
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
}

#[test]
fn a_try_that_did_not_come_up_is_said_and_not_kept() {
    let dir = sdboot_host();
    let r = dir.path();
    let (first, _) = apply_once(r, &env(r));
    assert_eq!(first.state, EntryState::Applied);
    // The next boot is the old default (the try failed, or a second reboot).
    put(r, "proc/sys/kernel/random/boot_id", "b00t-2\n");
    let st = status(&env(r));
    assert_eq!(st[0].standing, Standing::DidNotTake);
    assert_eq!(st[0].keep, None);
    assert!(
        st[0]
            .tried_once
            .as_deref()
            .is_some_and(|t| t.contains("booted once only")),
        "{:?}",
        st[0].tried_once
    );
    let root = HostRoot::at(r);
    let again = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    assert!(
        again.changes.iter().all(|c| !c.title.contains("keep")),
        "nothing is kept that did not boot: {:?}",
        again.changes.iter().map(|c| &c.title).collect::<Vec<_>>()
    );
}

/// A unified kernel image: after a boot from ours, the default image is
/// built again in place by kernel-install (kept by the journal for undo),
/// ours left beside it.
#[test]
fn the_image_that_booted_once_is_kept_by_building_the_default_the_same_way() {
    let dir = debian13_uki("uki.efi");
    let r = dir.path();
    let tokens = vec![
        "iommu=pt".to_string(),
        "vfio_pci.ids=10de:2684,10de:22ba".to_string(),
    ];
    // The default image without the IDs (the same bytes, the token blanked);
    // ours, built by the apply, with them; /etc/kernel/cmdline with both.
    let fixture = crate::uki_read::fixture("uki.efi");
    let at = fixture
        .windows(tokens[1].len())
        .position(|w| w == tokens[1].as_bytes())
        .unwrap();
    let mut default = fixture.clone();
    default[at..at + tokens[1].len()].fill(b'x');
    let default_path = format!("{ESP}/0123abcd-{UKI_REL}.efi");
    crate::tuning_uki::put(r, &default_path, &default);
    crate::tuning_uki::put(r, &format!("{ESP}/vfio-assistant-{UKI_REL}.efi"), &fixture);
    put(
        r,
        "etc/kernel/cmdline",
        "root=UUID=6d1f2c52-8a4e-4c55-9b0e-e2e0f5a0b001 ro quiet iommu=pt vfio_pci.ids=10de:2684,10de:22ba\n",
    );
    // Before a boot from it: nothing to do (ours is tried once).
    let f = gather(&HostRoot::at(r));
    assert_eq!(cmdline_change(&f, Loader::Uki, &tokens), Ok(None));
    // After: the keep.
    put(
        r,
        "proc/cmdline",
        "root=UUID=6d1f2c52-8a4e-4c55-9b0e-e2e0f5a0b001 ro quiet iommu=pt vfio_pci.ids=10de:2684,10de:22ba\n",
    );
    let f = gather(&HostRoot::at(r));
    let c = cmdline_change(&f, Loader::Uki, &tokens).unwrap().unwrap();
    assert!(c.title.contains("keep"), "{}", c.title);
    assert!(
        c.files.is_empty(),
        "/etc/kernel/cmdline has them: {:?}",
        c.files
    );
    assert_eq!(
        c.commands.iter().map(|s| s.argv()).collect::<Vec<_>>(),
        [vec![
            "kernel-install".to_string(),
            "add".into(),
            UKI_REL.into(),
            format!("/boot/vmlinuz-{UKI_REL}")
        ]]
    );
    assert_eq!(
        c.artifacts
            .iter()
            .map(|a| a.path.as_str())
            .collect::<Vec<_>>(),
        [format!("/{default_path}").as_str()],
        "the default image kept by the journal for undo"
    );
    assert_eq!(
        c.verify,
        [Verify::BootEntriesHave {
            files: vec![format!("/{default_path}")],
            tokens: vec![tokens[1].clone()]
        }]
    );
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("stays beside the default image")),
        "{:?}",
        c.notes
    );
    vfio_assistant::tuning::targets::check_change(&c).expect("within the cmdline kind's allowlist");
}

/// `tune keep` from the command line: refused with a sentence while there
/// is nothing to keep (exit 2, nothing written), then the keep itself.
#[test]
fn tune_keep_on_the_command_line() {
    let dir = sdboot_host();
    let r = dir.path();
    let keep = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
            .args(["tune", "keep", "--yes", "--json", "--root"])
            .arg(r)
            .output()
            .unwrap()
    };
    let o = keep();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(2), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("nothing to keep"),
        "{v}"
    );
    let (_, _) = apply_once(r, &env(r));
    let o = keep();
    assert_eq!(o.status.code(), Some(2), "not before the boot from it");
    boot_from_our_entry(r);
    let o = keep();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!r.join(SD_OURS).exists(), "{out}");
    let entry = std::fs::read_to_string(r.join(SD_ENTRY)).unwrap();
    assert!(entry_options(&entry).contains("vfio_pci.ids="), "{entry}");
    assert_eq!(status(&env(r)).len(), 2);
}
