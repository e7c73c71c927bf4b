//! A Windows installer image looked at: its label, where its install image
//! is (sources/install.wim, or install.esd on media made from an ESD) and
//! the Windows images inside (edition, build, architecture, languages).
//! Another disc (a Linux installer, the virtio-win drivers) is refused with
//! what it seems to be instead.

use std::path::Path;

use super::iso::{IsoImage, MediaError};
pub use super::wim::WimImage;

/// Where Windows Setup looks for the images, in the order it prefers them.
const INSTALL_IMAGES: [&str; 2] = ["/sources/install.wim", "/sources/install.esd"];
/// The first build of Windows 11.
const FIRST_WINDOWS_11_BUILD: u32 = 22000;
/// The first build of Windows 10.
const FIRST_WINDOWS_10_BUILD: u32 = 10240;
/// The most bytes of a Linux disc's .disk/info read to name it.
const MAX_DISK_INFO_BYTES: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum WindowsVersion {
    Windows10,
    Windows11,
}

impl WindowsVersion {
    /// The desktop Windows a build number belongs to (None before Windows 10).
    pub fn from_build(build: u32) -> Option<WindowsVersion> {
        if build >= FIRST_WINDOWS_11_BUILD {
            Some(WindowsVersion::Windows11)
        } else if build >= FIRST_WINDOWS_10_BUILD {
            Some(WindowsVersion::Windows10)
        } else {
            None
        }
    }
}

/// A Windows installer image as inspected.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WindowsMedia {
    pub label: String,
    /// "/sources/install.wim" or "/sources/install.esd".
    pub wim_path: String,
    /// Sorted by index.
    pub images: Vec<WimImage>,
}

impl WindowsMedia {
    /// Windows 10 or 11, when every desktop (Client) image on the disc has
    /// a build of one of them; None for Server media, older Windows or a
    /// disc that mixes versions.
    pub fn version(&self) -> Option<WindowsVersion> {
        let mut versions = self.images.iter().map(|i| {
            if i.installation_type.eq_ignore_ascii_case("Server") {
                None
            } else {
                WindowsVersion::from_build(i.build)
            }
        });
        let first = versions.next()??;
        versions.all(|v| v == Some(first)).then_some(first)
    }
}

/// Opens the image at `path` and reads the Windows images it installs.
pub fn inspect(path: &Path) -> Result<WindowsMedia, MediaError> {
    let iso = IsoImage::open(path)?;
    inspect_image(&iso)
}

/// [`inspect`] on an image already open.
pub fn inspect_image(iso: &IsoImage) -> Result<WindowsMedia, MediaError> {
    let Some(wim_path) = INSTALL_IMAGES.iter().find(|p| iso.exists(p)) else {
        return Err(MediaError::NotWindows {
            found: format!("{}: no sources/install.wim or install.esd", what_it_is(iso)),
        });
    };
    let images = super::wim::read_images(iso, wim_path)?;
    Ok(WindowsMedia {
        label: iso.label().to_string(),
        wim_path: (*wim_path).to_string(),
        images,
    })
}

/// What a disc that is not a Windows installer seems to be, in words.
fn what_it_is(iso: &IsoImage) -> String {
    let label = iso.label();
    if let Ok(info) = iso.read("/.disk/info", MAX_DISK_INFO_BYTES) {
        let line = String::from_utf8_lossy(&info)
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_control())
            .take(120)
            .collect::<String>();
        if !line.trim().is_empty() {
            return format!("a Linux disc (\"{}\")", line.trim());
        }
    }
    let has = |p: &str| iso.exists(p);
    if has("/sources/install.swm") {
        return format!(
            "a Windows image \"{label}\" split into .swm parts (join them into install.wim first)"
        );
    }
    if has("/sources/boot.wim") {
        return format!("a Windows boot-only image \"{label}\" (sources/boot.wim alone)");
    }
    if has("/viostor") && has("/NetKVM") {
        return format!("the virtio-win driver disc \"{label}\"");
    }
    if has("/dists") && has("/pool") {
        return format!("a Debian or Ubuntu installer \"{label}\"");
    }
    if has("/casper") || has("/live") || has("/LiveOS") || has("/arch") {
        return format!("a Linux live disc \"{label}\"");
    }
    let top: Vec<String> = iso
        .list("/")
        .map(|entries| entries.into_iter().take(8).map(|e| e.name).collect())
        .unwrap_or_default();
    if top.is_empty() {
        format!("the disc \"{label}\", which holds nothing")
    } else {
        format!(
            "the disc \"{label}\" (its top folder holds {})",
            top.join(", ")
        )
    }
}
