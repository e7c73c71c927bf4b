//! PCI devices and IOMMU verdicts on real machines: each IOMMU listing in
//! tests/fixtures/listings (the source of truth) is turned into a sysfs tree and
//! scanned; every GPU's verdict must equal the `.expect` file written next to it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::listing::{parse_listing, write_sysfs};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use vfio_assistant::host::iommu::VerdictKind;
use vfio_assistant::host::{HostSnapshot, scan};
use vfio_assistant::sysroot::HostRoot;

fn listings_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/listings")
}

fn tree_for(listing_file: &Path) -> tempfile::TempDir {
    let text = fs::read_to_string(listing_file).unwrap();
    let listing = parse_listing(&text);
    let dir = tempfile::tempdir().unwrap();
    write_sysfs(&listing, dir.path()).unwrap();
    dir
}

#[derive(Debug)]
struct Expect {
    device: String,
    verdict: String,
    companions: Vec<String>,
    blockers: Vec<String>,
}

fn parse_expect(text: &str) -> Vec<Expect> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("device=")) {
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for part in line.split_whitespace() {
            if let Some((k, v)) = part.split_once('=') {
                fields.insert(k, v);
            }
        }
        let list = |k: &str| -> Vec<String> {
            fields
                .get(k)
                .map(|v| {
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        out.push(Expect {
            device: fields["device"].to_string(),
            verdict: fields["verdict"].to_string(),
            companions: list("companions"),
            blockers: list("blockers"),
        });
    }
    out
}

fn verdict_name(v: VerdictKind) -> &'static str {
    match v {
        VerdictKind::ViableAlone => "viable_alone",
        VerdictKind::ViableWith => "viable_with",
        VerdictKind::NotViable => "not_viable",
        VerdictKind::NoIommu => "no_iommu",
    }
}

#[test]
fn every_listing_gpu_gets_the_expected_verdict() {
    let mut checked = 0;
    for entry in fs::read_dir(listings_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "expect") {
            continue;
        }
        let listing = path.with_extension("txt");
        let expects = parse_expect(&fs::read_to_string(&path).unwrap());
        if expects.is_empty() {
            continue;
        }
        let dir = tree_for(&listing);
        let snap = scan(&HostRoot::at(dir.path())).unwrap();
        let name = listing.file_name().unwrap().to_string_lossy().to_string();
        for e in expects {
            if e.verdict == "unknown" {
                continue;
            }
            let dev = snap
                .device(&e.device)
                .unwrap_or_else(|| panic!("{name}: {} missing", e.device));
            let v = &dev.passthrough;
            assert_eq!(
                verdict_name(v.verdict),
                e.verdict,
                "{name} {}: {}",
                e.device,
                v.reason
            );
            assert_eq!(
                v.companions, e.companions,
                "{name} {}: companions",
                e.device
            );
            let blockers: Vec<String> = v.blockers.iter().map(|b| b.address.clone()).collect();
            let mut want_blockers = e.blockers.clone();
            want_blockers.sort();
            let mut got = blockers.clone();
            got.sort();
            got.dedup();
            assert_eq!(got, want_blockers, "{name} {}: blockers", e.device);
            assert!(v.reason.len() > 20, "{name}: a reason in words");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} GPU verdicts checked");
}

/// Make the host use a device: a disk on it mounted at `/`.
fn mount_root_disk_on(root: &Path, address: &str, disk: &str) {
    let dev = root
        .join("sys/devices/pci0000:00")
        .join(address)
        .join("block")
        .join(disk);
    fs::create_dir_all(&dev).unwrap();
    fs::create_dir_all(root.join("sys/class/block")).unwrap();
    symlink(
        format!("../../devices/pci0000:00/{address}/block/{disk}"),
        root.join("sys/class/block").join(disk),
    )
    .unwrap();
    fs::create_dir_all(root.join("proc")).unwrap();
    fs::write(
        root.join("proc/mounts"),
        format!("/dev/{disk} / ext4 rw,relatime 0 0\n"),
    )
    .unwrap();
}

#[test]
fn a_companion_the_host_boots_from_blocks_the_gpu() {
    // The Phoenix laptop: the RTX 4060 shares group 0 with the NVMe drive.
    let dir = tree_for(&listings_dir().join("amd-phoenix-laptop-rtx4060-iommu-groups.txt"));
    let before = scan(&HostRoot::at(dir.path())).unwrap();
    assert_eq!(
        before.device("0000:01:00.0").unwrap().passthrough.verdict,
        VerdictKind::ViableWith
    );
    mount_root_disk_on(dir.path(), "0000:02:00.0", "nvme0n1");
    let after = scan(&HostRoot::at(dir.path())).unwrap();
    let v = &after.device("0000:01:00.0").unwrap().passthrough;
    assert_eq!(v.verdict, VerdictKind::NotViable);
    assert_eq!(v.blockers[0].address, "0000:02:00.0");
    assert!(
        v.blockers[0].reason.contains("mounted at /"),
        "{}",
        v.blockers[0].reason
    );
    assert!(v.reason.contains("02:00.0"), "{}", v.reason);
}

#[test]
fn chipset_essentials_block_and_bridges_stay_with_the_host() {
    // B550 SMBus + ISA bridge share group 12; the Xeon's bridge sits with the ASPEED GPU.
    let dir = tree_for(&listings_dir().join("gigabyte-b550-aorus-pro-ryzen9-3900x.txt"));
    let s = scan(&HostRoot::at(dir.path())).unwrap();
    let smbus = &s.device("0000:00:14.0").unwrap().passthrough;
    assert_eq!(smbus.verdict, VerdictKind::NotViable);
    assert!(smbus.blockers.iter().any(|b| b.reason.contains("SMBus")));
    assert!(
        smbus
            .blockers
            .iter()
            .any(|b| b.address == "0000:00:14.3" && b.reason.contains("ISA"))
    );
    let gpu = &s.device("0000:04:00.0").unwrap().passthrough;
    assert!(!gpu.bridges_left_to_host.is_empty());
    assert!(
        gpu.notes
            .iter()
            .any(|n| n.contains("SATA") || n.contains("USB")),
        "{:?}",
        gpu.notes
    );
}

#[test]
fn sriov_pf_and_vfs_share_one_group_on_a_consumer_board() {
    let dir = tree_for(&listings_dir().join("mellanox-connectx4lx-vfs-share-group-c246.txt"));
    let s = scan(&HostRoot::at(dir.path())).unwrap();
    assert_eq!(s.iommu_groups.len(), 1);
    assert_eq!(s.iommu_groups[0].devices.len(), 6);
}

fn scan_dir(p: &Path) -> HostSnapshot {
    scan(&HostRoot::at(p)).unwrap()
}

#[test]
fn real_pci_sysfs_attributes_are_read() {
    // prometheus/procfs: curated real PCI sysfs entries.
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pci-sysfs/prometheus-procfs");
    let s = scan_dir(&root);
    let nvme = s.device("0000:01:00.0").unwrap();
    assert_eq!(nvme.device.reset.methods, vec!["flr", "bus"]);
    assert!(nvme.device.reset.can_reset);
    assert_eq!(nvme.device.link.current_speed_gts, Some(8.0));
    assert_eq!(nvme.device.iommu_group, Some(11));
    assert_eq!(nvme.device.parent_bridges, vec!["0000:00:02.1"]);
    let port = s.device("0000:00:02.1").unwrap();
    assert_eq!(port.device.reset.methods, vec!["pm"]);
    let e810 = s.device("0000:a2:00.0").unwrap();
    let sriov = e810.device.sriov.as_ref().unwrap();
    assert_eq!((sriov.total_vfs, sriov.num_vfs), (128, 0));
    assert_eq!(e810.device.link.current_speed_gts, Some(16.0));
    assert_eq!(e810.device.link.current_width, Some(8));
}

#[test]
fn group_links_without_the_group_directory_still_give_groups() {
    // ghw's Alder Lake laptop snapshot keeps iommu_group links but not
    // sys/kernel/iommu_groups: groups come from the links.
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/ghw-intel-i7-1270P");
    let s = scan_dir(&root);
    assert_eq!(s.pci_devices.len(), 23);
    assert!(s.iommu.active);
    assert!(s.pci_devices.iter().all(|e| e.device.iommu_group.is_some()));
    let gpu = s.gpus().next().unwrap();
    assert_eq!(gpu.device.vendor_id.0, 0x8086);
    assert_eq!(gpu.device.driver.as_deref(), Some("i915"));
}

/// The X550-T2 transcript (tests/fixtures/listings/sriov-x550t2-vfs-workstation.txt):
/// 2 VFs per port; the VF offset/stride puts PF0's VFs at 05:10.0/05:10.2 and PF1's
/// at 05:10.1/05:10.3; VF 05:10.0 is alone in IOMMU group 27. Built by hand from
/// the transcript (it has no ids in lspci -nn form). `sriov_totalvfs` is not in the
/// transcript: 63 is what ixgbe reports for the X550.
fn x550_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let dev = |addr: &str, device: &str, group: u32| {
        let p = r.join("sys/devices/pci0000:00/0000:00:1c.0").join(addr);
        fs::create_dir_all(&p).unwrap();
        fs::write(p.join("vendor"), "0x8086\n").unwrap();
        fs::write(p.join("device"), format!("0x{device}\n")).unwrap();
        fs::write(p.join("class"), "0x020000\n").unwrap();
        fs::create_dir_all(r.join("sys/bus/pci/devices")).unwrap();
        symlink(
            format!("../../../devices/pci0000:00/0000:00:1c.0/{addr}"),
            r.join("sys/bus/pci/devices").join(addr),
        )
        .unwrap();
        let g = r.join(format!("sys/kernel/iommu_groups/{group}/devices"));
        fs::create_dir_all(&g).unwrap();
        symlink(
            format!("../../../../devices/pci0000:00/0000:00:1c.0/{addr}"),
            g.join(addr),
        )
        .unwrap();
        symlink(
            format!("../../../../kernel/iommu_groups/{group}"),
            p.join("iommu_group"),
        )
        .unwrap();
        p
    };
    let pf0 = dev("0000:05:00.0", "1563", 20);
    let pf1 = dev("0000:05:00.1", "1563", 21);
    for (pf, vfs) in [
        (&pf0, ["0000:05:10.0", "0000:05:10.2"]),
        (&pf1, ["0000:05:10.1", "0000:05:10.3"]),
    ] {
        fs::write(pf.join("sriov_totalvfs"), "63\n").unwrap();
        fs::write(pf.join("sriov_numvfs"), "2\n").unwrap();
        for (i, vf) in vfs.iter().enumerate() {
            symlink(format!("../{vf}"), pf.join(format!("virtfn{i}"))).unwrap();
        }
    }
    for (vf, group, pf) in [
        ("0000:05:10.0", 27, "0000:05:00.0"),
        ("0000:05:10.1", 28, "0000:05:00.1"),
        ("0000:05:10.2", 29, "0000:05:00.0"),
        ("0000:05:10.3", 30, "0000:05:00.1"),
    ] {
        let p = dev(vf, "1565", group);
        symlink(format!("../{pf}"), p.join("physfn")).unwrap();
    }
    dir
}

#[test]
fn sriov_vfs_know_their_pf_and_pass_through_alone() {
    let dir = x550_tree();
    let s = scan(&HostRoot::at(dir.path())).unwrap();
    let pf0 = s.device("0000:05:00.0").unwrap();
    let sriov = pf0.device.sriov.as_ref().unwrap();
    assert_eq!((sriov.total_vfs, sriov.num_vfs), (63, 2));
    assert_eq!(sriov.vfs, vec!["0000:05:10.0", "0000:05:10.2"]);
    let vf = s.device("0000:05:10.0").unwrap();
    assert_eq!(vf.device.physfn.as_deref(), Some("0000:05:00.0"));
    assert_eq!(
        vf.device.device_name.as_deref(),
        Some("X550 Virtual Function")
    );
    // ARI puts four VFs at device 10: they are not one card's sibling functions.
    assert_eq!(
        vf.passthrough.verdict,
        VerdictKind::ViableAlone,
        "{}",
        vf.passthrough.reason
    );
    // The two ports of the card are siblings; their VFs are not.
    assert_eq!(pf0.passthrough.companions, vec!["0000:05:00.1"]);
}
