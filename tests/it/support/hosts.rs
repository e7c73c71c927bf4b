//! Test hosts for the checks and the doctor: a real machine (an IOMMU listing
//! users published plus the real Ryzen 5 1600 topology) with the files the
//! checks read written on top, once set up right and once set up wrong.

use super::listing::{parse_listing, write_sysfs};
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

fn manifest(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

pub fn put(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

pub use super::tree::copy_tree;

/// A real listing + the real Ryzen 5 1600 topology and cpuinfo.
pub fn base_host(listing: &str) -> tempfile::TempDir {
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

pub fn bind(root: &Path, address: &str, driver: &str) {
    let dev = root.join("sys/devices/pci0000:00").join(address);
    let _ = fs::remove_file(dev.join("driver"));
    let drv = root.join("sys/bus/pci/drivers").join(driver);
    fs::create_dir_all(&drv).unwrap();
    // A driver's folder has its write-only bind and unbind files.
    for f in ["bind", "unbind"] {
        if !drv.join(f).exists() {
            fs::write(drv.join(f), "").unwrap();
        }
    }
    symlink(
        format!("../../../bus/pci/drivers/{driver}"),
        dev.join("driver"),
    )
    .unwrap();
}

const GOOD_CMDLINE: &str =
    "BOOT_IMAGE=/vmlinuz-6.1.0-13-amd64 root=/dev/nvme0n1p2 ro quiet amd_iommu=on iommu=pt";

/// The X570 passthrough host (GTX 1080 Ti for the VM, GT 710 for the host) set up right.
pub fn good_host() -> tempfile::TempDir {
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
pub fn bad_host() -> tempfile::TempDir {
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
