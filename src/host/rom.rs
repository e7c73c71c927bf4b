//! A PCI device's expansion ROM from sysfs (`/sys/bus/pci/devices/ADDR/rom`).
//! The kernel gives the bytes only after "1" is written to that file (which
//! maps the ROM BAR) and expects "0" after reading; both need root. This is
//! the one place the app writes to sysfs, and only on the live host when
//! asked (`check --read-rom`, `rom ADDRESS`): it changes no configuration.
//! On a captured root the file is read as it is.

use crate::sysroot::{HostPath, HostRoot};

/// Largest ROM read (GPU ROMs are 128 KiB – 2 MiB).
const MAX_ROM: u64 = 16 * 1024 * 1024;

/// The sysfs path of `addr`'s ROM.
pub fn rom_path(addr: &str) -> HostPath {
    HostPath::sys(&format!("bus/pci/devices/{addr}/rom"))
}

/// The ROM bytes of `addr`, or why not.
pub fn read_card_rom(root: &HostRoot, addr: &str) -> Result<Vec<u8>, String> {
    let path = rom_path(addr);
    if !root.exists(&path) {
        return Err(format!("{path} does not exist: the device has no ROM BAR"));
    }
    if !root.is_live() {
        return root.read_bytes(&path, MAX_ROM).map_err(|e| e.to_string());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "run as root: the kernel gives a card's ROM only to root, after enabling it".into(),
        );
    }
    let file = root.resolve(&path);
    std::fs::write(&file, "1").map_err(|e| format!("enabling {path}: {e}"))?;
    let read = root
        .read_bytes(&path, MAX_ROM)
        .map_err(|e| format!("{e} (some cards give their ROM only while no driver uses them)"));
    // Always switch it off again, whatever the read gave.
    let off = std::fs::write(&file, "0");
    let bytes = read?;
    off.map_err(|e| format!("disabling {path} after reading: {e}"))?;
    Ok(bytes)
}
