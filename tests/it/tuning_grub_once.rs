//! GRUB tries the new setup once (issue 40): on a Debian 12 host with
//! grub-reboot, the kernel command line goes into a menu entry of ours (a
//! script in /etc/grub.d running 10_linux with the parameters) booted once;
//! the default entries stay the old setup. A boot that comes up with them
//! is kept by the same request (the drop-in, our script gone); a boot that
//! did not come up is said, and the next boot is the old setup with nothing
//! to undo. Where GRUB cannot write its environment block (btrfs), the
//! default entries get the parameters as before, and the plan says why.
//! The stand-ins (tests/fixtures/standins) run the script for real: its
//! 10_linux call, its sed, grub-reboot's next_entry.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::boot_hosts::*;
use crate::support::hosts::put;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Progress, apply, undo};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::model::{Plan, Request, Verify};
use vfio_assistant::tuning::plan::plan;
use vfio_assistant::tuning::status::{NextBoot, Standing, status};

/// The GRUB host with grub-reboot, Debian's 10_linux (the stand-in's) and
/// an ext4 root.
fn once_host() -> tempfile::TempDir {
    let dir = grub_host();
    let r = dir.path();
    for t in ["grub-reboot", "grub-mkconfig", "grub-editenv"] {
        put(r, &format!("usr/sbin/{t}"), "");
        std::fs::set_permissions(
            r.join("usr/sbin").join(t),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    let ten = r.join("etc/grub.d/10_linux");
    std::fs::create_dir_all(ten.parent().unwrap()).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/standins/grub.d/10_linux"),
        &ten,
    )
    .unwrap();
    put(
        r,
        "proc/mounts",
        "/dev/nvme0n1p2 / ext4 rw,relatime 0 0\nproc /proc proc rw 0 0\n",
    );
    dir
}

fn plan_of(r: &Path, req: &Request) -> Plan {
    let root = HostRoot::at(r);
    plan(&scan(&root).unwrap(), &gather(&root), req).unwrap()
}

fn cmdline_change(p: &Plan) -> &vfio_assistant::tuning::model::Change {
    p.changes.iter().find(|c| c.id == "cmdline").unwrap()
}

fn tokens_of(c: &vfio_assistant::tuning::model::Change) -> Vec<String> {
    c.verify
        .iter()
        .find_map(|v| match v {
            Verify::MenuEntryHas { tokens, .. } | Verify::BootEntriesHave { tokens, .. } => {
                Some(tokens.clone())
            }
            _ => None,
        })
        .unwrap()
}

/// A boot: a new boot id, and the command line GRUB gave it.
fn reboot(r: &Path, n: u32, cmdline: &str) {
    put(r, "proc/sys/kernel/random/boot_id", &format!("b00t-{n}\n"));
    put(r, "proc/cmdline", &format!("{cmdline}\n"));
    // Our entry's IDs: vfio-pci takes the card first.
    if cmdline.contains("vfio_pci.ids=") {
        card_taken_by_vfio(r);
    }
}

/// The kernel line of the grub.cfg entry with this title prefix.
fn linux_of(cfg: &str, title: &str) -> String {
    let mut inside = false;
    for l in cfg.lines() {
        let t = l.trim();
        if t.starts_with("menuentry ") {
            inside = t.contains(&format!("'{title}"));
        } else if inside && t.starts_with("linux") {
            return t.to_string();
        }
    }
    String::new()
}

#[test]
fn grub_boots_the_new_setup_once_and_keeps_it_after_a_good_boot() {
    let dir = once_host();
    let r = dir.path();
    let e = env(r);
    let p = plan_of(r, &request());
    let c = cmdline_change(&p);
    assert!(c.title.contains("tried once"), "{}", c.title);
    assert!(c.boots_once());
    let toks = tokens_of(c);
    assert!(
        toks.iter().any(|t| t.starts_with("vfio_pci.ids=")),
        "{toks:?}"
    );
    assert!(
        p.boot.recovery.contains("power the machine off and on"),
        "{}",
        p.boot.recovery
    );

    let o = apply(
        &e,
        &gather(&HostRoot::at(r)),
        &p,
        &request(),
        &mut |_: Progress| {},
    )
    .unwrap();
    assert_eq!(o.state, EntryState::Applied, "{o:?}");
    let cfg = std::fs::read_to_string(r.join("boot/grub/grub.cfg")).unwrap();
    let ours = linux_of(&cfg, "VFIO Assistant");
    let default = linux_of(&cfg, "Debian GNU/Linux");
    for t in &toks {
        assert!(
            ours.split_whitespace().any(|w| w == t),
            "{t} in ours: {cfg}"
        );
        assert!(
            !default.split_whitespace().any(|w| w == t),
            "{t} not in the default entry: {cfg}"
        );
    }
    assert!(
        cfg.contains("$menuentry_id_option 'vfio-assistant'"),
        "{cfg}"
    );
    assert_eq!(
        cfg.matches("menuentry 'VFIO Assistant").count(),
        1,
        "one entry of ours: {cfg}"
    );
    let env_block = std::fs::read_to_string(r.join("boot/grub/grubenv")).unwrap();
    assert!(
        env_block.contains("next_entry=vfio-assistant"),
        "{env_block}"
    );
    let mode = std::fs::metadata(r.join("etc/grub.d/42_vfio-assistant"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);

    // It came up from our entry with every parameter: keep is offered.
    reboot(
        r,
        2,
        &format!(
            "BOOT_IMAGE=/boot/vmlinuz-{REL} root=UUID=test ro quiet {}",
            toks.join(" ")
        ),
    );
    let st = status(&e);
    let s = st.last().unwrap();
    assert_eq!(s.standing, Standing::TookEffect, "{s:?}");
    assert_eq!(s.next_boot, Some(NextBoot::Old), "{s:?}");
    let keep = s.keep.clone().expect("the keep is offered");
    let kp = plan_of(r, &keep);
    let kc = cmdline_change(&kp);
    assert!(kc.title.contains("keep"), "{}", kc.title);
    // The keep writes the default entries: its way back is theirs, not
    // the words of an entry booted once (the window said those after Keep).
    assert!(
        !kp.boot.recovery.contains("booted once") && kp.boot.recovery.contains("(recovery mode)"),
        "{}",
        kp.boot.recovery
    );
    assert!(
        kc.files
            .iter()
            .any(|f| f.path == "/etc/grub.d/42_vfio-assistant" && f.after.is_none())
    );
    let k = apply(
        &e,
        &gather(&HostRoot::at(r)),
        &kp,
        &keep,
        &mut |_: Progress| {},
    )
    .unwrap();
    assert_eq!(k.state, EntryState::Applied, "{k:?}");
    let cfg = std::fs::read_to_string(r.join("boot/grub/grub.cfg")).unwrap();
    assert!(!cfg.contains("VFIO Assistant"), "our entry gone: {cfg}");
    let default = linux_of(&cfg, "Debian GNU/Linux");
    assert!(
        toks.iter()
            .all(|t| default.split_whitespace().any(|w| w == t)),
        "{cfg}"
    );
    let st = status(&e);
    assert!(st.iter().all(|s| s.tried_once.is_none()), "{st:?}");
    assert!(st.iter().all(|s| s.drifted.is_empty()), "{st:?}");

    // Undo both, newest first, each checked (the boot files no longer hold
    // what it added: our entry tried once, back with the keep's undo, is not
    // a default entry): the tree as it was.
    for id in [&k.id, &o.id] {
        let u = undo(&e, id, false, &mut |_| {}).unwrap();
        assert_eq!(u.state, EntryState::Undone, "{u:?}");
        assert!(u.failure.is_none(), "{u:?}");
    }
    let st = status(&e);
    assert!(st.iter().all(|s| s.leftovers.is_empty()), "{st:?}");
    let cfg = std::fs::read_to_string(r.join("boot/grub/grub.cfg")).unwrap();
    assert!(
        !cfg.contains("VFIO Assistant") && !cfg.contains("vfio_pci.ids"),
        "{cfg}"
    );
    assert!(!r.join("etc/grub.d/42_vfio-assistant").exists());
    let env_block = std::fs::read_to_string(r.join("boot/grub/grubenv")).unwrap_or_default();
    assert!(
        !env_block.contains("next_entry=vfio-assistant"),
        "{env_block}"
    );
}

#[test]
fn a_tried_boot_that_did_not_come_up_leaves_the_old_setup_and_says_so() {
    let dir = once_host();
    let r = dir.path();
    let e = env(r);
    let p = plan_of(r, &request());
    let o = apply(
        &e,
        &gather(&HostRoot::at(r)),
        &p,
        &request(),
        &mut |_: Progress| {},
    )
    .unwrap();
    assert_eq!(o.state, EntryState::Applied);
    // The user powered off from a black screen; GRUB started the default.
    reboot(
        r,
        2,
        &format!("BOOT_IMAGE=/boot/vmlinuz-{REL} root=UUID=test ro quiet"),
    );
    let st = status(&e);
    let s = st.last().unwrap();
    assert_eq!(s.standing, Standing::DidNotTake, "{s:?}");
    assert_eq!(s.next_boot, Some(NextBoot::Old));
    assert!(
        s.tried_once
            .as_deref()
            .is_some_and(|t| t.contains("did not come up")),
        "{s:?}"
    );
    assert!(s.keep.is_none());
    // The default entries never had the parameters.
    let cfg = std::fs::read_to_string(r.join("boot/grub/grub.cfg")).unwrap();
    assert!(
        !linux_of(&cfg, "Debian GNU/Linux").contains("vfio_pci.ids"),
        "{cfg}"
    );
}

#[test]
fn where_grub_cannot_write_its_environment_the_default_entries_get_them() {
    let dir = once_host();
    let r = dir.path();
    put(
        r,
        "proc/mounts",
        "/dev/nvme0n1p2 / btrfs rw,relatime,subvol=/@ 0 0\n",
    );
    let p = plan_of(r, &request());
    let c = cmdline_change(&p);
    assert!(!c.boots_once(), "{}", c.title);
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("btrfs") && n.contains("Not booted once")),
        "{:?}",
        c.notes
    );
    assert!(
        c.verify
            .iter()
            .any(|v| matches!(v, Verify::BootEntriesHave { .. }))
    );
}
