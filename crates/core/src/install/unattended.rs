//! "Install Windows for me": from the user's Windows ISO, the virtio-win
//! ISO, an account name and password to the answer media beside the
//! installer, and what the domain needs to know (the Windows version the
//! ISO holds, the edition chosen). One use case for the wizard and
//! `domain new --unattended`.
//!
//! Automated: partitioning, the edition, the EULA, the drivers Setup needs
//! (disk, network, serial), language, keyboard and time zone from this
//! host, the local account, the online-account and privacy pages, the guest
//! tools, the Looking Glass host (its installer given), MSI mode. Left to
//! the user: the GPU vendor's driver (NVIDIA's or AMD's installer, inside
//! Windows), activation, and whatever Windows asks that the answer file
//! cannot answer for their edition.

use super::answer_media::{BuildError, MediaRequest, build};
use super::first_logon::FirstLogon;
use super::host_locale::read_host;
use super::iso::{IsoImage, MediaError};
use super::unattend::{Answer, AnswerError, Secret, check_user};
use super::virtio_win::{VirtioError, drivers};
use super::windows_iso::{WimImage, inspect};
use crate::domain::template::{DiskBus, Windows};
use crate::sysroot::HostRoot;
use std::path::{Path, PathBuf};

/// What the user gives.
#[derive(Debug, Clone)]
pub struct UnattendRequest {
    pub vm_name: String,
    pub windows_iso: PathBuf,
    pub virtio_iso: PathBuf,
    pub user: String,
    pub password: Secret,
    /// An edition's name as the ISO lists it ("Windows 11 Pro"); `None`:
    /// Pro when the ISO has it, else its first client edition.
    pub edition: Option<String>,
    pub disk_bus: DiskBus,
    /// The passed-through GPU's functions (vendor, device) for MSI mode.
    pub gpu_ids: Vec<(u16, u16)>,
    pub looking_glass_installer: Option<PathBuf>,
    /// Where the media goes; `None`: beside the Windows ISO.
    pub out: Option<PathBuf>,
}

/// The media, and what it says.
#[derive(Debug, Clone)]
pub struct Unattended {
    pub media: PathBuf,
    pub windows: Windows,
    pub edition: WimImage,
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    // The causes are in the sentence, not chained: a chain would print
    // them twice (`{:#}`).
    #[error("the Windows ISO {path}: {why}")]
    WindowsIso { path: PathBuf, why: MediaError },
    #[error("the virtio-win ISO {path}: {why}")]
    VirtioIso { path: PathBuf, why: VirtioError },
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error("{iso} has no edition named \"{asked}\"; it has: {has}")]
    NoSuchEdition {
        iso: PathBuf,
        asked: String,
        has: String,
    },
    #[error("{0} holds no Windows 10 or 11 client edition for amd64 or arm64")]
    NoClientEdition(PathBuf),
    #[error("building the answer media: {0}")]
    Build(BuildError),
}

impl From<BuildError> for InstallError {
    fn from(e: BuildError) -> Self {
        InstallError::Build(e)
    }
}

/// Why no edition was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotChosen {
    /// The edition asked for is not on the disc; these are.
    NotThere { has: String },
    /// No Windows 10/11 client edition for amd64 or arm64 on it.
    NoClient,
}

/// The edition to install: the one asked for, else Pro, else the first
/// client edition.
pub fn choose<'a>(images: &'a [WimImage], asked: Option<&str>) -> Result<&'a WimImage, NotChosen> {
    if let Some(a) = asked {
        return images
            .iter()
            .find(|i| i.name.eq_ignore_ascii_case(a.trim()))
            .ok_or_else(|| NotChosen::NotThere {
                has: images
                    .iter()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
    }
    let client: Vec<&WimImage> = images
        .iter()
        .filter(|i| !i.installation_type.eq_ignore_ascii_case("server"))
        .filter(|i| matches!(i.arch.as_str(), "amd64" | "arm64"))
        .collect();
    client
        .iter()
        .find(|i| i.edition_id.eq_ignore_ascii_case("Professional"))
        .or_else(|| client.first())
        .copied()
        .ok_or(NotChosen::NoClient)
}

/// What an installer ISO holds, in one sentence for the wizard: the
/// edition an unattended install would take and the others on the disc,
/// or why it is not a Windows installer.
pub fn describe_iso(path: &Path) -> Result<String, MediaError> {
    if !path.exists() {
        return Err(MediaError::Missing {
            path: path.to_path_buf(),
        });
    }
    let media = inspect(path)?;
    let chosen = choose(&media.images, None).map_err(|_| MediaError::NoClientEdition {
        path: path.to_path_buf(),
    })?;
    let others: Vec<&str> = media
        .images
        .iter()
        .filter(|i| i.index != chosen.index)
        .map(|i| i.name.as_str())
        .collect();
    Ok(format!(
        "{} (build {}) will be installed{}",
        chosen.name,
        chosen.build,
        if others.is_empty() {
            String::new()
        } else {
            format!("; the disc also holds {}", others.join(", "))
        }
    ))
}

/// The media beside the installer: `<dir>/<vm>-answer.iso`.
pub fn default_out(windows_iso: &Path, vm: &str) -> PathBuf {
    let safe: String = vm
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    windows_iso
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{safe}-answer.iso"))
}

/// Read both discs, write the answer media. Nothing is written before the
/// account, both discs and the edition are known to be right.
pub fn prepare(root: &HostRoot, req: &UnattendRequest) -> Result<Unattended, InstallError> {
    check_user(&req.user)?;
    let media = inspect(&req.windows_iso).map_err(|why| InstallError::WindowsIso {
        path: req.windows_iso.clone(),
        why,
    })?;
    let edition = choose(&media.images, req.edition.as_deref()).map_err(|why| match why {
        NotChosen::NotThere { has } => InstallError::NoSuchEdition {
            iso: req.windows_iso.clone(),
            asked: req.edition.clone().unwrap_or_default(),
            has,
        },
        NotChosen::NoClient => InstallError::NoClientEdition(req.windows_iso.clone()),
    })?;
    let windows = if edition.build >= 22000 {
        Windows::Eleven
    } else {
        Windows::Ten
    };
    let virtio_err = |why: VirtioError| InstallError::VirtioIso {
        path: req.virtio_iso.clone(),
        why,
    };
    let virtio = IsoImage::open(&req.virtio_iso).map_err(|e| virtio_err(e.into()))?;
    let found = drivers(&virtio, windows, &edition.arch, req.disk_bus).map_err(virtio_err)?;
    let locale = read_host(root);
    let mut notes = locale.notes.clone();
    if !found.guest_tools {
        notes.push(format!(
            "The virtio-win disc \"{}\" has no virtio-win-guest-tools.exe (0.1.190 and later have it): the guest agent is not installed at the first logon, so the in-guest checks stay unknown until you install it.",
            found.label
        ));
    }
    let answer = Answer {
        windows,
        arch: edition.arch.clone(),
        image_index: edition.index,
        locale,
        computer_name: req.vm_name.clone(),
        user: req.user.clone(),
        password: req.password.clone(),
    };
    let first_logon = FirstLogon {
        msi_ids: req.gpu_ids.clone(),
        looking_glass: req.looking_glass_installer.is_some(),
    };
    let out = req
        .out
        .clone()
        .unwrap_or_else(|| default_out(&req.windows_iso, &req.vm_name));
    let path = build(&MediaRequest {
        answer: &answer,
        first_logon: &first_logon,
        virtio: &virtio,
        drivers: &found,
        looking_glass_installer: req.looking_glass_installer.as_deref(),
        out: &out,
    })?;
    Ok(Unattended {
        media: path,
        windows,
        edition: edition.clone(),
        notes,
    })
}
