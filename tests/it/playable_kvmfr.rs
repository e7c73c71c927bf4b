//! The host's side of kvmfr (issue 31) on Debian 12's real files: where
//! AppArmor confines QEMU (libvirt 9.0's abstraction, tests/fixtures/tuning/
//! debian12-apparmor) the guide's `/dev/kvmfr0 rw,` goes into the local
//! abstraction, the site's own lines kept, undone byte for byte; nowhere
//! else. A kvmfr loaded now with another size is unloaded and loaded again
//! when nobody holds it, left with a note when someone does; the journal
//! of such an apply is undone like any other.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::tuning::{differ, distro, tree, tuning_host};
use std::path::{Path, PathBuf};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Env, apply, undo};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::model::{Change, Plan, Request};
use vfio_assistant::tuning::plan::plan;

const LOCAL: &str = "etc/apparmor.d/local/abstractions/libvirt-qemu";

fn standins() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/standins")
}

/// Debian 12 with the kvmfr module installed for the running kernel and
/// the desktop user anna; with libvirt's AppArmor abstraction or without.
fn host(apparmor: bool) -> tempfile::TempDir {
    let dir = tuning_host();
    let r = dir.path();
    let put = |rel: &str, text: &str| crate::support::hosts::put(r, rel, text);
    put(
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nlibvirt-qemu:x:64055:993:Libvirt Qemu,,,:/var/lib/libvirt:/usr/sbin/nologin\nanna:x:1000:1000:Anna,,,:/home/anna:/bin/bash\n",
    );
    put(
        "lib/modules/6.1.0-18-amd64/modules.dep",
        "kernel/drivers/vfio/pci/vfio-pci.ko:\nupdates/dkms/kvmfr.ko.xz:\n",
    );
    if apparmor {
        distro(r, "debian12-apparmor");
    }
    dir
}

fn request(mib: u64) -> Request {
    Request {
        looking_glass_mib: Some(mib),
        kvmfr: true,
        desktop_user: Some("anna".into()),
        ..Request::default()
    }
}

fn env(r: &Path) -> Env {
    let mut e = Env::new(HostRoot::at(r), None, true);
    e.tool_dir = Some(standins());
    e
}

fn planned(r: &Path, mib: u64) -> Plan {
    let root = HostRoot::at(r);
    plan(&scan(&root).unwrap(), &gather(&root), &request(mib)).unwrap()
}

fn kvmfr_change(p: &Plan) -> Option<&Change> {
    p.changes.iter().find(|c| c.id == "kvmfr")
}

fn argvs(c: &Change) -> Vec<String> {
    c.commands.iter().map(|s| s.argv().join(" ")).collect()
}

#[test]
fn where_apparmor_confines_qemu_kvmfr0_is_allowed_and_the_rest_kept() {
    let dir = host(true);
    let r = dir.path();
    // The site's own additions (an old input-linux recipe's line).
    let site = "# Site-specific additions\n/dev/input/by-id/usb-K-event-kbd rw,\n";
    crate::support::hosts::put(r, LOCAL, site);
    let original = tree(r);
    let p = planned(r, 64);
    let c = kvmfr_change(&p).unwrap();
    let f = c
        .files
        .iter()
        .find(|f| f.path == format!("/{LOCAL}"))
        .unwrap_or_else(|| panic!("no AppArmor line planned: {c:#?}"));
    assert_eq!(f.before.as_deref(), Some(site));
    assert!(c.why.contains("AppArmor"), "{}", c.why);
    let root = HostRoot::at(r);
    let o = apply(&env(r), &gather(&root), &p, &request(64), &mut |_| {}).unwrap();
    assert_eq!(o.state, EntryState::Applied, "{o:?}");
    let now = std::fs::read_to_string(r.join(LOCAL)).unwrap();
    assert!(now.starts_with(site), "the site's lines changed:\n{now}");
    assert_eq!(
        now.lines()
            .filter(|l| l.trim() == "/dev/kvmfr0 rw,")
            .count(),
        1,
        "{now}"
    );
    // Planned again: nothing left to do for kvmfr.
    assert!(kvmfr_change(&planned(r, 64)).is_none());
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None);
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
}

/// A fresh Debian 12: the local file is there, empty (the package's
/// postinst makes it); it gets the line, and undo gives the empty file back.
#[test]
fn the_fresh_empty_local_abstraction_gets_the_line() {
    let dir = host(true);
    let r = dir.path();
    let original = tree(r);
    let p = planned(r, 32);
    let root = HostRoot::at(r);
    let o = apply(&env(r), &gather(&root), &p, &request(32), &mut |_| {}).unwrap();
    assert_eq!(o.state, EntryState::Applied, "{o:?}");
    let now = std::fs::read_to_string(r.join(LOCAL)).unwrap();
    assert!(now.ends_with("/dev/kvmfr0 rw,\n"), "{now}");
    undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
}

#[test]
fn without_apparmor_no_apparmor_file() {
    let dir = host(false);
    let p = planned(dir.path(), 64);
    let c = kvmfr_change(&p).unwrap();
    assert!(
        c.files.iter().all(|f| !f.path.contains("apparmor")),
        "{c:#?}"
    );
}

fn loaded(r: &Path, refcnt: &str, configured_mib: u64) {
    crate::support::hosts::put(r, "sys/module/kvmfr/refcnt", refcnt);
    crate::support::hosts::put(
        r,
        "etc/modprobe.d/kvmfr.conf",
        &format!("options kvmfr static_size_mb={configured_mib}\n"),
    );
}

/// Loaded with 32 MiB, nobody holding it, 64 asked: unloaded, then loaded
/// with the new size (the stand-in modprobe records the order); the
/// journal with the unload is believed by undo.
#[test]
fn a_loaded_kvmfr_of_another_size_is_reloaded_when_nobody_holds_it() {
    let dir = host(false);
    let r = dir.path();
    loaded(r, "0\n", 32);
    let original = tree(r);
    let p = planned(r, 64);
    let c = kvmfr_change(&p).unwrap();
    assert_eq!(argvs(c), ["modprobe -r kvmfr", "modprobe kvmfr"], "{c:#?}");
    assert!(
        c.notes.iter().any(|n| n.contains("32 MiB")),
        "{:?}",
        c.notes
    );
    let root = HostRoot::at(r);
    let o = apply(&env(r), &gather(&root), &p, &request(64), &mut |_| {}).unwrap();
    assert_eq!(o.state, EntryState::Applied, "{o:?}");
    let log = std::fs::read_to_string(r.join("var/log/standins.log")).unwrap();
    let rm = log
        .find("modprobe: -r kvmfr")
        .unwrap_or_else(|| panic!("{log}"));
    let load = log
        .rfind("modprobe: kvmfr")
        .unwrap_or_else(|| panic!("{log}"));
    assert!(rm < load, "{log}");
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None);
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
}

/// In use (a VM or the client has /dev/kvmfr0 open): the kernel would
/// refuse the unload and the apply would roll back, so none is planned;
/// the note says when the new size takes effect and how.
#[test]
fn a_kvmfr_in_use_is_not_unloaded_and_the_note_says_so() {
    let dir = host(false);
    let r = dir.path();
    loaded(r, "2\n", 32);
    let p = planned(r, 64);
    let c = kvmfr_change(&p).unwrap();
    assert_eq!(argvs(c), ["modprobe kvmfr"], "{c:#?}");
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("in use") && n.contains("modprobe -r kvmfr")),
        "{:?}",
        c.notes
    );
}

/// Loaded with the size asked (only the udev rule differs), or not loaded
/// at all: no unload.
#[test]
fn no_reload_when_the_size_is_right_or_nothing_is_loaded() {
    let dir = host(false);
    let r = dir.path();
    loaded(r, "0\n", 64);
    let c = kvmfr_change(&planned(r, 64)).cloned().unwrap();
    assert_eq!(argvs(&c), ["modprobe kvmfr"], "{c:#?}");
    let dir = host(false);
    let c = kvmfr_change(&planned(dir.path(), 64)).cloned().unwrap();
    assert_eq!(argvs(&c), ["modprobe kvmfr"], "{c:#?}");
}
