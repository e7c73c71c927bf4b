//! A test guest built the way users' domains are: this machine's host scan,
//! the Windows template (`domain new`'s), a tiny qcow2 disk made with
//! qemu-img, and the same preflight users get (`report::preflight`), which
//! adapts it to what this machine's KVM really runs (a nested host's CPU
//! features, no SMM, SeaBIOS where OVMF cannot run). Whatever starts for
//! users starts here, on any machine with a usable /dev/kvm. Optional
//! pinning of vCPU n to host CPU pins[n].

use std::path::PathBuf;
use vfio_assistant::domain::from_host::{Choices, prepare};
use vfio_assistant::domain::template::{Network, Windows, new_windows};
use vfio_assistant::domain::xml::{Document, Element};
use vfio_assistant::host::scan;
use vfio_assistant::report::preflight::{PreflightRequest, caps_of, preflight};
use vfio_assistant::sysroot::HostRoot;

/// Where a test guest's disk goes: libvirt's image folder when we may write
/// there (CI runs as root), else the temp folder (which QEMU's user can enter).
pub fn test_disk_path(name: &str) -> PathBuf {
    let images = PathBuf::from("/var/lib/libvirt/images");
    let probe = images.join(format!(".{name}.probe"));
    if std::fs::write(&probe, b"").is_ok() {
        let _ = std::fs::remove_file(&probe);
        return images.join(format!("{name}.qcow2"));
    }
    std::env::temp_dir().join(format!("{name}.qcow2"))
}

/// A 64 MiB qcow2 image (metadata preallocated, as the wizard makes them).
pub fn make_test_disk(name: &str) -> PathBuf {
    let path = test_disk_path(name);
    let out = std::process::Command::new("qemu-img")
        .args([
            "create",
            "-q",
            "-f",
            "qcow2",
            "-o",
            "preallocation=metadata",
        ])
        .arg(&path)
        .arg("64M")
        .output()
        .unwrap_or_else(|e| panic!("qemu-img (Debian qemu-utils) must be installed: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// The test guest's XML for this machine, through the users' preflight.
pub fn bootable_domain(hv: &Libvirt, name: &str, vcpus: usize, pins: &[u32]) -> String {
    let root = HostRoot::live();
    let snap = scan(&root).unwrap();
    let disk = make_test_disk(name);
    let c = Choices {
        name: name.into(),
        windows: Windows::Ten,
        vcpus,
        memory_mib: 128,
        network: Network::None,
        spice: false,
        pin: false,
        disk: Some(disk.display().to_string()),
        ..Choices::default()
    };
    let spec = prepare(&snap, &c, caps_of(hv)).unwrap().spec;
    let mut doc = Document::parse(&new_windows(&spec).unwrap().xml).unwrap();
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
    let req = PreflightRequest {
        base_dir: None,
        trial: true,
    };
    let pre = preflight(&root, &snap, Some(hv), &doc.serialize(), &req).unwrap();
    assert!(
        pre.passes(),
        "the preflight refuses the test guest: {:#?}",
        pre.findings
    );
    pre.xml
}

use vfio_assistant::libvirt::Hypervisor;
use vfio_assistant_libvirt::Libvirt;

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
/// Under CI (`CI` set) a machine without them fails the test instead of
/// skipping it: the guest tests are required there.
pub fn kvm_guest_possible(cpus: usize) -> bool {
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm");
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if kvm.is_err() || online < cpus {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs a usable /dev/kvm and {cpus} CPUs for the guest tests ({kvm:?}, {online} online)"
        );
        eprintln!("skipped: needs a usable /dev/kvm and {cpus} CPUs, so no guest can start");
        return false;
    }
    true
}

/// A name only this test process uses: `vfio-assistant-test-PID-TAG`.
pub fn test_name(tag: &str) -> String {
    format!("vfio-assistant-test-{}-{tag}", std::process::id())
}

/// Stops and undefines a test domain (and removes its test disk) even when
/// an assertion fails.
pub struct Cleanup<'a>(pub &'a Libvirt, pub String);
impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = self.0.destroy(&self.1);
        let _ = self.0.undefine(&self.1);
        let _ = std::fs::remove_file(test_disk_path(&self.1));
    }
}

/// Define and start a bootable test guest with vCPU n pinned to CPU pins[n];
/// it is removed when the returned guard drops.
pub fn running_guest<'a>(hv: &'a Libvirt, tag: &str, pins: &[u32]) -> Cleanup<'a> {
    let name = test_name(tag);
    let guard = Cleanup(hv, name.clone());
    let xml = bootable_domain(hv, &name, pins.len().max(1), pins);
    hv.define(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    hv.start(&name).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    guard
}
