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

use vfio_assistant::libvirt::{Hypervisor, Libvirt};

/// qemu:///system, or `None` with a message (an error in CI, where
/// scripts/libvirt-up.sh must have started it).
pub fn system() -> Option<Libvirt> {
    match Libvirt::open("qemu:///system") {
        Ok(hv) => Some(hv),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run libvirtd (scripts/libvirt-up.sh): {e}"
            );
            eprintln!("skipped: no qemu:///system here: {e}");
            None
        }
    }
}

/// Whether a guest can start here: /dev/kvm usable and `cpus` CPUs online.
pub fn kvm_guest_possible(cpus: usize) -> bool {
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm");
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if kvm.is_err() || online < cpus {
        eprintln!("skipped: needs a usable /dev/kvm and {cpus} CPUs, so no guest can start");
        return false;
    }
    true
}

/// A name only this test process uses: `vfio-assistant-test-PID-TAG`.
pub fn test_name(tag: &str) -> String {
    format!("vfio-assistant-test-{}-{tag}", std::process::id())
}

/// Stops and undefines a test domain even when an assertion fails.
pub struct Cleanup<'a>(pub &'a Libvirt, pub String);
impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = self.0.destroy(&self.1);
        let _ = self.0.undefine(&self.1);
    }
}

/// Define and start a bootable test guest with vCPU n pinned to CPU pins[n];
/// it is removed when the returned guard drops.
pub fn running_guest<'a>(hv: &'a Libvirt, tag: &str, pins: &[u32]) -> Cleanup<'a> {
    let name = test_name(tag);
    let xml = bootable_domain(&name, pins.len().max(1), pins);
    let guard = Cleanup(hv, name.clone());
    hv.define(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    hv.start(&name).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    guard
}
