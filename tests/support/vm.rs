//! A domain our template built that this machine's nested KVM can boot: no
//! UEFI (OVMF), no Hyper-V, no hostdev, no disk — SeaBIOS finding nothing to
//! boot keeps the vCPUs alive. Optional pinning of vCPU n to host CPU pins[n].

use super::hosts::base_host;
use vfio_assistant::domain::from_host::{Choices, prepare};
use vfio_assistant::domain::template::{Network, Windows, new_windows};
use vfio_assistant::domain::xml::{Document, Element};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

pub fn bootable_domain(name: &str, vcpus: usize, pins: &[u32]) -> String {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let c = Choices {
        name: name.into(),
        windows: Windows::Ten,
        vcpus,
        memory_mib: 128,
        network: Network::None,
        spice: false,
        pin: false,
        ..Choices::default()
    };
    let spec = prepare(&snap, &c, None).unwrap().spec;
    let mut doc = Document::parse(&new_windows(&spec).unwrap().xml).unwrap();
    doc.root.child_mut("os").unwrap().remove_attr("firmware");
    doc.root
        .child_mut("features")
        .unwrap()
        .remove_children("hyperv");
    doc.root
        .child_mut("clock")
        .unwrap()
        .remove_children("timer");
    if !pins.is_empty() {
        let cputune = doc
            .root
            .child_or_insert_after("cputune", &["vcpu"])
            .unwrap();
        for (v, c) in pins.iter().enumerate() {
            let mut p = Element::new("vcpupin");
            p.set_attr("vcpu", &v.to_string());
            p.set_attr("cpuset", &c.to_string());
            cputune.append_child(p);
        }
    }
    doc.indent_new_elements();
    doc.serialize()
}
