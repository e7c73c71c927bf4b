//! The checks that `checks.rs`'s good and bad hosts leave on one side, seen
//! both ways: each case starts from a real machine (a published IOMMU listing,
//! the real Ryzen 5 1600 topology) and changes the files one check reads, the
//! way the problem shows on a real host. Every problem found says why and how
//! to fix it, with the file and the value.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{base_host, good_host, put};
use std::fs;
use std::path::Path;
use vfio_assistant::checks::model::{Finding, Status};
use vfio_assistant::checks::run_checks;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

pub(crate) fn findings(root: &Path, device: Option<&str>) -> Vec<Finding> {
    run_checks(&scan(&HostRoot::at(root)).unwrap(), device)
}

/// The finding `id` (for `device`, when given); None when the check said
/// nothing (it only speaks where it applies).
pub(crate) fn find<'a>(f: &'a [Finding], id: &str, device: Option<&str>) -> Option<&'a Finding> {
    f.iter().find(|x| {
        x.id == id && device.is_none_or(|d| x.device.as_deref() == Some(&format!("0000:{d}")))
    })
}

/// `id` has `status`, and a problem comes with a fix containing `fix_has`
/// and evidence (a file or command and its value).
#[track_caller]
pub(crate) fn expect(f: &[Finding], id: &str, device: Option<&str>, status: Status, fix_has: &str) {
    let x = find(f, id, device).unwrap_or_else(|| panic!("{id}: no finding"));
    assert_eq!(x.status, status, "{id}: {x:#?}");
    assert!(!x.evidence.is_empty(), "{id}: no evidence");
    assert!(x.why.len() > 20, "{id}: no why");
    if status != Status::Pass {
        // The words and the command, as the CLI prints them.
        let fix = x.fix_text().unwrap_or_default();
        assert!(fix.contains(fix_has), "{id}: fix {fix:?} lacks {fix_has:?}");
    }
}

/// No IOMMU groups: neither `/sys/kernel/iommu_groups` nor the devices'
/// `iommu_group` links (what a kernel with the IOMMU off shows).
fn without_iommu_groups(root: &Path) {
    let _ = fs::remove_dir_all(root.join("sys/kernel/iommu_groups"));
    fn walk(dir: &Path) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if e.file_name() == "iommu_group" {
                fs::remove_file(e.path()).unwrap();
            } else if ft.is_dir() && !ft.is_symlink() {
                walk(&e.path());
            }
        }
    }
    walk(&root.join("sys/devices"));
}

/// The fixture CPU's cpuinfo, as an Intel part (vendor and the vmx flag).
fn as_intel(root: &Path) {
    let p = root.join("proc/cpuinfo");
    let text = fs::read_to_string(&p).unwrap();
    let text = text
        .replace("AuthenticAMD", "GenuineIntel")
        .replace(" svm ", " vmx ");
    fs::write(p, text).unwrap();
}

#[test]
fn the_iommu_off_in_the_firmware_and_in_the_kernel() {
    // The X570 host set up right, then the firmware setting switched off:
    // no IVRS table, no groups.
    let dir = good_host();
    let r = dir.path();
    without_iommu_groups(r);
    fs::remove_file(r.join("sys/firmware/acpi/tables/IVRS")).unwrap();
    let f = findings(r, None);
    expect(&f, "iommu.firmware", None, Status::Fail, "AMD-Vi");
    // No table: the kernel line cannot help, the firmware comes first.
    expect(
        &f,
        "iommu.enabled",
        None,
        Status::Fail,
        "First turn on \"IOMMU\" / \"AMD-Vi\"",
    );
    let fix = find(&f, "iommu.enabled", None)
        .unwrap()
        .fix
        .clone()
        .unwrap();
    assert!(!fix.contains("intel_iommu"), "{fix}");
    expect(
        &f,
        "device.viable",
        Some("0b:00.0"),
        Status::Unknown,
        "iommu.enabled",
    );
    // Nothing to say about the IOMMU's details while it is off.
    assert!(find(&f, "iommu.passthrough_mode", None).is_none());
    assert!(find(&f, "iommu.interrupt_remapping", None).is_none());

    // The same on an Intel CPU: the setting and the kernel parameter differ.
    as_intel(r);
    let f = findings(r, None);
    expect(&f, "iommu.firmware", None, Status::Fail, "VT-d");
    expect(
        &f,
        "iommu.enabled",
        None,
        Status::Fail,
        "First turn on \"VT-d\"",
    );
    // With the table back but no groups, it is the kernel's parameter.
    put(r, "sys/firmware/acpi/tables/DMAR", "DMAR");
    let f = findings(r, None);
    expect(&f, "iommu.firmware", None, Status::Pass, "");
    expect(
        &f,
        "iommu.enabled",
        None,
        Status::Fail,
        "Add intel_iommu=on",
    );

    // Turned off on the kernel command line (the table is there).
    let cmdline = fs::read_to_string(r.join("proc/cmdline")).unwrap();
    put(
        r,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=off\n",
    );
    let f = findings(r, None);
    expect(
        &f,
        "iommu.enabled",
        None,
        Status::Fail,
        "Remove intel_iommu=off",
    );
    let fix = find(&f, "iommu.enabled", None)
        .unwrap()
        .fix
        .clone()
        .unwrap();
    assert!(!fix.contains("First"), "{fix}");
    // Off on the command line and no table: the firmware, then the line.
    fs::remove_file(r.join("sys/firmware/acpi/tables/DMAR")).unwrap();
    let f = findings(r, None);
    expect(
        &f,
        "iommu.enabled",
        None,
        Status::Fail,
        "in the firmware setup (see iommu.firmware): without the DMAR/IVRS table no kernel parameter can turn the IOMMU on. Then: Remove intel_iommu=off",
    );
    put(r, "proc/cmdline", &cmdline);

    // A VM (hypervisor flag): no firmware setup screen; a virtual IOMMU.
    let p = r.join("proc/cpuinfo");
    let text = fs::read_to_string(&p)
        .unwrap()
        .replace("flags\t\t:", "flags\t\t: hypervisor");
    fs::write(&p, text).unwrap();
    let f = findings(r, None);
    expect(
        &f,
        "iommu.firmware",
        None,
        Status::Fail,
        "<driver intremap='on'/>",
    );
    expect(&f, "iommu.enabled", None, Status::Fail, "virtual IOMMU");
    let x = find(&f, "iommu.firmware", None).unwrap();
    assert!(x.title.contains("itself a VM"));
    assert!(
        x.evidence
            .iter()
            .any(|e| e.source == "/proc/cpuinfo" && e.value == "hypervisor flag set")
    );

    // Not allowed to read the ACPI tables (no directory in the capture).
    fs::remove_dir_all(r.join("sys/firmware/acpi")).unwrap();
    let f = findings(r, None);
    expect(&f, "iommu.firmware", None, Status::Unknown, "root");
    expect(&f, "iommu.firmware", None, Status::Unknown, "itself a VM");
}

#[test]
fn iommu_details_when_it_is_on() {
    let dir = good_host();
    let r = dir.path();
    // No iommu=pt: a suggestion, not a problem.
    put(
        r,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz ro quiet amd_iommu=on\n",
    );
    // The kernel log says nothing about interrupt remapping.
    put(r, "dev/kmsg", "6,120,1000,-;AMD-Vi: Found IOMMU cap 0x40\n");
    let f = findings(r, None);
    expect(&f, "iommu.passthrough_mode", None, Status::Info, "iommu=pt");
    expect(
        &f,
        "iommu.interrupt_remapping",
        None,
        Status::Warn,
        "allow_unsafe_interrupts",
    );

    // Remapping on, but unsafe interrupts allowed anyway.
    put(
        r,
        "dev/kmsg",
        "6,120,1000,-;AMD-Vi: Interrupt remapping enabled\n",
    );
    put(
        r,
        "sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts",
        "Y\n",
    );
    let f = findings(r, None);
    let ir = find(&f, "iommu.interrupt_remapping", None).unwrap();
    assert_eq!(ir.status, Status::Warn);
    assert!(
        ir.evidence
            .iter()
            .any(|e| e.source.ends_with("allow_unsafe_interrupts"))
    );

    // The kernel log cannot be read: unknown, with the reason.
    fs::remove_file(r.join("dev/kmsg")).unwrap();
    fs::remove_file(r.join("sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts"))
        .unwrap();
    let f = findings(r, None);
    expect(
        &f,
        "iommu.interrupt_remapping",
        None,
        Status::Unknown,
        "root",
    );

    // An HP/Dell-style RMRR refusal, as the kernel prints it.
    put(
        r,
        "dev/kmsg",
        "3,900,9000,-;vfio-pci 0000:0b:00.0: DMAR: Device is ineligible for IOMMU domain attach due to platform RMRR requirement.  Contact your platform vendor.\n",
    );
    let f = findings(r, None);
    expect(&f, "iommu.rmrr", None, Status::Fail, "another slot");
    let rmrr = find(&f, "iommu.rmrr", None).unwrap();
    assert!(rmrr.evidence[0].value.contains("0000:0b:00.0"));
    // And without it, no RMRR finding at all.
    assert!(find(&findings(good_host().path(), None), "iommu.rmrr", None).is_none());
}

#[test]
fn device_checks_each_way() {
    // The X570's chipset SMBus controller shares its group with devices the
    // host needs: not viable, and the blockers are named.
    let x570 = good_host();
    let f = findings(x570.path(), Some("00:14.0"));
    expect(
        &f,
        "device.viable",
        Some("00:14.0"),
        Status::Fail,
        "vfio-pci",
    );
    let v = find(&f, "device.viable", Some("00:14.0")).unwrap();
    assert!(
        v.evidence.len() > 2,
        "the blocking members: {:#?}",
        v.evidence
    );

    // Resizable BAR: the GPU's config space carries the extended capability
    // (ID 0x15 at 0x100), after the standard list PM (0x60) -> PCI Express
    // (0x78), as Pascal cards lay it out.
    let mut config = vec![0u8; 4096];
    config[0..4].copy_from_slice(&[0xde, 0x10, 0x06, 0x1b]); // 10de:1b06
    config[0x06] = 0x10; // capability list present
    config[0x34] = 0x60;
    config[0x60..0x62].copy_from_slice(&[0x01, 0x78]); // Power Management
    config[0x78..0x7a].copy_from_slice(&[0x10, 0x00]); // PCI Express, last
    config[0x100..0x104].copy_from_slice(&(0x15u32 | (1 << 16)).to_le_bytes());
    fs::write(
        x570.path()
            .join("sys/devices/pci0000:00/0000:0b:00.0/config"),
        &config,
    )
    .unwrap();
    let f = findings(x570.path(), None);
    expect(
        &f,
        "device.rebar",
        Some("0b:00.0"),
        Status::Info,
        "Above 4G",
    );
    assert!(find(&f, "device.rebar", Some("0c:00.0")).is_none());
    // Two GPUs: the host keeps one.
    expect(&f, "device.host_display", Some("0b:00.0"), Status::Pass, "");

    // The Phoenix laptop: its RTX 4060 is the only GPU listed.
    let laptop = base_host("amd-phoenix-laptop-rtx4060-iommu-groups.txt");
    let r = laptop.path();
    let f = findings(r, None);
    expect(
        &f,
        "device.host_display",
        Some("01:00.0"),
        Status::Warn,
        "integrated graphics",
    );
    // This one has outputs (VGA class); no laptop warning even with a battery.
    put(r, "sys/class/power_supply/BAT0/type", "Battery\n");
    assert!(find(&findings(r, None), "device.laptop_gpu", None).is_none());
    // A MUX-less Optimus dGPU is a 3D controller (class 0302) without outputs.
    put(r, "sys/devices/pci0000:00/0000:01:00.0/class", "0x030200\n");
    let f = findings(r, None);
    expect(
        &f,
        "device.laptop_gpu",
        Some("01:00.0"),
        Status::Warn,
        "Looking Glass",
    );
    // Without a battery it is a desktop compute card: no laptop warning.
    fs::remove_dir_all(r.join("sys/class/power_supply")).unwrap();
    assert!(find(&findings(r, None), "device.laptop_gpu", None).is_none());

    // SR-IOV: the ConnectX-4 Lx physical function with its VFs enabled.
    let nic = base_host("mellanox-connectx4lx-vfs-share-group-c246.txt");
    let pf = "sys/devices/pci0000:00/0000:01:00.0";
    put(nic.path(), &format!("{pf}/sriov_totalvfs"), "8\n");
    put(nic.path(), &format!("{pf}/sriov_numvfs"), "0\n");
    assert!(
        find(
            &findings(nic.path(), Some("01:00.0")),
            "device.sriov_pf",
            None
        )
        .is_none()
    );
    put(nic.path(), &format!("{pf}/sriov_numvfs"), "4\n");
    let f = findings(nic.path(), Some("01:00.0"));
    expect(
        &f,
        "device.sriov_pf",
        Some("01:00.0"),
        Status::Warn,
        "virtual function instead",
    );
}

/// Remove every device's `driver` link that points at `driver`.
fn unbind_all(root: &Path, driver: &str) {
    fn walk(dir: &Path, driver: &str) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if e.file_name() == "driver" && ft.is_symlink() {
                if fs::read_link(e.path()).unwrap().ends_with(driver) {
                    fs::remove_file(e.path()).unwrap();
                }
            } else if ft.is_dir() && !ft.is_symlink() {
                walk(&e.path(), driver);
            }
        }
    }
    walk(&root.join("sys/devices"), driver);
}

/// vfio-pci loaded as a module, built in (never in `/proc/modules`), absent,
/// absent on a kernel without loadable modules, and not knowable.
#[test]
fn the_vfio_pci_driver_each_way() {
    let status = |r: &Path| {
        let f = findings(r, None);
        let x = find(&f, "vfio.modules", None).unwrap().clone();
        let seen: Vec<String> = x
            .evidence
            .iter()
            .map(|e| format!("{} = {}", e.source, e.value))
            .collect();
        (x, seen.join("\n"))
    };
    // The X570 host set up right: the module is listed.
    let dir = good_host();
    let r = dir.path();
    let (x, seen) = status(r);
    assert_eq!(x.status, Status::Pass, "{seen}");
    assert!(seen.contains("modules = vfio_pci loaded"), "{seen}");
    // Built in: /proc/modules is silent, the driver is registered in sysfs.
    put(r, "proc/modules", "kvm_amd 200704 0 - Live 0x0\n");
    fs::remove_file(r.join("dev/vfio/vfio")).unwrap();
    fs::create_dir_all(r.join("sys/bus/pci/drivers/vfio-pci")).unwrap();
    let (x, seen) = status(r);
    assert_eq!(x.status, Status::Pass, "{seen}");
    assert!(
        seen.contains("drivers/vfio-pci = present (built in"),
        "{seen}"
    );
    // Not loaded at all (so nothing is bound to it): libvirt loads it for
    // managed devices.
    fs::remove_dir_all(r.join("sys/bus/pci/drivers/vfio-pci")).unwrap();
    unbind_all(r, "vfio-pci");
    expect(
        &findings(r, None),
        "vfio.modules",
        None,
        Status::Info,
        "initramfs",
    );
    // A kernel without loadable modules: no /proc/modules, and the driver
    // directory still says vfio-pci is not there (this CI machine's case).
    fs::remove_file(r.join("proc/modules")).unwrap();
    let (x, seen) = status(r);
    assert_eq!(x.status, Status::Info, "{seen}");
    assert!(seen.contains("modules = not present"), "{seen}");
    assert!(x.fix.unwrap().contains("CONFIG_VFIO_PCI"));
    // Nothing to look at: unknown, not a verdict.
    fs::remove_dir_all(r.join("sys/bus/pci/drivers")).unwrap();
    let (x, seen) = status(r);
    assert_eq!(x.status, Status::Unknown, "{seen}");
    // The TRX40 listing's cards bound to vfio-pci prove it is there, whatever
    // /proc/modules says.
    let dir = base_host("asrock-trx40-creator-threadripper-3960x.txt");
    let r = dir.path();
    put(r, "proc/modules", "kvm 1142784 0 - Live 0x0\n");
    fs::remove_dir_all(r.join("sys/bus/pci/drivers/vfio-pci")).unwrap();
    let (x, seen) = status(r);
    assert_eq!(x.status, Status::Pass, "{seen}");
    assert!(seen.contains("/driver = vfio-pci (and "), "{seen}");
}

#[test]
fn runtime_checks_each_way() {
    let dir = good_host();
    let r = dir.path();
    // The seed's passed-through GPU on legacy INTx, its audio on MSI.
    let cpus = "            CPU0       CPU1\n";
    put(
        r,
        "proc/interrupts",
        &format!(
            "{cpus}  16:          0      81234  IR-IO-APIC   16-fasteoi   vfio-intx(0000:0b:00.0)\n 140:          0       2210  IR-PCI-MSI 6291456-edge      vfio-msi[0](0000:0b:00.1)\n"
        ),
    );
    let f = findings(r, None);
    expect(&f, "irq.vfio_mode", None, Status::Warn, "MSISupported=1");
    let irq = find(&f, "irq.vfio_mode", None).unwrap();
    assert!(irq.title.starts_with("1 passed-through"), "{}", irq.title);
    put(
        r,
        "proc/interrupts",
        &format!(
            "{cpus} 139:          0      81234  IR-PCI-MSI 6291456-edge      vfio-msi[0](0000:0b:00.0)\n 140:          0       2210  IR-PCI-MSI 6293504-edge      vfio-msi[0](0000:0b:00.1)\n"
        ),
    );
    expect(&findings(r, None), "irq.vfio_mode", None, Status::Pass, "");

    // Missing pieces of the host's software: warnings with the package.
    for f in [
        "run/libvirt/libvirt-sock",
        "usr/share/OVMF/OVMF_CODE_4M.fd",
        "usr/bin/swtpm",
        "dev/net/tun",
    ] {
        fs::remove_file(r.join(f)).unwrap();
    }
    let f = findings(r, None);
    expect(
        &f,
        "libvirt.running",
        None,
        Status::Warn,
        "systemctl enable --now libvirtd",
    );
    expect(&f, "firmware.ovmf", None, Status::Warn, "apt install ovmf");
    expect(&f, "tpm.swtpm", None, Status::Warn, "swtpm");
    expect(&f, "dev.tun", None, Status::Warn, "tun");
    // Not captured at all (no /usr in the capture): unknown, not missing.
    fs::remove_dir_all(r.join("usr")).unwrap();
    let f = findings(r, None);
    for id in ["firmware.ovmf", "tpm.swtpm"] {
        let x = find(&f, id, None).unwrap();
        assert_eq!(x.status, Status::Unknown, "{id}");
        assert!(x.title.contains("not in this capture"), "{}", x.title);
    }
}

/// intel_idle's Skylake client table (torvalds/linux drivers/idle/intel_idle.c,
/// `skl_cstates`: exit latencies in µs), laid out as sysfs shows it.
pub(crate) const SKYLAKE_STATES: &[(&str, u64)] = &[
    ("POLL", 0),
    ("C1", 2),
    ("C1E", 10),
    ("C3", 70),
    ("C6", 85),
    ("C7s", 124),
    ("C8", 200),
];
