//! A PCI device's expansion ROM from sysfs (`/sys/bus/pci/devices/ADDR/rom`).
//! Not in `host/`, which only reads: switching the ROM BAR on is a write.
//! The kernel gives the bytes only after "1" is written to that file (which
//! maps the ROM BAR) and expects "0" after reading; both need root. This is
//! the one place the app writes to sysfs, and only on the live host when
//! asked (`check --read-rom`, `rom ADDRESS`): it changes no configuration.
//! On a captured root the file is read as it is.

use crate::sysroot::{HostPath, HostRoot};
use std::path::Path;

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
        if !root.is_live() {
            // A capture (the demo, a snapshot) never holds ROMs: reading one
            // takes root and switching the ROM BAR on. That says nothing
            // about the card.
            return Err(format!(
                "this capture does not hold {path} (a snapshot never reads ROMs); on that host `sudo vfio-assistant rom {addr} --save FILE` reads it, and `vfio-assistant rom --file FILE` checks the file anywhere"
            ));
        }
        return Err(format!("{path} does not exist: the device has no ROM BAR"));
    }
    if !root.is_live() {
        return root.read_bytes(&path, MAX_ROM).map_err(|e| e.to_string());
    }
    if !rustix::process::geteuid().is_root() {
        return Err(
            "run as root: the kernel gives a card's ROM only to root, after enabling it".into(),
        );
    }
    let file = root.resolve(&path);
    with_rom_enabled(&file, &path.to_string(), || {
        root.read_bytes(&path, MAX_ROM)
            .map_err(|e| format!("{e} (some cards give their ROM only while no driver uses them)"))
    })
}

/// The ROM BAR switched on (`1` written to `rom`) until `disable` or drop:
/// whatever happens while reading (an error, a panic), it is switched off
/// again. A kill -9 in between is the one case nothing can mend.
struct RomEnabled<'a> {
    file: &'a Path,
    shown: &'a str,
    disabled: bool,
}

impl<'a> RomEnabled<'a> {
    fn enable(file: &'a Path, shown: &'a str) -> Result<Self, String> {
        std::fs::write(file, "1").map_err(|e| format!("enabling {shown}: {e}"))?;
        Ok(RomEnabled {
            file,
            shown,
            disabled: false,
        })
    }

    fn disable(mut self) -> Result<(), String> {
        self.disabled = true;
        std::fs::write(self.file, "0").map_err(|e| not_restored(self.shown, &e))
    }
}

fn not_restored(shown: &str, e: &std::io::Error) -> String {
    format!(
        "disabling {shown} after reading failed ({e}): the ROM BAR stays mapped until `echo 0 | sudo tee {shown}` or a reboot"
    )
}

impl Drop for RomEnabled<'_> {
    fn drop(&mut self) {
        if !self.disabled
            && let Err(e) = std::fs::write(self.file, "0")
        {
            // Only reached while unwinding from a panic: nobody is left to
            // return this to, so say it where the user sees it.
            eprintln!("vfio-assistant: {}", not_restored(self.shown, &e));
        }
    }
}

/// Run `read` with the ROM at `file` enabled, and disable it again after,
/// whatever `read` gave (or if it panicked). A failure to disable is an error.
fn with_rom_enabled(
    file: &Path,
    shown: &str,
    read: impl FnOnce() -> Result<Vec<u8>, String>,
) -> Result<Vec<u8>, String> {
    let enabled = RomEnabled::enable(file, shown)?;
    let bytes = read();
    match (enabled.disable(), bytes) {
        (Ok(()), bytes) => bytes,
        (Err(off), Ok(_)) => Err(off),
        (Err(off), Err(read)) => Err(format!("{read}; and {off}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rom_is_disabled_again_whatever_the_read_does() {
        let dir = tempfile::tempdir().unwrap();
        let rom = dir.path().join("rom");
        std::fs::write(&rom, "").unwrap();
        let shown = rom_path("0000:01:00.0").to_string();
        let seen = with_rom_enabled(&rom, &shown, || Ok(std::fs::read(&rom).unwrap()));
        assert_eq!(seen.unwrap(), b"1", "enabled while reading");
        assert_eq!(std::fs::read_to_string(&rom).unwrap(), "0");

        let e = with_rom_enabled(&rom, &shown, || Err("no ROM".into()));
        assert_eq!(e.unwrap_err(), "no ROM");
        assert_eq!(std::fs::read_to_string(&rom).unwrap(), "0");

        std::fs::write(&rom, "").unwrap();
        let panicked = std::panic::catch_unwind(|| {
            with_rom_enabled(&rom, &shown, || panic!("a bug while reading"))
        });
        assert!(panicked.is_err());
        assert_eq!(
            std::fs::read_to_string(&rom).unwrap(),
            "0",
            "restored on unwind"
        );
    }

    #[test]
    fn a_rom_that_cannot_be_disabled_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let rom = dir.path().join("rom");
        std::fs::write(&rom, "").unwrap();
        let shown = rom_path("0000:01:00.0").to_string();
        let e = with_rom_enabled(&rom, &shown, || {
            // The file goes away under us: writing "0" cannot work.
            std::fs::remove_file(&rom).unwrap();
            std::fs::create_dir(&rom).unwrap();
            Ok(vec![0x55, 0xaa])
        })
        .unwrap_err();
        assert!(e.contains("stays mapped"), "{e}");
        assert!(e.contains(&format!("echo 0 | sudo tee {shown}")), "{e}");
    }
}
