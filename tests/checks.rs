//! Prerequisite checks on hosts built to pass and built to fail. Each host starts
//! from a real machine (an IOMMU listing users published, a real CPU topology)
//! and gets the files the checks read written on top, so every check is seen
//! both ways. Plus: the live host next to `virt-host-validate qemu`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use support::listing::{parse_listing, write_sysfs};
use vfio_assistant::checks::model::{Finding, Status};
use vfio_assistant::checks::run_checks;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

fn manifest(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn put(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        let ft = e.file_type().unwrap();
        if ft.is_symlink() {
            symlink(fs::read_link(e.path()).unwrap(), &t).unwrap();
        } else if ft.is_dir() {
            copy_tree(&e.path(), &t);
        } else {
            fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// A real listing + the real Ryzen 5 1600 topology and cpuinfo.
fn base_host(listing: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(manifest(&format!("tests/fixtures/listings/{listing}"))).unwrap();
    write_sysfs(&parse_listing(&text), dir.path()).unwrap();
    let cpu = manifest("tests/fixtures/topology/ghw-amd-ryzen5-1600");
    copy_tree(
        &cpu.join("sys/devices/system"),
        &dir.path().join("sys/devices/system"),
    );
    put(
        dir.path(),
        "proc/cpuinfo",
        &fs::read_to_string(cpu.join("proc/cpuinfo")).unwrap(),
    );
    dir
}

fn governors(root: &Path, gov: &str) {
    for cpu in 0..12 {
        put(
            root,
            &format!("sys/devices/system/cpu/cpufreq/policy{cpu}/related_cpus"),
            &format!("{cpu}\n"),
        );
        put(
            root,
            &format!("sys/devices/system/cpu/cpufreq/policy{cpu}/scaling_governor"),
            &format!("{gov}\n"),
        );
    }
}

fn bind(root: &Path, address: &str, driver: &str) {
    let dev = root.join("sys/devices/pci0000:00").join(address);
    let _ = fs::remove_file(dev.join("driver"));
    fs::create_dir_all(root.join("sys/bus/pci/drivers").join(driver)).unwrap();
    symlink(
        format!("../../../bus/pci/drivers/{driver}"),
        dev.join("driver"),
    )
    .unwrap();
}

const GOOD_CMDLINE: &str =
    "BOOT_IMAGE=/vmlinuz-6.1.0-13-amd64 root=/dev/nvme0n1p2 ro quiet amd_iommu=on iommu=pt";

/// The X570 passthrough host (GTX 1080 Ti for the VM, GT 710 for the host) set up right.
fn good_host() -> tempfile::TempDir {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let r = dir.path();
    for f in [
        "dev/kvm",
        "dev/vhost-net",
        "dev/net/tun",
        "dev/vfio/vfio",
        "sys/firmware/acpi/tables/IVRS",
        "usr/share/OVMF/OVMF_CODE_4M.fd",
        "usr/bin/swtpm",
        "run/libvirt/libvirt-sock",
    ] {
        put(r, f, "");
    }
    fs::create_dir_all(r.join("sys/firmware/efi")).unwrap();
    put(
        r,
        "dev/kmsg",
        "6,120,1000,-;AMD-Vi: Interrupt remapping enabled\n6,121,1001,-;AMD-Vi: Virtual APIC enabled\n",
    );
    put(r, "proc/cmdline", &format!("{GOOD_CMDLINE}\n"));
    put(
        r,
        "etc/default/grub",
        "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"amd_iommu=on iommu=pt\"\n",
    );
    put(
        r,
        "proc/modules",
        "vfio_pci 16384 0 - Live 0x0\nvfio_pci_core 94208 1 vfio_pci, Live 0x0\nkvm_amd 200704 0 - Live 0x0\nkvm 1142784 1 kvm_amd, Live 0x0\n",
    );
    put(
        r,
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always [madvise] never\n",
    );
    put(
        r,
        "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        "8192\n",
    );
    put(
        r,
        "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
        "8192\n",
    );
    put(r, "sys/kernel/mm/ksm/run", "0\n");
    put(r, "proc/sys/kernel/split_lock_mitigate", "0\n");
    put(r, "sys/module/kvm/parameters/ignore_msrs", "Y\n");
    put(
        r,
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "tsc\n",
    );
    put(
        r,
        "proc/buddyinfo",
        "Node 0, zone   Normal    120     80     40     20     10      8      6      4      2    900   3000\n",
    );
    put(
        r,
        "sys/fs/cgroup/cgroup.controllers",
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    );
    put(r, "etc/libvirt/hooks/qemu", "#!/bin/sh\n");
    fs::set_permissions(
        r.join("etc/libvirt/hooks/qemu"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    governors(r, "performance");
    bind(r, "0000:0b:00.0", "vfio-pci");
    bind(r, "0000:0b:00.1", "vfio-pci");
    put(
        r,
        "sys/devices/pci0000:00/0000:0b:00.0/reset_method",
        "bus\n",
    );
    put(
        r,
        "sys/devices/pci0000:00/0000:0c:00.0/reset_method",
        "bus\n",
    );
    bind(r, "0000:0c:00.0", "nouveau");
    dir
}

/// The TRX40 host (real drivers: RX 580 and GTX 1080 on vfio-pci, Quadro 2000 on
/// nouveau) with everything else set up wrong.
fn bad_host() -> tempfile::TempDir {
    let dir = base_host("asrock-trx40-creator-threadripper-3960x.txt");
    let r = dir.path();
    put(r, "dev/kmsg", "4,300,5000,-;kvm: disabled by bios\n");
    put(r, "dev/net/tun", "");
    put(
        r,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz root=/dev/sda2 ro pcie_acs_override=downstream,multifunction isolcpus=0-3 nohz_full=2-5\n",
    );
    put(
        r,
        "etc/default/grub",
        "GRUB_CMDLINE_LINUX=\"amd_iommu=on iommu=pt isolcpus=0-3 nohz_full=2-5 pcie_acs_override=downstream,multifunction\"\n",
    );
    put(
        r,
        "etc/modprobe.d/vfio.conf",
        "options vfio-pci ids=10de:0dd8,10de:0be9\n",
    );
    put(r, "proc/modules", "kvm 1142784 0 - Live 0x0\n");
    put(
        r,
        "sys/kernel/mm/transparent_hugepage/enabled",
        "[always] madvise never\n",
    );
    put(r, "sys/kernel/mm/ksm/run", "1\n");
    put(r, "proc/sys/kernel/split_lock_mitigate", "1\n");
    put(r, "sys/module/kvm/parameters/ignore_msrs", "N\n");
    put(
        r,
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "hpet\n",
    );
    put(
        r,
        "proc/buddyinfo",
        "Node 0, zone   Normal  90000  40000  20000   5000    900     40      3      1      0      0      0\n",
    );
    put(r, "proc/irq/45/smp_affinity_list", "2-3\n");
    put(r, "proc/irq/46/smp_affinity_list", "0-11\n");
    put(r, "etc/libvirt/hooks/qemu", "#!/bin/sh\n");
    fs::set_permissions(
        r.join("etc/libvirt/hooks/qemu"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    put(
        r,
        "sys/fs/cgroup/cgroup.controllers",
        "cpu io memory pids\n",
    );
    governors(r, "powersave");
    // The Quadro is the boot GPU and efifb sits in its BAR 1.
    let q = "sys/devices/pci0000:00/0000:01:00.0";
    put(r, &format!("{q}/boot_vga"), "1\n");
    put(
        r,
        &format!("{q}/resource"),
        "0x00000000f6000000 0x00000000f7ffffff 0x0000000000040200\n0x00000000e0000000 0x00000000e7ffffff 0x000000000004220c\n",
    );
    put(
        r,
        "proc/iomem",
        "e0000000-efffffff : PCI Bus 0000:01\n  e0000000-e7ffffff : 0000:01:00.0\n    e0000000-e02fffff : efifb\n",
    );
    put(r, &format!("{q}/config"), "");
    put(r, "sys/devices/pci0000:00/0000:4c:00.0/config", "");
    dir
}

fn findings(root: &Path, device: Option<&str>) -> Vec<Finding> {
    run_checks(&scan(&HostRoot::at(root)).unwrap(), device)
}

/// Status by id; for per-device checks the key is `id@address`.
fn by_id(f: &[Finding]) -> BTreeMap<String, Status> {
    f.iter()
        .map(|x| {
            (
                match &x.device {
                    Some(d) => format!("{}@{d}", x.id),
                    None => x.id.clone(),
                },
                x.status,
            )
        })
        .collect()
}

#[test]
fn a_well_set_up_host_passes() {
    let dir = good_host();
    let f = findings(dir.path(), None);
    let s = by_id(&f);
    for x in &f {
        assert!(x.status != Status::Fail, "unexpected failure: {x:#?}");
        assert!(!x.evidence.is_empty(), "{}: no evidence", x.id);
        assert!(x.why.len() > 20, "{}: no why", x.id);
        if matches!(x.status, Status::Fail | Status::Warn) {
            assert!(x.fix.is_some(), "{}: no fix", x.id);
        }
    }
    for id in [
        "cpu.virtualization",
        "kvm.device",
        "iommu.firmware",
        "iommu.enabled",
        "iommu.passthrough_mode",
        "iommu.interrupt_remapping",
        "vfio.modules",
        "boot.reboot_pending",
        "mem.thp",
        "mem.hugepages",
        "mem.fragmentation",
        "mem.ksm",
        "time.clocksource",
        "cpu.governor",
        "cpu.split_lock",
        "kvm.ignore_msrs",
        "dev.vhost_net",
        "dev.tun",
        "cgroup.controllers",
        "libvirt.running",
        "libvirt.hooks",
        "firmware.ovmf",
        "tpm.swtpm",
        "device.viable@0000:0b:00.0",
        "device.bound@0000:0b:00.0",
        "device.reset@0000:0b:00.0",
        "device.host_display@0000:0b:00.0",
    ] {
        assert_eq!(
            s.get(id),
            Some(&Status::Pass),
            "{id}: {:#?}",
            f.iter().find(|x| x.id == id.split('@').next().unwrap())
        );
    }
    // The host GPU is held by nouveau: a warning for that card only.
    assert_eq!(s.get("device.bound@0000:0c:00.0"), Some(&Status::Warn));
}

#[test]
fn a_badly_set_up_host_fails_each_check_with_the_fix() {
    let dir = bad_host();
    let f = findings(dir.path(), None);
    let s = by_id(&f);
    let expect = [
        ("cpu.virtualization", Status::Fail),
        ("kvm.device", Status::Fail),
        ("iommu.acs_override", Status::Warn),
        ("boot.reboot_pending", Status::Warn),
        ("vfio.modules", Status::Info),
        ("mem.thp", Status::Warn),
        ("mem.hugepages", Status::Info),
        ("mem.fragmentation", Status::Warn),
        ("mem.ksm", Status::Warn),
        ("time.clocksource", Status::Warn),
        ("cpu.governor", Status::Warn),
        ("cpu.isolation", Status::Warn),
        ("cpu.irq_affinity", Status::Warn),
        ("cpu.split_lock", Status::Warn),
        ("kvm.ignore_msrs", Status::Info),
        ("dev.vhost_net", Status::Warn),
        ("cgroup.controllers", Status::Warn),
        ("libvirt.hooks", Status::Fail),
        ("device.host_driver_first@0000:01:00.0", Status::Fail),
        ("device.boot_vga@0000:01:00.0", Status::Warn),
        ("device.reset@0000:4c:00.0", Status::Warn),
        ("device.bound@0000:01:00.0", Status::Warn),
        ("device.bound@0000:21:00.0", Status::Pass),
    ];
    for (id, want) in expect {
        assert_eq!(s.get(id), Some(&want), "{id}");
        let x = f
            .iter()
            .find(|x| match &x.device {
                Some(d) => format!("{}@{d}", x.id) == id,
                None => x.id == id,
            })
            .unwrap();
        if matches!(want, Status::Fail | Status::Warn) {
            assert!(x.fix.is_some(), "{id}: a problem without a fix");
        }
    }
    let find = |id: &str| f.iter().find(|x| x.id == id).unwrap();
    // The evidence names the file and the value.
    let kvm = find("kvm.device");
    assert!(
        kvm.evidence
            .iter()
            .any(|e| e.source == "/dev/kmsg" && e.value.contains("disabled by bios"))
    );
    assert!(
        kvm.fix.as_deref().unwrap().contains("SVM Mode"),
        "AMD firmware wording"
    );
    let boot = f.iter().find(|x| x.id == "device.boot_vga").unwrap();
    assert!(
        boot.evidence.iter().any(|e| e.value.contains("efifb")),
        "efifb inside the BAR: {:#?}",
        boot.evidence
    );
    let reboot = find("boot.reboot_pending");
    assert!(reboot.fix.as_deref().unwrap().contains("amd_iommu=on"));
    let iso = find("cpu.isolation");
    assert!(iso.fix.as_deref().unwrap().contains("CPU 0 is isolated"));
    // Failures come first.
    assert_eq!(f[0].status, Status::Fail);
}

#[test]
fn a_named_device_is_checked_alone() {
    let dir = bad_host();
    let f = findings(dir.path(), Some("21:00.0"));
    let devices: std::collections::BTreeSet<&str> =
        f.iter().filter_map(|x| x.device.as_deref()).collect();
    assert_eq!(
        devices.into_iter().collect::<Vec<_>>(),
        vec!["0000:21:00.0"]
    );
    let f = findings(dir.path(), Some("99:00.0"));
    assert!(
        f.iter()
            .any(|x| x.id == "device.exists" && x.status == Status::Fail)
    );
}

#[test]
fn check_cli_exit_codes() {
    let bin = env!("CARGO_BIN_EXE_vfio-assistant");
    let good = good_host();
    let out = std::process::Command::new(bin)
        .args(["check", "--root"])
        .arg(good.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let bad = bad_host();
    let out = std::process::Command::new(bin)
        .args(["check", "--json", "--root"])
        .arg(bad.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["counts"]["fail"].as_u64().unwrap() >= 3);
    assert!(v["findings"][0]["evidence"][0]["source"].is_string());
    let out = std::process::Command::new(bin)
        .args(["check", "--root", "/no/such/dir"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `virt-host-validate qemu` lines: "QEMU: Checking for X : PASS|WARN|FAIL (...)".
fn vhv() -> Option<BTreeMap<String, String>> {
    let out = match std::process::Command::new("virt-host-validate")
        .arg("qemu")
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "virt-host-validate is required in CI: {e}"
            );
            eprintln!("skipped: virt-host-validate not installed ({e})");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    Some(
        text.lines()
            .filter_map(|l| {
                let (what, verdict) = l.split_once(": Checking ")?.1.rsplit_once(':')?;
                Some((
                    what.trim().to_string(),
                    verdict.split_whitespace().next()?.to_string(),
                ))
            })
            .collect(),
    )
}

#[test]
fn live_host_agrees_with_virt_host_validate() {
    let Some(theirs) = vhv() else { return };
    let snap = scan(&HostRoot::live()).unwrap();
    let ours = by_id(&run_checks(&snap, None));
    let mut compared = 0;
    let mut agree = |their_key: &str, our_id: &str| {
        let (Some(t), Some(o)) = (theirs.get(their_key), ours.get(our_id)) else {
            return;
        };
        compared += 1;
        assert_eq!(
            t == "PASS",
            *o == Status::Pass,
            "{their_key}: virt-host-validate {t}, ours {o:?}"
        );
    };
    agree("if device /dev/vhost-net exists", "dev.vhost_net");
    agree("if device /dev/net/tun exists", "dev.tun");
    agree("if device /dev/kvm exists", "kvm.device");
    agree("for device assignment IOMMU support", "iommu.enabled");
    // Hardware virtualization: virt-host-validate reads only the cpuinfo flags.
    // On a nested host whose hypervisor hides vmx but still offers /dev/kvm it
    // says FAIL where we say WARN (KVM works, passthrough needs the real host);
    // anywhere else the two agree.
    if let (Some(t), Some(o)) = (
        theirs.get("for hardware virtualization"),
        ours.get("cpu.virtualization"),
    ) {
        compared += 1;
        if snap.cpu.hypervisor && snap.firmware.dev_kvm && snap.cpu.virtualization().is_none() {
            assert_eq!((t.as_str(), *o), ("FAIL", Status::Warn));
        } else {
            assert_eq!(
                t == "PASS",
                *o == Status::Pass,
                "hardware virtualization: {t} vs {o:?}"
            );
        }
    }
    assert!(compared >= 3, "compared only {compared}: {theirs:?}");
}
