//! Desktops people own, as trees from real machines' listings with the
//! parts of 2023-26 put in: an iGPU and a card, their IDs, which one the
//! firmware shows the boot screen on, the CPU's name, the board's maker.

use super::hosts::{base_host, bind, put};
use std::fs;
use std::path::Path;

pub const AM5: &str = "asus-b650e-f-ryzen5-7600x-rx7900xt-raphael.txt";
pub const ADL: &str = "intel-alderlake-s-desktop-thunderbolt-lspci-nnk.txt";
pub const AM5_CARD: &str = "0000:03:00.0";
pub const AM5_IGPU: &str = "0000:0f:00.0";

pub fn dev(r: &Path, addr: &str) -> std::path::PathBuf {
    r.join("sys/devices/pci0000:00").join(addr)
}

pub fn set_ids(r: &Path, addr: &str, vendor: u16, device: u16) {
    fs::write(dev(r, addr).join("vendor"), format!("0x{vendor:04x}\n")).unwrap();
    fs::write(dev(r, addr).join("device"), format!("0x{device:04x}\n")).unwrap();
}

pub fn boot_vga(r: &Path, on: &str, gpus: &[&str]) {
    for g in gpus {
        let v = if *g == on { "1" } else { "0" };
        fs::write(dev(r, g).join("boot_vga"), format!("{v}\n")).unwrap();
    }
}

/// A card's own PCIe link (an iGPU has none).
pub fn link(r: &Path, addr: &str, gts: &str, width: u32) {
    fs::write(
        dev(r, addr).join("max_link_speed"),
        format!("{gts} GT/s PCIe\n"),
    )
    .unwrap();
    fs::write(dev(r, addr).join("max_link_width"), format!("{width}\n")).unwrap();
}

pub fn cpu(r: &Path, vendor: &str, model: &str) {
    let p = r.join("proc/cpuinfo");
    let text = fs::read_to_string(&p).unwrap();
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("model name") {
                format!("model name\t: {model}")
            } else if l.starts_with("vendor_id") {
                format!("vendor_id\t: {vendor}")
            } else {
                l.to_string()
            }
        })
        .collect();
    fs::write(p, out.join("\n") + "\n").unwrap();
}

pub fn board(r: &Path, vendor: &str) {
    put(r, "sys/class/dmi/id/board_vendor", &format!("{vendor}\n"));
}

/// A device gone from PCI (the firmware turned it off).
pub fn remove(r: &Path, addr: &str) {
    fs::remove_dir_all(dev(r, addr)).unwrap();
    fs::remove_file(r.join("sys/bus/pci/devices").join(addr)).unwrap();
    for g in fs::read_dir(r.join("sys/kernel/iommu_groups"))
        .unwrap()
        .flatten()
    {
        let _ = fs::remove_file(g.path().join("devices").join(addr));
    }
}

/// The AM5 desktop with `igpu` and `card` IDs, the screen on `screen_on`.
pub fn am5(igpu: (u16, u16), card: (u16, u16, &str), screen_on: &str) -> tempfile::TempDir {
    let dir = base_host(AM5);
    let r = dir.path();
    set_ids(r, AM5_IGPU, igpu.0, igpu.1);
    set_ids(r, AM5_CARD, card.0, card.1);
    bind(r, AM5_IGPU, "amdgpu");
    bind(r, AM5_CARD, card.2);
    bind(r, "0000:03:00.1", "snd_hda_intel");
    link(r, AM5_CARD, "16.0", 16);
    boot_vga(r, screen_on, &[AM5_IGPU, AM5_CARD]);
    cpu(r, "AuthenticAMD", "AMD Ryzen 5 7600X 6-Core Processor");
    board(r, "ASUSTeK COMPUTER INC.");
    dir
}
