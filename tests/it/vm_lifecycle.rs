//! The walk-through ends in a VM that starts. `domain new` for this machine
//! (live host scan, the users' preflight with its trial start) writes a
//! domain that `domain define` takes and `domain start` starts on
//! qemu:///system — on any machine with a usable /dev/kvm, nested or not,
//! AMD or Intel (required in CI). A start that fails says why, from
//! libvirt's error and the QEMU log. `domain define` over an existing domain
//! updates it (the same UUID), and shows nothing to do when nothing changed.
//! Only domains these tests created are touched (`vfio-assistant-test-…`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::vm::{Cleanup, kvm_guest_possible, make_test_disk, system, test_name};
use std::process::{Command, Output};
use vfio_assistant::host::scan;
use vfio_assistant::libvirt::{DomainState, Hypervisor, Libvirt, TEST_URI};
use vfio_assistant::report::lifecycle::{commit_define, plan_define};
use vfio_assistant::report::preflight::PreflightRequest;
use vfio_assistant::sysroot::HostRoot;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn domain_new_for_this_machine_defines_and_starts_on_qemu_system() {
    let Some(hv) = system() else { return };
    if !kvm_guest_possible(1) {
        return;
    }
    let name = test_name("new");
    let _guard = Cleanup(&hv, name.clone());
    let disk = make_test_disk(&name);
    // Windows 11 (the default): UEFI, Secure Boot, SMM, TPM, NAT network —
    // whatever of it this host cannot run, the preflight adapts.
    let new = run(&[
        "domain",
        "new",
        "--name",
        &name,
        "--vcpus",
        "1",
        "--memory",
        "256M",
        "--disk",
        disk.to_str().unwrap(),
        "--no-pin",
        "--no-spice",
    ]);
    let err = text(&new.stderr);
    assert_eq!(new.status.code(), Some(0), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("new.xml");
    std::fs::write(&file, &new.stdout).unwrap();
    let f = file.to_str().unwrap();
    let v = run(&["domain", "validate", f]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v.stdout));
    let d = run(&["domain", "define", "--yes", f]);
    assert!(d.status.success(), "{}{}", text(&d.stdout), text(&d.stderr));
    assert!(
        text(&d.stdout).contains(&format!("Defined '{name}'")),
        "{}",
        text(&d.stdout)
    );
    let uuid = hv
        .domains()
        .unwrap()
        .into_iter()
        .find(|x| x.name == name)
        .unwrap()
        .uuid;
    // Again: the same domain, nothing to do (no "already exists with uuid").
    let again = run(&["domain", "define", "--yes", f]);
    assert!(
        again.status.success(),
        "{}{}",
        text(&again.stdout),
        text(&again.stderr)
    );
    assert!(
        text(&again.stdout).contains("nothing to do"),
        "{}",
        text(&again.stdout)
    );
    let s = run(&["domain", "start", &name]);
    assert_eq!(
        s.status.code(),
        Some(0),
        "{}{}",
        text(&s.stdout),
        text(&s.stderr)
    );
    assert_eq!(hv.state(&name).unwrap(), DomainState::Running);
    let reply = hv.qmp(&name, r#"{"execute":"query-status"}"#).unwrap();
    assert!(reply.contains("\"running\""), "{reply}");
    let x = run(&["domain", "destroy", &name]);
    assert!(x.status.success(), "{}", text(&x.stderr));
    assert_eq!(hv.state(&name).unwrap(), DomainState::Shutoff);
    let after = hv
        .domains()
        .unwrap()
        .into_iter()
        .find(|x| x.name == name)
        .unwrap()
        .uuid;
    assert_eq!(uuid, after);
}

#[test]
fn a_start_that_fails_says_why() {
    let Some(hv) = system() else { return };
    if !kvm_guest_possible(1) {
        return;
    }
    let name = test_name("fail");
    let _guard = Cleanup(&hv, name.clone());
    let xml = crate::support::vm::bootable_domain(&hv, &name, 1, &[]);
    // The disk goes away after the define: libvirt refuses the start.
    hv.define(&xml).unwrap();
    std::fs::remove_file(crate::support::vm::test_disk_path(&name)).unwrap();
    let s = run(&["domain", "start", &name]);
    assert_eq!(s.status.code(), Some(1), "{}", text(&s.stdout));
    let out = text(&s.stdout);
    assert!(out.contains("did not start"), "{out}");
    assert!(out.contains("does not exist"), "{out}");
    let j = run(&["domain", "start", &name, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(v["started"], false);
    assert_eq!(v["causes"][0]["id"], "file.missing", "{v}");
}

#[test]
fn define_over_an_existing_domain_keeps_its_uuid_and_shows_the_change() {
    let hv = Libvirt::open(TEST_URI).unwrap();
    let root = HostRoot::at(env!("CARGO_MANIFEST_DIR"));
    let dir = crate::support::hosts::base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let xml = "<domain type='test'>\n  <name>upd</name>\n  <memory unit='MiB'>512</memory>\n  <vcpu>1</vcpu>\n  <os>\n    <type arch='x86_64'>hvm</type>\n  </os>\n  <devices>\n    <disk type='file' device='disk'>\n      <source file='/var/lib/libvirt/images/upd.qcow2'/>\n      <target dev='vda' bus='virtio'/>\n    </disk>\n  </devices>\n</domain>\n";
    let req = PreflightRequest::default();
    let first = plan_define(&root, &snap, &hv, xml, &req).unwrap();
    assert!(first.existing.is_none());
    commit_define(&hv, &first).unwrap();
    let uuid = hv
        .domains()
        .unwrap()
        .into_iter()
        .find(|d| d.name == "upd")
        .unwrap()
        .uuid;
    let same = plan_define(&root, &snap, &hv, xml, &req).unwrap();
    assert!(same.existing.is_some());
    assert!(same.diff.is_empty(), "{}", same.diff);
    let more = xml.replace(">512<", ">1024<");
    let upd = plan_define(&root, &snap, &hv, &more, &req).unwrap();
    assert!(upd.kept.iter().any(|k| k.path == "uuid"), "{:?}", upd.kept);
    assert!(
        upd.diff.contains("+  <memory unit='KiB'>1048576</memory>"),
        "{}",
        upd.diff
    );
    assert_eq!(
        upd.diff
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .count(),
        2,
        "{}",
        upd.diff
    );
    commit_define(&hv, &upd).unwrap();
    let after = hv
        .domains()
        .unwrap()
        .into_iter()
        .find(|d| d.name == "upd")
        .unwrap()
        .uuid;
    assert_eq!(uuid, after);
    hv.undefine("upd").unwrap();
}
