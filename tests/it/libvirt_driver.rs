//! Real libvirt through the `Hypervisor` trait. On `test:///default` (libvirt's
//! in-process test driver): list, read, define, start, destroy, undefine, and
//! errors that carry libvirt's message and a hint. On `qemu:///system` (libvirtd,
//! started by scripts/libvirt-up.sh; required in CI): the generated Windows
//! domains of real hosts are accepted by a real define, and a domain our code
//! built (without the hostdev, UEFI and Hyper-V this nested KVM refuses) really
//! starts under KVM, answers QMP, and is destroyed. Only domains these tests
//! created are touched: their names start with `vfio-assistant-test-`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::base_host;
use vfio_assistant::domain::from_host::{Choices, prepare};
use vfio_assistant::domain::template::{Windows, new_windows};
use vfio_assistant::domain::xml::Document;
use vfio_assistant::host::scan;
use vfio_assistant::libvirt::error::VirtErrorKind;
use vfio_assistant::libvirt::{DomainState, Hypervisor, TEST_URI};
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant_libvirt::Libvirt;
use vfio_assistant_libvirt::stats::StatsGroup;

fn test_driver() -> Libvirt {
    Libvirt::open(TEST_URI).expect("the test driver needs no daemon")
}

fn name(tag: &str) -> String {
    crate::support::vm::test_name(tag)
}

/// A generated Windows domain for the X570 host's GTX 1080 Ti.
fn windows_domain(name: &str, windows: Windows, gpu: Option<&str>) -> String {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let c = Choices {
        name: name.into(),
        windows,
        gpu: gpu.map(str::to_string),
        vcpus: 4,
        memory_mib: 8192,
        ..Choices::default()
    };
    new_windows(&prepare(&snap, &c, None).unwrap().spec)
        .unwrap()
        .xml
}

#[test]
fn test_driver_lists_reads_defines_starts_and_undefines() {
    let hv = test_driver();
    let doms = hv.domains().unwrap();
    let t = doms
        .iter()
        .find(|d| d.name == "test")
        .expect("the test driver's domain");
    assert_eq!(t.state, DomainState::Running);
    let xml = hv.domain_xml("test").unwrap();
    assert_eq!(Document::parse(&xml).unwrap().root.name, "domain");

    let n = name("td");
    let xml = windows_domain(&n, Windows::Ten, Some("0b:00.0"));
    assert_eq!(hv.define(&xml).unwrap(), n);
    assert_eq!(hv.state(&n).unwrap(), DomainState::Shutoff);
    let back = Document::parse(&hv.domain_xml(&n).unwrap()).unwrap();
    let hostdevs = back
        .root
        .child("devices")
        .unwrap()
        .elements()
        .filter(|e| e.name == "hostdev")
        .count();
    assert_eq!(
        hostdevs, 2,
        "GPU and its HDMI audio survive libvirt's parse"
    );
    hv.start(&n).unwrap();
    assert_eq!(hv.state(&n).unwrap(), DomainState::Running);
    hv.destroy(&n).unwrap();
    assert_eq!(hv.state(&n).unwrap(), DomainState::Shutoff);
    hv.undefine(&n).unwrap();
    assert!(hv.domains().unwrap().iter().all(|d| d.name != n));
}

#[test]
fn libvirt_errors_carry_the_message_and_what_to_try() {
    let hv = test_driver();
    let e = hv.domain_xml("no-such-domain").unwrap_err();
    assert_eq!(e.kind, VirtErrorKind::NoDomain, "{e}");
    assert!(e.to_string().contains("no-such-domain"), "{e}");
    assert!(e.to_string().contains("domain list"), "{e}");

    let e = hv.define("<domain type='kvm'><name>x</name>").unwrap_err();
    assert_eq!(e.kind, VirtErrorKind::BadXml, "{e}");
    let e = hv.define("<network><name>x</name></network>").unwrap_err();
    assert!(!e.message.is_empty(), "{e}");

    // Starting a running domain: the wrong state, said so.
    let e = hv.start("test").unwrap_err();
    assert_eq!(e.kind, VirtErrorKind::WrongState, "{e}");

    // QMP needs QEMU.
    let e = hv.qmp("test", r#"{"execute":"query-status"}"#).unwrap_err();
    assert_eq!(e.kind, VirtErrorKind::Unsupported, "{e}");

    // Domain statistics through our own FFI walk: the test driver fills the
    // state group (its VCPU group is empty); an unknown domain is named.
    let state = hv.domain_stats("test", StatsGroup::State).unwrap();
    assert!(state.contains(&("state.state".to_string(), 1)), "{state:?}");
    assert!(hv.vcpu_stats("test").is_ok());
    let e = hv.vcpu_stats("no-such-domain").unwrap_err();
    assert_eq!(e.kind, VirtErrorKind::NoDomain, "{e}");

    let e = Libvirt::open("qemu+unix:///system?socket=/nonexistent/libvirt-sock")
        .err()
        .unwrap();
    assert_eq!(e.kind, VirtErrorKind::NoConnection, "{e}");
    assert!(e.to_string().contains("libvirtd"), "{e}");
}

use crate::support::vm::{Cleanup, kvm_guest_possible, system};

#[test]
fn system_libvirt_accepts_the_generated_windows_domains() {
    let Some(hv) = system() else { return };
    for (tag, windows) in [("w10", Windows::Ten), ("w11", Windows::Eleven)] {
        let n = name(tag);
        let xml = windows_domain(&n, windows, Some("0b:00.0"));
        let _c = Cleanup(&hv, n.clone());
        assert_eq!(
            hv.define(&xml)
                .unwrap_or_else(|e| panic!("{tag}: {e}\n{xml}")),
            n
        );
        let back = hv.domain_xml(&n).unwrap();
        let doc = Document::parse(&back).unwrap();
        let cputune = doc.root.child("cputune").unwrap();
        assert_eq!(
            cputune.elements().filter(|e| e.name == "vcpupin").count(),
            4
        );
        assert!(back.contains("multifunction='on'"), "{back}");
        if windows == Windows::Eleven {
            // libvirt resolved the firmware request to a secure-boot OVMF.
            assert!(back.contains("secure-boot"), "{back}");
        }
    }
}

#[test]
fn a_domain_we_built_starts_under_kvm_answers_qmp_and_is_destroyed() {
    let Some(hv) = system() else { return };
    if !kvm_guest_possible(1) {
        return;
    }
    let guest = crate::support::vm::running_guest(&hv, "boot", &[]);
    let n = guest.1.clone();
    assert_eq!(hv.state(&n).unwrap(), DomainState::Running);
    let reply = hv.qmp(&n, r#"{"execute":"query-status"}"#).unwrap();
    let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(v["return"]["status"], "running", "{reply}");
    assert!(
        hv.domains()
            .unwrap()
            .iter()
            .any(|d| d.name == n && d.state.is_active())
    );
    hv.destroy(&n).unwrap();
    assert_eq!(hv.state(&n).unwrap(), DomainState::Shutoff);
}
