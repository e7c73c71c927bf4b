//! What the initramfs of the running kernel holds, for people who bind the GPU
//! to vfio-pci at boot: `options vfio-pci ids=…` and `softdep … pre: vfio-pci`
//! only work early if the image carries them (and vfio-pci itself), and the
//! image is only rebuilt when someone runs update-initramfs / dracut /
//! mkinitcpio. Editing /etc/modprobe.d and forgetting that is a classic.
//!
//! The image: uncompressed early archives (microcode) first, then the main
//! archive compressed with zstd, gzip, xz, lz4, bzip2 or lzo. gzip is read
//! here (flate2); the others go through the distribution's own tool
//! (`zstd -dc`, …), which is installed wherever it built such an image.
//!
//! The image is streamed from its file, never held whole, and bounded: an
//! image over `MAX_IMAGE_BYTES`, or one that unpacks to more than
//! `unpacked_cap` (a real image unpacks to a few times its size; a gzip bomb
//! to a thousand), is "too large to inspect" — an answer, cached like any
//! other, so a bomb costs one bounded read, not 30 s on every scan.

mod unpack;

pub use unpack::Unpacking;

use crate::parse::cpio::read_newc_prefix;
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use unpack::{compression_of, decompressed_entries, gunzipped_entries, unpacked_cap};

use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

/// The largest image read (a distribution image is 30–150 MB, 300 MB with
/// every firmware).
const MAX_IMAGE_BYTES: u64 = 512 << 20;
/// Said when an image is bigger than what is read.
const TOO_LARGE: &str = "too large to inspect";

/// Why an image's contents are not known (kept in the cache as they are,
/// and in the snapshot as words: `InitramfsState::Unreadable`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitramfsError {
    #[error("{0}")]
    Open(crate::sysroot::ReadError),
    #[error("{image}: {message}")]
    Io { image: String, message: String },
    #[error("{image} is empty (a captured host keeps no image contents)")]
    Empty { image: String },
    #[error("{image}: {TOO_LARGE} ({mib} MiB; images up to {} MiB are read)", MAX_IMAGE_BYTES >> 20)]
    TooLarge { image: String, mib: u64 },
    #[error("{image}: unknown data after the early archive at byte {at}")]
    UnknownData { image: String, at: u64 },
    #[error("{image}: {message}")]
    Archive { image: String, message: String },
    #[error("{image} ({compression}): {why}")]
    Compressed {
        image: String,
        compression: String,
        why: Unpacking,
    },
    #[error("{image}: no files in it")]
    NoFiles { image: String },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InitramfsInfo {
    /// The image read, as the host spells it.
    pub image: String,
    /// The image has a generic name (`initrd.img`, `initramfs-linux.img`):
    /// it may belong to another installed kernel than the running one.
    pub generic_name: bool,
    /// The main archive's compression (`zstd`, `gzip`…), None when plain.
    pub compression: Option<String>,
    pub files: usize,
    /// Paths of vfio modules in the image (`…/vfio-pci.ko.zst`).
    pub vfio_modules: Vec<String>,
    /// vfio-pci is built into the kernel (modules.builtin): no module needed.
    pub vfio_pci_builtin: bool,
    /// Non-comment lines that mention vfio, from the image's modprobe.d files:
    /// (file in the image, line).
    pub modprobe_lines: Vec<(String, String)>,
}

/// What the scan found out about the initramfs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum InitramfsState {
    /// No boot-time vfio binding in /etc/modprobe.d: nothing to compare.
    #[default]
    NotChecked,
    /// No image at the usual places (or the release is unknown).
    NotFound {
        looked: Vec<String>,
    },
    Unreadable {
        image: String,
        reason: String,
    },
    Read(InitramfsInfo),
}

/// Does the modprobe configuration bind anything to vfio-pci at boot?
pub fn binds_at_boot(lines: &[(String, String)]) -> bool {
    lines.iter().any(|(_, l)| {
        let l = l.replace('_', "-");
        (l.contains("vfio-pci") && l.contains("ids="))
            || (l.starts_with("softdep") && l.contains("vfio-pci"))
    })
}

/// Read the running kernel's image when boot-time binding is configured.
pub fn read_state(
    root: &HostRoot,
    release: Option<&str>,
    modprobe: &[(String, String)],
) -> InitramfsState {
    if !binds_at_boot(modprobe) {
        return InitramfsState::NotChecked;
    }
    let Some(release) = release else {
        return InitramfsState::NotFound { looked: Vec::new() };
    };
    let Some(image) = find_image(root, release) else {
        return InitramfsState::NotFound {
            looked: candidates(release)
                .iter()
                .map(ToString::to_string)
                .collect(),
        };
    };
    match read_initramfs(root, &image, release) {
        Ok(info) => InitramfsState::Read(InitramfsInfo {
            generic_name: !image.to_string().contains(release),
            ..info
        }),
        Err(reason) => InitramfsState::Unreadable {
            image: image.to_string(),
            reason: reason.to_string(),
        },
    }
}

/// Where distributions put the image for kernel `release`.
pub fn candidates(release: &str) -> Vec<HostPath> {
    vec![
        HostPath::boot(&format!("initrd.img-{release}")),
        HostPath::boot(&format!("initramfs-{release}.img")),
        HostPath::boot(&format!("initrd-{release}")),
        HostPath::boot("initramfs-linux.img"),
        HostPath::boot("initrd.img"),
    ]
}

/// What was read from an image, by (file, size, modification time): the app
/// scans again on every Rescan, and decompressing 100 MB each time is waste.
/// Failures are kept too: a bad image costs one read, not one per scan.
type Cache = Mutex<
    HashMap<(std::path::PathBuf, u64, Option<SystemTime>), Result<InitramfsInfo, InitramfsError>>,
>;
/// Images remembered at most (a long session with many rebuilt images).
const CACHE_ENTRIES: usize = 16;
static CACHE: OnceLock<Cache> = OnceLock::new();

fn wanted(name: &str) -> bool {
    name.ends_with(".conf") && name.contains("modprobe.d/")
}

/// Read `image` (through `root`), with the running kernel's `release` for
/// modules.builtin.
pub fn read_initramfs(
    root: &HostRoot,
    image: &HostPath,
    release: &str,
) -> Result<InitramfsInfo, InitramfsError> {
    let file = root.resolve(image);
    let key = root
        .metadata(image)
        .ok()
        .map(|m| (file.clone(), m.len(), m.modified().ok()));
    let cached = key.as_ref().and_then(|k| {
        CACHE
            .get_or_init(Default::default)
            .lock()
            .ok()
            .and_then(|c| c.get(k).cloned())
    });
    let mut info = match cached {
        Some(hit) => hit?,
        None => {
            let info = read_archive(root, image);
            if let (Some(k), Ok(mut c)) = (key, CACHE.get_or_init(Default::default).lock()) {
                if c.len() >= CACHE_ENTRIES {
                    c.clear();
                }
                c.insert(k, info.clone());
            }
            info?
        }
    };
    // Read every time: the cache is for the image only.
    info.vfio_pci_builtin = vfio_pci_builtin(root, release);
    Ok(info)
}

/// vfio-pci is built into the kernel `release` (its modules.builtin, in
/// /lib/modules on a split-usr system, /usr/lib/modules on a merged one).
pub fn vfio_pci_builtin(root: &HostRoot, release: &str) -> bool {
    let builtin = [
        Some(HostPath::usr(&format!(
            "lib/modules/{release}/modules.builtin"
        ))),
        HostPath::from_absolute(&format!("/lib/modules/{release}/modules.builtin")),
    ];
    builtin.iter().flatten().any(|p| {
        root.read_text(p)
            .is_ok_and(|t| t.lines().any(|l| l.trim_end().ends_with("/vfio-pci.ko")))
    })
}

/// The image's archives: file count, vfio modules, modprobe.d lines.
fn read_archive(root: &HostRoot, image: &HostPath) -> Result<InitramfsInfo, InitramfsError> {
    let shown = image.to_string();
    let io = |e: std::io::Error| InitramfsError::Io {
        image: shown.clone(),
        message: e.to_string(),
    };
    let mut file = root.open_file(image).map_err(InitramfsError::Open)?;
    let len = file.metadata().map_err(io)?.len();
    if len == 0 {
        // A snapshot keeps binary files as empty placeholders.
        return Err(InitramfsError::Empty { image: shown });
    }
    if len > MAX_IMAGE_BYTES {
        return Err(InitramfsError::TooLarge {
            image: shown,
            mib: len >> 20,
        });
    }
    let mut info = InitramfsInfo {
        image: image.to_string(),
        ..InitramfsInfo::default()
    };
    let (mut entries, rest) = read_newc_prefix(BufReader::new(&mut file), wanted).map_err(|e| {
        InitramfsError::Archive {
            image: shown.clone(),
            message: e.to_string(),
        }
    })?;
    if rest < len {
        file.seek(SeekFrom::Start(rest)).map_err(io)?;
        let compressed = len - rest;
        let mut tail = BufReader::with_capacity(1 << 16, file.take(compressed));
        let head = tail.fill_buf().map_err(io)?;
        let (name, cmd) = compression_of(head).ok_or_else(|| InitramfsError::UnknownData {
            image: shown.clone(),
            at: rest,
        })?;
        info.compression = Some(name.to_string());
        let cap = unpacked_cap(compressed);
        let more = if cmd.is_empty() {
            gunzipped_entries(tail, cap)
        } else {
            decompressed_entries(cmd, tail, cap)
        }
        .map_err(|why| InitramfsError::Compressed {
            image: shown.clone(),
            compression: name.to_string(),
            why,
        })?;
        entries.extend(more);
    }
    if entries.is_empty() {
        return Err(InitramfsError::NoFiles { image: shown });
    }
    info.files = entries.len();
    for e in &entries {
        let base = e.name.rsplit('/').next().unwrap_or("");
        if base.starts_with("vfio") && base.contains(".ko") {
            info.vfio_modules.push(e.name.clone());
        }
        if let Some(data) = &e.data {
            for line in String::from_utf8_lossy(data).lines().map(str::trim) {
                if !line.starts_with('#') && line.contains("vfio") {
                    info.modprobe_lines.push((e.name.clone(), line.to_string()));
                }
            }
        }
    }
    Ok(info)
}

/// The image for the running kernel: the release's own names first, then
/// the generic ones (a dangling link does not count).
pub fn find_image(root: &HostRoot, release: &str) -> Option<HostPath> {
    candidates(release).into_iter().find(|p| root.is_file(p))
}
