//! The virtio-win driver disc: found where distributions put it, and its
//! driver folders for one Windows version found by listing the disc (never
//! a fixed drive letter or path guessed). Fedora's `virtio-win` package
//! installs `/usr/share/virtio-win/virtio-win.iso` (a link to the versioned
//! file beside it); Debian and Ubuntu have no package, so users download it
//! and name it (the wizard's file picker, `--virtio-iso`).
//!
//! The disc lays drivers out as `DRIVER\VERSION\ARCH` (`viostor\w11\amd64`,
//! `NetKVM\w10\ARM64`), with `virtio-win-guest-tools.exe` at its root
//! (0.1.190 and later). Windows 11's folders appear with 0.1.215.

use super::iso::{IsoImage, MediaError};
use crate::domain::template::{DiskBus, Windows};
use crate::sysroot::{HostPath, HostRoot};
use std::path::PathBuf;

/// Where a distribution's package puts the disc, most specific first.
const PLACES: &[&str] = &["share/virtio-win/virtio-win.iso"];

/// One driver's folder on the disc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverFolder {
    /// viostor, vioscsi, NetKVM, vioserial.
    pub driver: &'static str,
    /// Its folder on the disc, e.g. "/viostor/w11/amd64".
    pub dir: String,
}

/// What the disc has for one Windows version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtioDrivers {
    pub label: String,
    pub folders: Vec<DriverFolder>,
    /// `virtio-win-guest-tools.exe` is at the disc's root (the first
    /// logon installs the guest agent and the SPICE agent from it).
    pub guest_tools: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum VirtioError {
    #[error(transparent)]
    Media(#[from] MediaError),
    #[error(
        "the virtio-win disc \"{label}\" has no {folder}: it predates the drivers for {windows} (virtio-win 0.1.215 and later have Windows 11's), or it is not a virtio-win disc. Use a newer virtio-win ISO."
    )]
    NoFolder {
        label: String,
        folder: String,
        windows: &'static str,
    },
}

/// The disc where a distribution installed it, under the root's /usr.
pub fn find(root: &HostRoot) -> Option<PathBuf> {
    PLACES.iter().find_map(|p| {
        let path = HostPath::usr(p);
        root.is_file(&path).then(|| root.resolve(&path))
    })
}

fn version_dir(w: Windows) -> (&'static str, &'static str) {
    match w {
        Windows::Ten => ("w10", "Windows 10"),
        Windows::Eleven => ("w11", "Windows 11"),
    }
}

/// The folders Setup and the first boot need for `windows` on `arch`
/// ("amd64" or "arm64"): the disk's driver for `bus` (none for SATA), the
/// network's (NetKVM) and the serial port's the guest agent talks over
/// (vioserial). The disk's and the network's are required.
pub fn drivers(
    iso: &IsoImage,
    windows: Windows,
    arch: &str,
    bus: DiskBus,
) -> Result<VirtioDrivers, VirtioError> {
    let (ver, name) = version_dir(windows);
    let arch_dir = if arch.eq_ignore_ascii_case("arm64") {
        "ARM64"
    } else {
        "amd64"
    };
    let disk = match bus {
        DiskBus::Virtio => Some("viostor"),
        DiskBus::Scsi => Some("vioscsi"),
        DiskBus::Sata => None,
    };
    let mut folders = Vec::new();
    for (driver, required) in [
        (disk, true),
        (Some("NetKVM"), true),
        (Some("vioserial"), false),
    ] {
        let Some(driver) = driver else { continue };
        let dir = format!("/{driver}/{ver}/{arch_dir}");
        let has_inf = iso
            .list(&dir)
            .map(|l| {
                l.iter()
                    .any(|e| !e.is_dir && e.name.to_ascii_lowercase().ends_with(".inf"))
            })
            .unwrap_or(false);
        if has_inf {
            folders.push(DriverFolder { driver, dir });
        } else if required {
            return Err(VirtioError::NoFolder {
                label: iso.label().to_string(),
                folder: format!("{driver}\\{ver}\\{arch_dir} with its .inf"),
                windows: name,
            });
        }
    }
    Ok(VirtioDrivers {
        label: iso.label().to_string(),
        folders,
        guest_tools: iso.exists("/virtio-win-guest-tools.exe"),
    })
}
