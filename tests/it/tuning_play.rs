//! The host's side of a usable VM, on Debian 12's real qemu.conf
//! (libvirt-daemon-system 9.0, tests/fixtures/tuning/debian12): Looking
//! Glass's shared memory for the desktop user and QEMU, the kvmfr module
//! where it is installed (manual steps where not), and QEMU running as the
//! desktop user for the sound server — applied with the stand-in tools,
//! undone byte for byte; the desktop user is the one who asked.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::tuning::{differ, tree, tuning_host};
use std::path::{Path, PathBuf};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Env, apply, undo};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::model::Request;
use vfio_assistant::tuning::plan::{PlanError, plan};

fn standins() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/standins")
}

fn host(kvmfr_installed: bool) -> tempfile::TempDir {
    let dir = tuning_host();
    let r = dir.path();
    let put = |rel: &str, text: &str| crate::support::hosts::put(r, rel, text);
    put(
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nlibvirt-qemu:x:64055:993:Libvirt Qemu,,,:/var/lib/libvirt:/usr/sbin/nologin\nanna:x:1000:1000:Anna,,,:/home/anna:/bin/bash\n",
    );
    let dep = if kvmfr_installed {
        "kernel/drivers/vfio/pci/vfio-pci.ko:\nupdates/dkms/kvmfr.ko.xz:\n"
    } else {
        "kernel/drivers/vfio/pci/vfio-pci.ko:\n"
    };
    put("lib/modules/6.1.0-18-amd64/modules.dep", dep);
    dir
}

fn request() -> Request {
    Request {
        looking_glass_mib: Some(64),
        kvmfr: true,
        qemu_as_user: true,
        desktop_user: Some("anna".into()),
        ..Request::default()
    }
}

fn env(r: &Path) -> Env {
    let mut e = Env::new(HostRoot::at(r), None, true);
    e.tool_dir = Some(standins());
    e
}

#[test]
fn looking_glass_and_sound_are_set_up_and_undone() {
    let dir = host(true);
    let r = dir.path();
    let original = tree(r);
    let root = HostRoot::at(r);
    let p = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    let ids: Vec<String> = p.changes.iter().map(|c| c.id.to_string()).collect();
    assert!(
        ids.iter().any(|i| i == "kvmfr") && ids.iter().any(|i| i == "qemu-conf"),
        "{ids:?}"
    );
    let o = apply(&env(r), &gather(&root), &p, &request(), &mut |_| {}).unwrap();
    assert_eq!(o.state, EntryState::Applied, "{o:?}");
    let read = |rel: &str| std::fs::read_to_string(r.join(rel)).unwrap();
    assert!(read("etc/modprobe.d/kvmfr.conf").contains("options kvmfr static_size_mb=64"));
    assert!(
        read("etc/modules-load.d/kvmfr.conf")
            .lines()
            .any(|l| l == "kvmfr")
    );
    assert!(read("etc/udev/rules.d/99-kvmfr.rules").contains("OWNER=\"anna\", GROUP=\"kvm\""));
    // qemu.conf: every line of Debian's file kept, two settings added.
    let conf = read("etc/libvirt/qemu.conf");
    let orig = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tuning/debian12/etc/libvirt/qemu.conf"),
    )
    .unwrap();
    assert!(conf.starts_with(&orig), "lines of the original changed");
    assert!(conf.contains("user = \"anna\""), "{conf}");
    for d in ["/dev/null", "/dev/kvm", "/dev/urandom", "/dev/kvmfr0"] {
        assert!(
            conf[orig.len()..].contains(&format!("\"{d}\"")),
            "{d}: {conf}"
        );
    }
    // The same request again: nothing.
    let again = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    let left: Vec<String> = again.changes.iter().map(|c| c.id.to_string()).collect();
    assert!(
        !left.iter().any(|i| i == "kvmfr") && !left.iter().any(|i| i == "qemu-conf"),
        "{left:?}"
    );
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None);
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
}

#[test]
fn without_the_module_kvmfr_is_a_manual_step_and_shm_gets_its_rule() {
    let dir = host(false);
    let root = HostRoot::at(dir.path());
    let p = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    assert!(!p.changes.iter().any(|c| c.id == "kvmfr"));
    let m = p.manual.iter().find(|m| m.id == "kvmfr").unwrap();
    assert!(m.steps.iter().any(|s| s.contains("dkms")), "{m:?}");
    let shm = Request {
        kvmfr: false,
        ..request()
    };
    let p = plan(&scan(&root).unwrap(), &gather(&root), &shm).unwrap();
    let c = p
        .changes
        .iter()
        .find(|c| c.id == "looking-glass-shm")
        .unwrap();
    assert_eq!(
        c.files[0].after.as_deref().unwrap().lines().last(),
        Some("f /dev/shm/looking-glass 0660 anna kvm -")
    );
}

#[test]
fn only_a_person_of_this_host_is_the_desktop_user() {
    let dir = host(true);
    let root = HostRoot::at(dir.path());
    for who in ["mallory", "root", "libvirt-qemu", "anna\nuser = \"root\""] {
        let req = Request {
            desktop_user: Some(who.into()),
            ..request()
        };
        let e = plan(&scan(&root).unwrap(), &gather(&root), &req).unwrap_err();
        assert!(matches!(e, PlanError::User(_)), "{who}: {e}");
    }
}

#[test]
fn under_pkexec_the_user_who_asked_is_the_desktop_user() {
    let dir = host(true);
    let env = vfio_assistant::helper::HelperEnv {
        root: HostRoot::at(dir.path()),
        journal: None,
        fail_at: None,
        pause_at: None,
        asking_uid: Some(1000),
        through_sudo: false,
    };
    let req = vfio_assistant::helper::HelperRequest::Apply {
        request: Box::new(Request {
            desktop_user: Some("mallory".into()),
            ..request()
        }),
    };
    let mut lines = Vec::new();
    let code = vfio_assistant::helper::serve(&env, &req, &mut |l| lines.push(l.to_line()));
    assert_eq!(code, 0, "{lines:#?}");
    let conf = std::fs::read_to_string(dir.path().join("etc/libvirt/qemu.conf")).unwrap();
    assert!(
        conf.contains("user = \"anna\"") && !conf.contains("mallory"),
        "{lines:#?}"
    );
}

/// QEMU running as the desktop user is its own choice (issue 41): Looking
/// Glass's kvmfr alone changes only qemu.conf's device list, never `user =`;
/// asked for, the change's title names it first and what it hands over.
#[test]
fn qemu_runs_as_the_user_only_when_asked_by_name() {
    let dir = host(true);
    let root = HostRoot::at(dir.path());
    let kvmfr_only = Request {
        qemu_as_user: false,
        ..request()
    };
    let p = plan(&scan(&root).unwrap(), &gather(&root), &kvmfr_only).unwrap();
    let c = p.changes.iter().find(|c| c.id == "qemu-conf").unwrap();
    let after = c.files[0].after.as_deref().unwrap();
    assert!(!after.lines().any(|l| l.starts_with("user")), "{after}");
    assert!(!c.title.contains("QEMU runs as"), "{}", c.title);
    let p = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    let c = p.changes.iter().find(|c| c.id == "qemu-conf").unwrap();
    assert!(
        c.title.starts_with(
            "libvirt's qemu.conf: QEMU runs as anna: every VM of the system libvirt, and the disk images libvirt hands to QEMU, become anna's"
        ),
        "{}",
        c.title
    );
}

/// Through sudo for a user (the sudoers line), the helper gives neither
/// QEMU running as that user nor `undo --force`, and changes nothing.
#[test]
fn through_sudo_qemu_as_the_user_and_force_are_refused() {
    let dir = host(true);
    let before = tree(dir.path());
    let env = vfio_assistant::helper::HelperEnv {
        root: HostRoot::at(dir.path()),
        journal: None,
        fail_at: None,
        pause_at: None,
        asking_uid: Some(1000),
        through_sudo: true,
    };
    for (req, want) in [
        (
            vfio_assistant::helper::HelperRequest::Apply {
                request: Box::new(request()),
            },
            "QEMU running as you is not given through sudo",
        ),
        (
            vfio_assistant::helper::HelperRequest::Undo {
                id: "1700000000000".into(),
                force: true,
            },
            "undo --force is not given through sudo",
        ),
    ] {
        let mut lines = Vec::new();
        let code = vfio_assistant::helper::serve(&env, &req, &mut |l| lines.push(l.to_line()));
        assert_eq!(code, 2, "{lines:#?}");
        assert!(lines.concat().contains(want), "{lines:#?}");
    }
    // Without QEMU as the user, the same request goes through sudo.
    let req = vfio_assistant::helper::HelperRequest::Apply {
        request: Box::new(Request {
            qemu_as_user: false,
            ..request()
        }),
    };
    let mut lines = Vec::new();
    assert_eq!(
        vfio_assistant::helper::serve(&env, &req, &mut |l| lines.push(l.to_line())),
        0,
        "{lines:#?}"
    );
    assert!(!differ(&before, &tree(dir.path())).is_empty());
}

/// The CLI's question before an apply names it too.
#[test]
fn the_prompt_names_qemu_running_as_the_user() {
    let dir = host(true);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["tune", "apply", "--root"])
        .arg(dir.path())
        .args([
            "--looking-glass-mib",
            "64",
            "--qemu-as-me",
            "--user",
            "anna",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("Apply these changes? QEMU runs as anna: every VM of the system libvirt"),
        "{err}"
    );
    assert_eq!(o.status.code(), Some(2), "nothing applied: {err}");
}
