//! The bundled demo host (assets/demo-host.tar.gz) is built from real data and
//! stays faithful to it: the PCI devices and IOMMU groups of a Gigabyte X570
//! AORUS PRO WIFI listing and the CPU topology of a real Ryzen 5 1600 (see
//! assets/demo-host.SOURCE.md). Rebuild it with
//! `cargo test --test it demo_asset::build_demo_asset -- --ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::copy_tree;
use crate::support::listing::{parse_listing, write_sysfs};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use vfio_assistant::capture::capture;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

const LISTING: &str = "tests/fixtures/listings/gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt";
const CPU_HOST: &str = "tests/fixtures/topology/ghw-amd-ryzen5-1600";

fn manifest(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
#[ignore = "rebuilds assets/demo-host.tar.gz"]
fn build_demo_asset() {
    let dir = tempfile::tempdir().unwrap();
    let listing = parse_listing(&fs::read_to_string(manifest(LISTING)).unwrap());
    write_sysfs(&listing, dir.path()).unwrap();
    copy_tree(
        &manifest(CPU_HOST).join("sys/devices/system"),
        &dir.path().join("sys/devices/system"),
    );
    fs::create_dir_all(dir.path().join("proc")).unwrap();
    fs::copy(
        manifest(CPU_HOST).join("proc/cpuinfo"),
        dir.path().join("proc/cpuinfo"),
    )
    .unwrap();
    capture(
        &HostRoot::at(dir.path()),
        &manifest("assets/demo-host.tar.gz"),
        true,
    )
    .unwrap();
}

#[test]
fn demo_host_is_the_listing_and_the_real_cpu() {
    let (root, _guard) = vfio_assistant::demo::unpack_demo().unwrap();
    let demo = scan(&root).unwrap();
    let listing = parse_listing(&fs::read_to_string(manifest(LISTING)).unwrap());
    let listed: BTreeSet<(String, Option<u32>)> = listing
        .devices
        .iter()
        .map(|d| (d.address.clone(), d.group))
        .collect();
    let ours: BTreeSet<(String, Option<u32>)> = demo
        .pci_devices
        .iter()
        .map(|e| (e.device.address.clone(), e.device.iommu_group))
        .collect();
    assert_eq!(ours, listed);
    let cpu_host = scan(&HostRoot::at(manifest(CPU_HOST))).unwrap();
    assert_eq!(demo.topology.cores, cpu_host.topology.cores);
    assert_eq!(demo.cpu.model_name, cpu_host.cpu.model_name);
    assert!(demo.iommu.active);
    assert!(demo.gpus().count() >= 2);
}
