//! The Windows passthrough template on real hosts: for every GPU in every real
//! IOMMU listing (with the real Ryzen 5 1600 topology), the generated domain is
//! valid against libvirt's schema (xmllint with libvirt 10.7's RNG, and the
//! installed libvirt's `virt-xml-validate`), passes the whole passthrough set
//! as multifunction hostdevs one card per guest slot, and follows the domain
//! capabilities' Hyper-V list. Domain capabilities parse from a real capture
//! and from libvirt's own test data.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::base_host;
use crate::support::schema::validate_domain;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use vfio_assistant::domain::from_host::{Choices, PrepareError, prepare};
use vfio_assistant::domain::template::{Hugepages, Windows, new_windows};
use vfio_assistant::domain::validate::{SchemaResult, caps_problems, schema_check};
use vfio_assistant::domain::xml::Document;
use vfio_assistant::host::iommu::VerdictKind;
use vfio_assistant::host::scan;
use vfio_assistant::libvirt::caps::DomainCaps;
use vfio_assistant::sysroot::HostRoot;

fn manifest(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn caps(name: &str) -> DomainCaps {
    let text =
        std::fs::read_to_string(manifest(&format!("tests/fixtures/domcaps/{name}"))).unwrap();
    DomainCaps::parse(&text).unwrap()
}

fn amd_caps() -> DomainCaps {
    caps("libvirt-qemu_9.0.0-q35-amd.xml")
}

fn nested_caps() -> DomainCaps {
    caps("debian12-nested-kvm-q35.xml")
}

/// The IOMMU listings that come with expected verdicts.
fn listings() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(manifest("tests/fixtures/listings"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".txt"))
        .filter(|n| {
            manifest(&format!(
                "tests/fixtures/listings/{}",
                n.replace(".txt", ".expect")
            ))
            .exists()
        })
        .collect();
    v.sort();
    v
}

fn choices(gpu: &str, windows: Windows) -> Choices {
    Choices {
        name: "win-gaming".into(),
        windows,
        gpu: Some(gpu.into()),
        vcpus: 6,
        memory_mib: 16384,
        disk: Some("/var/lib/libvirt/images/win.raw".into()),
        install_iso: Some("/srv/iso/Win11_24H2_English_x64.iso".into()),
        virtio_iso: Some("/srv/iso/virtio-win-0.1.266.iso".into()),
        ..Choices::default()
    }
}

/// (host address, guest bus, guest function, multifunction) of each hostdev.
fn hostdevs(doc: &Document) -> Vec<(String, String, String, bool)> {
    let devices = doc.root.child("devices").unwrap();
    devices
        .elements()
        .filter(|e| e.name == "hostdev")
        .map(|h| {
            let s = h.child("source").unwrap().child("address").unwrap();
            let host = format!(
                "{}:{}:{}.{}",
                &s.attr("domain").unwrap()[2..],
                &s.attr("bus").unwrap()[2..],
                &s.attr("slot").unwrap()[2..],
                &s.attr("function").unwrap()[2..]
            );
            let g = h.child("address").unwrap();
            (
                host,
                g.attr("bus").unwrap().to_string(),
                g.attr("function").unwrap().to_string(),
                g.attr("multifunction") == Some("on"),
            )
        })
        .collect()
}

fn check_schema(xml: &str, what: &str) {
    if let Some(r) = validate_domain(xml) {
        r.unwrap_or_else(|e| panic!("{what}: libvirt 10.7 RNG rejects it:\n{e}\n{xml}"));
    }
    match schema_check(xml) {
        SchemaResult::Valid => {}
        SchemaResult::Invalid(e) => panic!("{what}: virt-xml-validate rejects it:\n{e}\n{xml}"),
        SchemaResult::Unavailable(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "virt-xml-validate is required in CI: {why}"
            );
            eprintln!("skipped virt-xml-validate: {why}");
        }
    }
}

#[test]
fn every_gpu_on_every_real_host_gives_a_valid_domain_with_its_whole_set() {
    let mut built = 0;
    for listing in listings() {
        let dir = base_host(&listing);
        let snap = scan(&HostRoot::at(dir.path())).unwrap();
        let gpus: Vec<_> = snap.gpus().cloned().collect();
        for (i, gpu) in gpus.iter().enumerate() {
            let addr = &gpu.device.address;
            let what = format!("{listing} {addr}");
            let windows = if i % 2 == 0 {
                Windows::Eleven
            } else {
                Windows::Ten
            };
            let prepared = prepare(&snap, &choices(addr, windows), Some(amd_caps()));
            if gpu.passthrough.verdict == VerdictKind::NotViable {
                let err = prepared.expect_err(&what);
                assert!(
                    matches!(err, PrepareError::GpuNotViable { .. }),
                    "{what}: {err}"
                );
                assert!(
                    err.to_string().contains("cannot be passed through"),
                    "{what}: {err}"
                );
                continue;
            }
            let prepared = prepared.unwrap_or_else(|e| panic!("{what}: {e}"));
            let new = new_windows(&prepared.spec).unwrap();
            check_schema(&new.xml, &what);
            let doc = Document::parse(&new.xml).unwrap();
            let hds = hostdevs(&doc);
            // Exactly the passthrough set, nothing else.
            let got: BTreeSet<String> = hds.iter().map(|h| h.0.clone()).collect();
            let want: BTreeSet<String> = gpu.passthrough.set.iter().cloned().collect();
            assert_eq!(got, want, "{what}");
            // One guest bus per host card, functions as on the host.
            let mut by_card: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
            for h in &hds {
                by_card.entry(&h.0[..10]).or_default().insert(&h.1);
            }
            let buses: BTreeSet<&str> = hds.iter().map(|h| h.1.as_str()).collect();
            assert_eq!(buses.len(), by_card.len(), "{what}: {hds:?}");
            assert!(by_card.values().all(|b| b.len() == 1), "{what}: {hds:?}");
            for h in &hds {
                let card: Vec<_> = hds.iter().filter(|o| o.1 == h.1).collect();
                let first = h.2 == card.iter().map(|c| c.2.clone()).min().unwrap();
                assert_eq!(
                    h.3,
                    first && card.len() > 1,
                    "{what}: multifunction on {h:?}"
                );
                if h.0.ends_with(".0") || card.iter().any(|c| c.0.ends_with(".0")) {
                    assert_eq!(&h.2[2..], &h.0[h.0.len() - 1..], "{what}: function kept");
                }
            }
            // Windows 11 gets Secure Boot, TPM and SMM; Windows 10 none of them.
            let devs = doc.root.child("devices").unwrap();
            let w11 = windows == Windows::Eleven;
            assert_eq!(devs.child("tpm").is_some(), w11, "{what}");
            assert_eq!(
                doc.root.child("features").unwrap().child("smm").is_some(),
                w11
            );
            // Pinned and tuned, every part with a why.
            let cputune = doc.root.child("cputune").unwrap();
            assert_eq!(
                cputune.elements().filter(|e| e.name == "vcpupin").count(),
                6
            );
            assert!(new.edits.iter().all(|e| e.why.len() > 40), "{what}");
            assert_eq!(
                devs.child("memballoon").unwrap().attr("model"),
                Some("none")
            );
            built += 1;
        }
    }
    eprintln!("{built} domains built");
    assert!(built >= 15, "only {built} domains built");
}

#[test]
fn hyperv_follows_the_domain_capabilities() {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let c = choices("0b:00.0", Windows::Eleven);
    let names = |caps: Option<DomainCaps>| -> Vec<String> {
        let spec = prepare(&snap, &c, caps).unwrap().spec;
        let doc = Document::parse(&new_windows(&spec).unwrap().xml).unwrap();
        doc.root
            .child("features")
            .unwrap()
            .child("hyperv")
            .map(|h| h.elements().map(|e| e.name.clone()).collect())
            .unwrap_or_default()
    };
    let full = names(Some(amd_caps()));
    assert!(full.contains(&"stimer".to_string()) && full.contains(&"synic".to_string()));
    // The AMD host's caps list avic: it comes on top of the usual set, and only
    // when listed (unknown caps give the usual set).
    assert_eq!(full.last().map(String::as_str), Some("avic"));
    assert_eq!(
        full[..full.len() - 1],
        names(None)[..],
        "unknown caps: the usual set"
    );
    // The real nested host offers only spinlocks (and vendor_id).
    assert_eq!(names(Some(nested_caps())), vec!["spinlocks".to_string()]);
    let spec = prepare(&snap, &c, Some(nested_caps())).unwrap().spec;
    let new = new_windows(&spec).unwrap();
    check_schema(&new.xml, "nested caps");
    let hv = new
        .edits
        .iter()
        .find(|e| e.path == "features/hyperv")
        .unwrap();
    assert!(
        hv.why.contains("does not offer them") && hv.why.contains("stimer"),
        "{hv:?}"
    );
    // And the caps check finds nothing to complain about in what we wrote.
    let doc = Document::parse(&new.xml).unwrap();
    assert_eq!(caps_problems(&doc, &nested_caps()), Vec::<String>::new());
    // Whereas the full set on this host is caught.
    let full_doc = Document::parse(
        &new_windows(&prepare(&snap, &c, None).unwrap().spec)
            .unwrap()
            .xml,
    )
    .unwrap();
    let problems = caps_problems(&full_doc, &nested_caps());
    assert!(
        problems.iter().any(|p| p.contains("stimer")),
        "{problems:?}"
    );
}

/// Debian 13 ships SPICE in qemu-system-modules-spice, a Recommends: a host
/// without it lists no `spice` among its display types, and libvirt refuses
/// the Looking Glass domain ("spice graphics are not supported with this
/// QEMU", seen on the booted Debian 13 host). Said before the define.
#[test]
fn a_spice_display_on_a_qemu_without_spice_is_said_before_the_define() {
    let text = std::fs::read_to_string(manifest(
        "tests/fixtures/domcaps/debian12-nested-kvm-q35.xml",
    ))
    .unwrap();
    let doc = Document::parse(
        "<domain type='kvm'><name>w</name><devices><graphics type='spice' autoport='yes'/></devices></domain>",
    )
    .unwrap();
    assert!(caps_problems(&doc, &nested_caps()).is_empty());
    let without = DomainCaps::parse(&text.replace("<value>spice</value>", "")).unwrap();
    let p = caps_problems(&doc, &without);
    assert!(
        p.len() == 1
            && p[0].contains("no spice display")
            && p[0].contains("sdl, vnc, egl-headless, dbus")
            && p[0].contains("qemu-system-modules-spice"),
        "{p:?}"
    );
}

#[test]
fn hugepages_come_from_what_the_host_reserved() {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let r = dir.path();
    crate::support::hosts::put(
        r,
        "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        "8192\n",
    );
    crate::support::hosts::put(
        r,
        "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
        "8192\n",
    );
    let snap = scan(&HostRoot::at(r)).unwrap();
    let mut c = choices("0b:00.0", Windows::Ten);
    let spec = prepare(&snap, &c, None).unwrap().spec;
    assert_eq!(
        spec.hugepages,
        Hugepages::TwoMiB,
        "16 GiB fits in 8192 free 2M pages"
    );
    let xml = new_windows(&spec).unwrap().xml;
    assert!(xml.contains("<page size='2048' unit='KiB'/>"), "{xml}");
    check_schema(&xml, "hugepages");
    c.memory_mib = 32768;
    let p = prepare(&snap, &c, None).unwrap();
    assert_eq!(p.spec.hugepages, Hugepages::None, "32 GiB does not fit");
    c.hugepages = Some(Hugepages::OneGiB);
    let p = prepare(&snap, &c, None).unwrap();
    assert_eq!(p.spec.hugepages, Hugepages::OneGiB, "asked for explicitly");
    assert!(
        p.notes.iter().any(|n| n.contains("will not start")),
        "{:?}",
        p.notes
    );
}

#[test]
fn user_text_is_escaped_and_bad_choices_are_refused() {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let mut c = choices("0b:00.0", Windows::Ten);
    c.name = "win <gaming> & 'co'".into();
    c.disk = Some("/vm/it's \"here\".qcow2".into());
    let new = new_windows(&prepare(&snap, &c, None).unwrap().spec).unwrap();
    let doc = Document::parse(&new.xml).unwrap();
    assert_eq!(
        doc.root.child("name").unwrap().text(),
        "win <gaming> & 'co'"
    );
    let disk = doc.root.child("devices").unwrap().child("disk").unwrap();
    assert_eq!(
        disk.child("source").unwrap().attr("file"),
        Some("/vm/it's \"here\".qcow2")
    );
    assert_eq!(disk.child("driver").unwrap().attr("type"), Some("qcow2"));
    check_schema(&new.xml, "escaped");

    c.gpu = Some("99:00.0".into());
    assert!(matches!(
        prepare(&snap, &c, None).unwrap_err(),
        PrepareError::NoDevice { given } if given == "99:00.0"
    ));
    c.gpu = Some("0b:00.0".into());
    c.vcpus = 64;
    assert!(
        prepare(&snap, &c, None).is_err(),
        "more vCPUs than the host has"
    );
    c.vcpus = 4;
    c.name = "  ".into();
    assert!(new_windows(&prepare(&snap, &c, None).unwrap().spec).is_err());
}

#[test]
fn domain_capabilities_parse_from_real_captures() {
    let n = nested_caps();
    assert_eq!(n.virttype, "kvm");
    assert_eq!(n.machine, "pc-q35-7.2");
    assert_eq!(n.max_vcpus, Some(288));
    assert!(n.efi && n.secure_boot && n.host_passthrough && n.iothreads);
    assert_eq!(
        n.hyperv,
        Some(vec!["spinlocks".to_string(), "vendor_id".to_string()])
    );
    assert_eq!(
        n.pick_loader(false),
        Some("/usr/share/OVMF/OVMF_CODE_4M.fd")
    );
    assert_eq!(
        n.pick_loader(true),
        Some("/usr/share/OVMF/OVMF_CODE_4M.secboot.fd")
    );
    assert!(n.tpm_models.contains(&"tpm-crb".to_string()));
    let a = amd_caps();
    assert_eq!(a.max_vcpus, Some(4096));
    assert_eq!(a.hyperv.as_ref().unwrap().len(), 16);
    assert!(a.tpm_backends.contains(&"emulator".to_string()));

    for bad in [
        "",
        "<domainCapabilities>",
        "<capabilities/>",
        "\u{0}garbage",
    ] {
        assert!(DomainCaps::parse(bad).is_err(), "{bad:?}");
    }
    // No Hyper-V section at all: unknown, everything allowed.
    let old = DomainCaps::parse(
        "<domainCapabilities><path>/usr/bin/qemu-kvm</path></domainCapabilities>",
    )
    .unwrap();
    assert_eq!(old.hyperv, None);
    assert!(old.hyperv_supports("stimer"));
}

#[test]
fn code43_workaround_and_io_uring_on_request() {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let mut c = choices("0b:00.0", Windows::Ten);
    let plain = new_windows(&prepare(&snap, &c, Some(nested_caps())).unwrap().spec).unwrap();
    assert!(!plain.xml.contains("<hidden"), "off by default");
    c.hide_kvm = true;
    c.io_uring = true;
    for caps in [nested_caps(), amd_caps()] {
        let new = new_windows(&prepare(&snap, &c, Some(caps)).unwrap().spec).unwrap();
        check_schema(&new.xml, "hide_kvm");
        let doc = Document::parse(&new.xml).unwrap();
        let f = doc.root.child("features").unwrap();
        assert_eq!(
            f.child("kvm")
                .unwrap()
                .child("hidden")
                .unwrap()
                .attr("state"),
            Some("on")
        );
        let vendor = f.child("hyperv").unwrap().child("vendor_id").unwrap();
        assert_eq!(vendor.attr("value").map(str::len), Some(12));
        let disk = doc.root.child("devices").unwrap().child("disk").unwrap();
        assert_eq!(disk.child("driver").unwrap().attr("io"), Some("io_uring"));
        let e = new.edits.iter().find(|e| e.path == "features/kvm").unwrap();
        assert!(e.why.contains("465"), "{e:?}");
    }
}

#[test]
fn a_usb_controller_and_an_sriov_vf_join_the_domain() {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let usb = snap
        .pci_devices
        .iter()
        .find(|e| e.device.is_usb_controller() && e.passthrough.verdict != VerdictKind::NotViable)
        .expect("the X570 has a USB controller that can go");
    let mut c = choices("0b:00.0", Windows::Eleven);
    c.devices = vec![usb.device.address.clone()];
    let new = new_windows(&prepare(&snap, &c, None).unwrap().spec).unwrap();
    check_schema(&new.xml, "usb controller");
    let got: BTreeSet<String> = hostdevs(&Document::parse(&new.xml).unwrap())
        .into_iter()
        .map(|h| h.0)
        .collect();
    for a in usb
        .passthrough
        .set
        .iter()
        .chain(&["0000:0b:00.0".to_string()])
    {
        assert!(got.contains(a), "{a} missing from {got:?}");
    }
    // A device that cannot go is refused with the reason.
    let blocked = snap
        .pci_devices
        .iter()
        .find(|e| e.passthrough.verdict == VerdictKind::NotViable)
        .unwrap();
    c.devices = vec![blocked.device.address.clone()];
    assert!(matches!(
        prepare(&snap, &c, None).unwrap_err(),
        PrepareError::NotViable { .. }
    ));

    // An SR-IOV VF of a real ConnectX-4 Lx as the network card.
    let dir = base_host("mellanox-connectx4lx-vfs-share-group-c246.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    // (A listing has no physfn links; the VF is named as one.)
    let vf = snap
        .pci_devices
        .iter()
        .find(|e| e.device.display_name().contains("Virtual Function"))
        .expect("the listing has VFs");
    let mut c = choices("0b:00.0", Windows::Ten);
    c.gpu = None;
    c.network = vfio_assistant::domain::template::Network::Vf(vf.device.address.clone());
    let new = new_windows(&prepare(&snap, &c, None).unwrap().spec).unwrap();
    check_schema(&new.xml, "sr-iov vf");
    assert!(
        new.xml.contains("<interface type='hostdev' managed='yes'>"),
        "{}",
        new.xml
    );
    assert!(
        new.edits
            .iter()
            .any(|e| e.what.contains("SR-IOV virtual function"))
    );
}

#[test]
fn virtio_scsi_puts_the_disk_on_a_controller_with_its_iothread() {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let mut c = choices("0b:00.0", Windows::Eleven);
    c.disk = Some("/dev/nvme1n1".into());
    c.disk_bus = Some(vfio_assistant::domain::template::DiskBus::Scsi);
    let new = new_windows(&prepare(&snap, &c, None).unwrap().spec).unwrap();
    check_schema(&new.xml, "virtio-scsi");
    let doc = Document::parse(&new.xml).unwrap();
    let devs = doc.root.child("devices").unwrap();
    let ctl = devs
        .elements()
        .find(|e| e.name == "controller" && e.attr("model") == Some("virtio-scsi"))
        .unwrap();
    assert_eq!(ctl.child("driver").unwrap().attr("iothread"), Some("1"));
    let disk = devs.child("disk").unwrap();
    assert_eq!(disk.attr("type"), Some("block"));
    assert_eq!(disk.child("target").unwrap().attr("bus"), Some("scsi"));
    assert!(
        new.edits
            .iter()
            .any(|e| e.what.starts_with("virtio-scsi disk"))
    );
}

/// Every disk bus, pinned or not, is a domain libvirt defines: a virtio
/// disk (or SCSI controller) on iothread 1 needs `<iothreads>` even when no
/// vCPU is pinned (libvirt: "Disk iothread '1' not defined in iothreadid").
/// Defined on qemu:///system (the test driver does not check iothreads).
#[test]
fn every_disk_bus_pinned_or_not_is_defined_by_libvirt() {
    use vfio_assistant::domain::template::DiskBus;
    use vfio_assistant::libvirt::Hypervisor;
    let Some(hv) = crate::support::vm::system() else {
        return;
    };
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    for bus in [DiskBus::Virtio, DiskBus::Scsi, DiskBus::Sata] {
        for pin in [true, false] {
            let mut c = choices("0000:01:00.0", Windows::Eleven);
            c.gpu = None;
            c.name = crate::support::vm::test_name(&format!("bus-{bus:?}-{pin}"));
            c.disk_bus = Some(bus);
            c.pin = pin;
            let xml = new_windows(&prepare(&snap, &c, None).unwrap().spec)
                .unwrap()
                .xml;
            hv.define(&xml)
                .unwrap_or_else(|e| panic!("{bus:?}, pinned {pin}: {e}\n{xml}"));
            let _ = hv.undefine(&c.name);
        }
    }
}
