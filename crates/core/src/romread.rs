//! A PCI device's expansion ROM from sysfs (`/sys/bus/pci/devices/ADDR/rom`).
//! Not in `host/`, which only reads: switching the ROM BAR on is a write.
//! The kernel gives the bytes only after "1" is written to that file (which
//! maps the ROM BAR) and expects "0" after reading; both need root. This is
//! the one place the app writes to sysfs, and only on the live host when
//! asked (`check --read-rom`, `rom ADDRESS`): it changes no configuration.
//! On a captured root the file is read as it is.

use crate::sysroot::{HostPath, HostRoot, ReadError};
use crate::userfile::UserFileError;
use std::path::Path;

/// Why a ROM has no bytes to judge. `checks::rom` picks its fix by the
/// variant (a device without a ROM BAR wants a file, the rest root or an
/// idle card).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RomError {
    #[error(
        "this capture does not hold {path} (a snapshot never reads ROMs); on that host `sudo vfio-assistant rom {addr} --save FILE` reads it, and `vfio-assistant rom --file FILE` checks the file anywhere"
    )]
    NotCaptured { path: String, addr: String },
    #[error("{path} does not exist: the device has no ROM BAR")]
    NoRomBar { path: String },
    #[error("run as root: the kernel gives a card's ROM only to root, after enabling it")]
    NotRoot,
    /// A captured root's file that could not be read.
    #[error("{0}")]
    Read(ReadError),
    /// The live card's ROM, enabled, and still not readable.
    #[error("{0} (some cards give their ROM only while no driver uses them)")]
    Enabled(ReadError),
    #[error("enabling {shown}: {message}")]
    Enable { shown: String, message: String },
    #[error(
        "disabling {shown} after reading failed ({message}): the ROM BAR stays mapped until `echo 0 | sudo tee {shown}` or a reboot"
    )]
    NotRestored { shown: String, message: String },
    /// The read failed, and switching the ROM off again too.
    #[error("{read}; and {off}")]
    Both {
        read: Box<RomError>,
        off: Box<RomError>,
    },
    /// A ROM file the user named.
    #[error("{path}: over 16 MiB, not a ROM")]
    FileTooLarge { path: String },
    #[error("{0}")]
    File(String),
}

impl RomError {
    /// The device has no ROM to read (a file is the way, not root).
    pub fn no_rom_bar(&self) -> bool {
        matches!(self, RomError::NoRomBar { .. })
    }

    /// A ROM file the user named, at most 16 MiB; a FIFO or a device is
    /// refused, not read.
    pub fn read_file(f: &Path) -> Result<Vec<u8>, RomError> {
        crate::userfile::read_bytes(f, MAX_ROM).map_err(|e| match e {
            UserFileError::TooLarge { .. } => RomError::FileTooLarge {
                path: f.display().to_string(),
            },
            e => RomError::File(e.to_string()),
        })
    }
}

/// Largest ROM read (GPU ROMs are 128 KiB – 2 MiB), from a card or a file.
const MAX_ROM: u64 = 16 * 1024 * 1024;

/// The sysfs path of `addr`'s ROM.
pub fn rom_path(addr: &str) -> HostPath {
    HostPath::sys(&format!("bus/pci/devices/{addr}/rom"))
}

/// The ROM bytes of `addr`, or why not.
pub fn read_card_rom(root: &HostRoot, addr: &str) -> Result<Vec<u8>, RomError> {
    let path = rom_path(addr);
    if !root.exists(&path) {
        if !root.is_live() {
            // A capture (the demo, a snapshot) never holds ROMs: reading one
            // takes root and switching the ROM BAR on. That says nothing
            // about the card.
            return Err(RomError::NotCaptured {
                path: path.to_string(),
                addr: addr.to_string(),
            });
        }
        return Err(RomError::NoRomBar {
            path: path.to_string(),
        });
    }
    if !root.is_live() {
        return root.read_bytes(&path, MAX_ROM).map_err(RomError::Read);
    }
    if !rustix::process::geteuid().is_root() {
        return Err(RomError::NotRoot);
    }
    let file = root.resolve(&path);
    with_rom_enabled(&file, &path.to_string(), || {
        root.read_bytes(&path, MAX_ROM).map_err(RomError::Enabled)
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
    fn enable(file: &'a Path, shown: &'a str) -> Result<Self, RomError> {
        std::fs::write(file, "1").map_err(|e| RomError::Enable {
            shown: shown.to_string(),
            message: e.to_string(),
        })?;
        Ok(RomEnabled {
            file,
            shown,
            disabled: false,
        })
    }

    fn disable(mut self) -> Result<(), RomError> {
        self.disabled = true;
        std::fs::write(self.file, "0").map_err(|e| not_restored(self.shown, &e))
    }
}

fn not_restored(shown: &str, e: &std::io::Error) -> RomError {
    RomError::NotRestored {
        shown: shown.to_string(),
        message: e.to_string(),
    }
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
    read: impl FnOnce() -> Result<Vec<u8>, RomError>,
) -> Result<Vec<u8>, RomError> {
    let enabled = RomEnabled::enable(file, shown)?;
    let bytes = read();
    match (enabled.disable(), bytes) {
        (Ok(()), bytes) => bytes,
        (Err(off), Ok(_)) => Err(off),
        (Err(off), Err(read)) => Err(RomError::Both {
            read: Box::new(read),
            off: Box::new(off),
        }),
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

        let e = with_rom_enabled(&rom, &shown, || Err(RomError::NotRoot));
        assert_eq!(e.unwrap_err(), RomError::NotRoot);
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
        .unwrap_err()
        .to_string();
        assert!(e.contains("stays mapped"), "{e}");
        assert!(e.contains(&format!("echo 0 | sudo tee {shown}")), "{e}");
    }
}
