//! The listing parser and the sysfs writer on real listings and bad ones.

use super::*;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/listings"
    ))
    .join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse_fixture(name: &str) -> Listing {
    parse_listing(&fixture(name))
}

fn dev<'a>(listing: &'a Listing, address: &str) -> &'a ListedDevice {
    listing
        .device(address)
        .unwrap_or_else(|| panic!("{address} missing"))
}

fn group_count(listing: &Listing) -> usize {
    let mut groups: Vec<u32> = listing.devices.iter().filter_map(|d| d.group).collect();
    groups.sort_unstable();
    groups.dedup();
    groups.len()
}

fn gpus(listing: &Listing) -> Vec<&str> {
    listing
        .devices
        .iter()
        .filter(|d| matches!(d.class_code, 0x0300 | 0x0302 | 0x0380))
        .map(|d| d.address.as_str())
        .collect()
}

#[test]
fn indented_groups_give_every_device_with_class_ids_and_revision() {
    let listing = parse_fixture("asrock-z170-gaming-itx-ac-skylake.txt");
    assert_eq!(listing.devices.len(), 20);
    assert_eq!(group_count(&listing), 14);
    assert_eq!(gpus(&listing), ["0000:00:02.0", "0000:01:00.0"]);
    let gtx = dev(&listing, "0000:01:00.0");
    assert_eq!(
        (gtx.class_code, gtx.vendor_id, gtx.device_id),
        (0x0300, 0x10de, 0x1401)
    );
    assert_eq!(
        (gtx.revision, gtx.group, gtx.driver.as_deref()),
        (Some(0xa1), Some(1), None)
    );
    assert!(
        gtx.text
            .starts_with("VGA compatible controller [0300]: NVIDIA"),
        "{}",
        gtx.text
    );
    assert_eq!(listing.group_members(10).len(), 4);
    assert_eq!(dev(&listing, "0000:03:00.0").revision, None);
    let mut sorted = listing.devices.clone();
    sorted.sort_by(|a, b| a.address.cmp(&b.address));
    assert_eq!(sorted, listing.devices);
}

#[test]
fn one_line_per_device_form_with_bracketed_names() {
    let listing = parse_fixture("gigabyte-b550-aorus-pro-ryzen9-3900x.txt");
    assert_eq!(listing.devices.len(), 40);
    assert_eq!(group_count(&listing), 25);
    assert_eq!(listing.group_members(15).len(), 8);
    let navi = dev(&listing, "0000:08:00.0");
    assert_eq!(
        (navi.vendor_id, navi.device_id, navi.group),
        (0x1002, 0x73a5, Some(18))
    );
    // "[E:B]" and "[AMD]" in names are neither class nor ids.
    let gpp = dev(&listing, "0000:00:07.1");
    assert_eq!(
        (gpp.class_code, gpp.device_id, gpp.group),
        (0x0604, 0x1484, Some(9))
    );
}

#[test]
fn dmesg_lines_and_group_listing_agree() {
    let listing = parse_fixture("amd-phoenix-laptop-rtx4060-iommu-groups.txt");
    assert_eq!(listing.devices.len(), 37);
    assert_eq!(group_count(&listing), 7);
    assert_eq!(listing.group_members(0).len(), 6);
    assert_eq!(dev(&listing, "0000:09:00.0").group, Some(4));
    // Only the dmesg line names it with its domain; ids come from the lspci line.
    assert_eq!(dev(&listing, "0000:01:00.0").device_id, 0x28e0);
    // A dmesg line alone (no ids) yields no device.
    let only_dmesg = parse_listing("[    0.49] pci 0000:00:01.0: Adding to iommu group 0\n");
    assert!(only_dmesg.devices.is_empty());
}

#[test]
fn driver_lines_bind_the_device_above_and_none_means_unbound() {
    let listing = parse_fixture("asrock-trx40-creator-threadripper-3960x.txt");
    assert_eq!(listing.devices.len(), 89);
    assert_eq!(group_count(&listing), 73);
    assert_eq!(
        gpus(&listing),
        ["0000:01:00.0", "0000:21:00.0", "0000:4c:00.0"]
    );
    assert_eq!(
        dev(&listing, "0000:21:00.0").driver.as_deref(),
        Some("vfio-pci")
    );
    assert_eq!(
        dev(&listing, "0000:01:00.0").driver.as_deref(),
        Some("nouveau")
    );
    assert_eq!(
        dev(&listing, "0000:47:00.1").driver.as_deref(),
        Some("xhci_hcd")
    );
    assert_eq!(dev(&listing, "0000:00:14.3").driver, None);
    assert_eq!(
        dev(&listing, "0000:00:18.3").driver.as_deref(),
        Some("k10temp")
    );
    let bound = listing
        .devices
        .iter()
        .filter(|d| d.driver.is_some())
        .count();
    assert_eq!(bound, 44);
}

#[test]
fn a_later_lspci_nnk_section_keeps_the_groups_and_adds_drivers() {
    let listing = parse_fixture("intel-alderlake-s-desktop-thunderbolt-lspci-nnk.txt");
    assert_eq!(listing.devices.len(), 43);
    assert_eq!(group_count(&listing), 36);
    assert_eq!(dev(&listing, "0000:00:00.0").group, Some(0));
    assert_eq!(dev(&listing, "0000:41:00.0").group, Some(35));
    assert_eq!(
        dev(&listing, "0000:04:00.0").driver.as_deref(),
        Some("vfio-pci")
    );
    assert_eq!(
        dev(&listing, "0000:00:02.0").driver.as_deref(),
        Some("i915")
    );
    assert_eq!(dev(&listing, "0000:00:14.2").driver, None);
    // Subsystem lines carry ids too, but they must not replace the device's own.
    assert_eq!(dev(&listing, "0000:03:00.0").device_id, 0x73df);
}

#[test]
fn prompts_end_a_group_and_lspci_v_flags_name_the_block_above() {
    let text = "IOMMU Group 3:\n\t00:02.0 VGA compatible controller [0300]: X [8086:4680]\n\
                me@host$ lspci -nnk\n01:00.0 Audio device [0403]: Y [10de:0fba] (rev a1)\n\
                \tKernel driver in use: snd_hda_intel\n\
                05:10.0 Ethernet controller [0200]: Z [8086:1565]\n\
                \tFlags: bus master, fast devsel, latency 0, IOMMU group 27\n";
    let listing = parse_listing(text);
    assert_eq!(dev(&listing, "0000:00:02.0").group, Some(3));
    let audio = dev(&listing, "0000:01:00.0");
    assert_eq!(
        (audio.group, audio.driver.as_deref()),
        (None, Some("snd_hda_intel"))
    );
    assert_eq!(dev(&listing, "0000:05:10.0").group, Some(27));
}

#[test]
fn dmar_tree_with_repeated_entries() {
    let listing = parse_fixture("intel-xeon-server-dmar-iommu-group-tree.txt");
    assert_eq!(listing.devices.len(), 483);
    assert_eq!(group_count(&listing), 462);
    assert_eq!(gpus(&listing), ["0000:03:00.0"]);
    assert_eq!(dev(&listing, "0000:03:00.0").group, Some(64));
    assert_eq!(listing.group_members(57).len(), 2);
}

#[test]
fn truncated_ids_drop_the_device() {
    let listing = parse_fixture("msi-b450m-mortar-max-ryzen-matisse.txt");
    assert_eq!(listing.devices.len(), 40);
    assert!(listing.device("0000:25:00.1").is_none());
    assert_eq!(listing.group_members(11).len(), 8);
}

#[test]
fn listings_without_numeric_ids_give_no_devices() {
    for name in [
        "sriov-connectx4lx-vfs-workstation.txt",
        "sriov-x550t2-vfs-workstation.txt",
        "apple-silicon-asahi-proc-interrupts.txt",
        "intel-n100-minipc-proc-interrupts.txt",
        "x86-128cpu-server-vfio-msix-interrupts-excerpt.txt",
    ] {
        assert_eq!(parse_fixture(name).devices, [], "{name}");
    }
    let vfs = parse_fixture("mellanox-connectx4lx-vfs-share-group-c246.txt");
    assert_eq!(vfs.group_members(1).len(), 6);
    assert_eq!(dev(&vfs, "0000:01:00.5").device_id, 0x1016);
}

#[test]
fn never_panics_on_cut_or_odd_text() {
    let text = fixture("asrock-trx40-creator-threadripper-3960x.txt");
    for (cut, _) in text.char_indices().step_by(41) {
        let _ = parse_listing(&text[..cut]);
        let _ = parse_listing(&text[cut..]);
    }
    for odd in [
        "[",
        "0000:",
        "00:00.",
        "IOMMU group 99999999999 00:00.0 [zzzz]",
        "(rev ",
        "Driver: ../x",
        "├─ 00:1f.9 [0300]: [1:2]",
    ] {
        let _ = parse_listing(odd);
    }
    assert_eq!(
        parse_listing("01:20.0 VGA [0300]: X [10de:1401]").devices,
        []
    );
}

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A fresh empty directory under the system temp dir.
fn temp_root(tag: &str) -> io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let root = std::env::temp_dir().join(format!("listing-{tag}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(&root)?;
    Ok(root)
}

#[test]
fn sysfs_links_resolve_like_real_sysfs() -> TestResult {
    let listing = parse_fixture("asrock-trx40-creator-threadripper-3960x.txt");
    let root = temp_root("sysfs")?;
    write_sysfs(&listing, &root)?;
    write_sysfs(&listing, &root)?; // writing twice replaces, does not fail
    let sys = root.join("sys").canonicalize()?;
    for d in &listing.devices {
        let dir = sys.join("devices/pci0000:00").join(&d.address);
        assert_eq!(
            sys.join("bus/pci/devices")
                .join(&d.address)
                .canonicalize()?,
            dir
        );
        assert_eq!(dir.join("subsystem").canonicalize()?, sys.join("bus/pci"));
        assert_eq!(
            fs::read_to_string(dir.join("vendor"))?,
            format!("0x{:04x}\n", d.vendor_id)
        );
        let group = d.group.ok_or("every trx40 device has a group")?;
        let group_dir = sys.join(format!("kernel/iommu_groups/{group}"));
        assert_eq!(dir.join("iommu_group").canonicalize()?, group_dir);
        assert_eq!(
            group_dir.join("devices").join(&d.address).canonicalize()?,
            dir
        );
        match &d.driver {
            Some(drv) => {
                let drv_dir = sys.join("bus/pci/drivers").join(drv);
                assert_eq!(dir.join("driver").canonicalize()?, drv_dir);
                assert_eq!(drv_dir.join(&d.address).canonicalize()?, dir);
            }
            None => assert!(fs::symlink_metadata(dir.join("driver")).is_err()),
        }
    }
    let gtx = sys.join("devices/pci0000:00/0000:21:00.0");
    assert_eq!(fs::read_to_string(gtx.join("class"))?, "0x030000\n");
    assert_eq!(fs::read_to_string(gtx.join("device"))?, "0x1b80\n");
    assert_eq!(fs::read_to_string(gtx.join("revision"))?, "0xa1\n");
    assert_eq!(fs::read_to_string(gtx.join("numa_node"))?, "-1\n");
    assert!(
        !sys.join("devices/pci0000:00/0000:43:00.0/revision")
            .exists()
    );
    assert_eq!(
        fs::read_dir(sys.join("kernel/iommu_groups/26/devices"))?.count(),
        2
    );
    assert_eq!(
        fs::read_dir(sys.join("bus/pci/drivers/vfio-pci"))?.count(),
        10
    );
    fs::remove_dir_all(&root)?;
    Ok(())
}

#[test]
fn sysfs_refuses_names_that_escape_the_tree() -> TestResult {
    let root = temp_root("refuse")?;
    let mut listing = parse_listing("IOMMU Group 1 01:00.0 VGA [0300]: X [10de:1401]\n");
    let device = listing.devices.first_mut().ok_or("one device")?;
    device.driver = Some("../../etc".to_string());
    assert!(write_sysfs(&listing, &root).is_err());
    let device = listing.devices.first_mut().ok_or("one device")?;
    device.driver = None;
    device.address = "0000:01:00.0/../..".to_string();
    assert!(write_sysfs(&listing, &root).is_err());
    fs::remove_dir_all(&root)?;
    Ok(())
}
