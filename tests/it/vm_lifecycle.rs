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
use vfio_assistant::domain::playable::{ClientSetup, SpiceAt};
use vfio_assistant::domain::xml::Document;
use vfio_assistant::host::scan;
use vfio_assistant::libvirt::{DomainState, Hypervisor, TEST_URI};
use vfio_assistant::report::lifecycle::{commit_define, plan_define};
use vfio_assistant::report::preflight::PreflightRequest;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant_libvirt::Libvirt;

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

/// The "Use it" parts on a real start: Looking Glass's shared memory (an
/// ivshmem-plain device QEMU really maps), sound on the backend this host
/// offers with Looking Glass (SPICE), the SPICE server the Looking Glass
/// client is told about answering on that address (127.0.0.1 and the port
/// libvirt gave it), and a USB device by IDs that is not
/// plugged in (startupPolicy='optional': the VM starts without it). The
/// evdev sources need real input devices, which this machine has not: they
/// are validated and defined here, and started on the real-host run's guests
/// (scripts/e2e, step `vm`).
#[test]
fn a_playable_domain_defines_and_starts_with_shared_memory_sound_and_optional_usb() {
    let Some(hv) = system() else { return };
    if !kvm_guest_possible(1) {
        return;
    }
    let name = test_name("play");
    let _guard = Cleanup(&hv, name.clone());
    let disk = make_test_disk(&name);
    let mut play = vec!["--looking-glass", "1920x1080", "--sound", "auto"];
    // libvirt looks for an optional USB device in /sys/bus/usb, and refuses
    // the start on a host that has no USB at all (as this CI machine):
    // only where there is one.
    let usb = std::path::Path::new("/sys/bus/usb/devices").is_dir();
    if usb {
        play.extend(["--usb", "dead:beef"]);
    }
    let mut args = vec![
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
    ];
    args.extend(play);
    let new = run(&args);
    assert_eq!(new.status.code(), Some(0), "{}", text(&new.stderr));
    let told = text(&new.stderr);
    assert!(
        told.contains("looking-glass-client -f /dev/shm/looking-glass spice:host=127.0.0.1"),
        "{told}"
    );
    let xml = text(&new.stdout);
    for want in [
        "<listen type='address' address='127.0.0.1'/>",
        "<channel type='spicevmc'>",
        "<shmem name='looking-glass'>",
        "<model type='ivshmem-plain'/>",
        "<size unit='M'>32</size>",
        "type='spice'",
        "<sound model='ich9'>",
        "<memballoon model='none'/>",
    ] {
        assert!(xml.contains(want), "{want} missing:\n{xml}");
    }
    assert_eq!(xml.contains("startupPolicy='optional'"), usb, "{xml}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("play.xml");
    std::fs::write(&file, &xml).unwrap();
    let f = file.to_str().unwrap();
    let v = run(&["domain", "validate", f]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v.stdout));
    let d = run(&["domain", "define", "--yes", f]);
    assert!(d.status.success(), "{}{}", text(&d.stdout), text(&d.stderr));
    let s = run(&["domain", "start", &name]);
    assert_eq!(
        s.status.code(),
        Some(0),
        "{}{}",
        text(&s.stdout),
        text(&s.stderr)
    );
    assert_eq!(hv.state(&name).unwrap(), DomainState::Running);
    // QEMU has the shared memory device and the sound card on its PCI bus.
    // query-pci lists what sits behind a root port (the shared memory) only
    // once the guest's firmware has numbered the bridges: right after the
    // start, on a loaded machine, it may not have yet (seen: the full suite
    // beside two TCG guests). So ask until it has, for at most a minute.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let pci = loop {
        let pci = hv.qmp(&name, r#"{"execute":"query-pci"}"#).unwrap();
        let pci: String = pci.chars().filter(|c| !c.is_whitespace()).collect();
        if pci.contains("\"class\":1280") || std::time::Instant::now() > deadline {
            break pci;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert!(
        pci.contains("\"class\":1280"),
        "no shared memory (RAM controller, class 0x0500) on the bus: {pci}"
    );
    assert!(
        pci.contains("\"class\":1027"),
        "no HD audio (class 0x0403) on the bus: {pci}"
    );
    // The client's SPICE: what the running domain says (libvirt writes the
    // port it gave), told the way the client takes it, and answering there.
    let live = hv.domain_xml_live(&name).unwrap();
    let setup = ClientSetup::from_domain(&Document::parse(&live).unwrap())
        .unwrap_or_else(|| panic!("no Looking Glass in the running domain:\n{live}"));
    let Some(SpiceAt::Tcp {
        host,
        port: Some(port),
    }) = &setup.spice
    else {
        panic!("no SPICE address and port in the running domain: {setup:?}\n{live}");
    };
    assert_eq!(host, "127.0.0.1", "{live}");
    assert!(
        setup
            .command()
            .contains(&format!("spice:host=127.0.0.1 spice:port={port}")),
        "{}",
        setup.command()
    );
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], *port)),
        std::time::Duration::from_secs(5),
    )
    .unwrap_or_else(|e| panic!("SPICE does not answer on 127.0.0.1:{port}: {e}\n{live}"));
    let x = run(&["domain", "destroy", &name]);
    assert!(x.status.success(), "{}", text(&x.stderr));
}

/// evdev keyboard and mouse with a toggle, migrated from nothing, defined on
/// qemu:///system (libvirt checks the element; the start needs the devices).
#[test]
fn evdev_input_defines_on_qemu_system() {
    let Some(hv) = system() else { return };
    let name = test_name("evdev");
    let _guard = Cleanup(&hv, name.clone());
    let disk = make_test_disk(&name);
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
        "--evdev-keyboard",
        "/dev/input/by-id/usb-Logitech_USB_Keyboard-event-kbd",
        "--evdev-mouse",
        "/dev/input/by-id/usb-Logitech_USB_Optical_Mouse-event-mouse",
        "--grab-toggle",
        "scrolllock",
    ]);
    assert_eq!(new.status.code(), Some(0), "{}", text(&new.stderr));
    let xml = text(&new.stdout);
    assert!(xml.contains("grabToggle='scrolllock'"), "{xml}");
    assert!(
        xml.contains("<input type='keyboard' bus='virtio'/>"),
        "{xml}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("evdev.xml");
    std::fs::write(&file, &xml).unwrap();
    let f = file.to_str().unwrap();
    let v = run(&["domain", "validate", f]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v.stdout));
    let d = run(&["domain", "define", "--yes", f]);
    assert!(d.status.success(), "{}{}", text(&d.stdout), text(&d.stderr));
    let back = hv.domain_xml(&name).unwrap();
    assert!(
        back.contains("type=\"evdev\"") || back.contains("type='evdev'"),
        "{back}"
    );
    assert!(back.contains("grabToggle"), "{back}");
}
