//! The answer media: a small ISO 9660 + Joliet disc that Windows Setup
//! reads as a CD, built with xorriso. Its root holds
//! * `autounattend.xml` (Setup looks for it at the root of every drive);
//! * `$WinPEDriver$\<driver>\…`, the storage, network and serial drivers
//!   copied from the virtio-win disc's folders for this Windows version
//!   (Setup loads every driver under that folder, on any drive, into
//!   Windows PE and into the installed system);
//! * `vfio-assistant\first-logon.ps1`, `msi.ps1` and, when given, the
//!   Looking Glass host installer.
//!
//! Built in a staging folder beside the target and renamed into place, so
//! a full disk or a failed copy leaves nothing half-made; the file is
//! private to its owner (0600: it holds the account's password), and
//! libvirt's dynamic ownership lends it to QEMU while the VM runs.

use super::first_logon::{FirstLogon, LG_INSTALLER, first_logon_script, msi_script};
use super::iso::{IsoImage, MediaError};
use super::unattend::{Answer, AnswerError, FIRST_LOGON, MEDIA_DIR, answer_xml};
use super::virtio_win::VirtioDrivers;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The volume label Setup and the host see.
pub const LABEL: &str = "VFIOA_ANSWER";
/// At most this much is copied from the virtio-win disc (its w11 storage,
/// network and serial folders are a few MiB).
const MAX_DRIVERS: u64 = 256 << 20;
/// The biggest Looking Glass host installer we copy (B7's is ~5 MiB).
const MAX_INSTALLER: u64 = 128 << 20;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error("reading the virtio-win disc: {0}")]
    Drivers(MediaError),
    #[error("{what} {path}: {err}")]
    Io {
        what: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
    #[error(
        "{0} is not a file, or is larger than 128 MiB: give the Looking Glass host installer (looking-glass-host-setup.exe)"
    )]
    BadInstaller(PathBuf),
    #[error("xorriso could not be started ({0}): install the xorriso package")]
    NoXorriso(std::io::Error),
    #[error("xorriso could not write {path}: {stderr}")]
    Xorriso { path: PathBuf, stderr: String },
}

impl From<MediaError> for BuildError {
    fn from(e: MediaError) -> Self {
        BuildError::Drivers(e)
    }
}

/// What goes on the media.
pub struct MediaRequest<'a> {
    pub answer: &'a Answer,
    pub first_logon: &'a FirstLogon,
    pub virtio: &'a IsoImage,
    pub drivers: &'a VirtioDrivers,
    pub looking_glass_installer: Option<&'a Path>,
    /// The image to write (replaced whole if it exists).
    pub out: &'a Path,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BuildError + 'a {
    move |err| BuildError::Io {
        what,
        path: path.to_path_buf(),
        err,
    }
}

fn write_private(path: &Path, text: &str) -> Result<(), BuildError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io("writing", path))?;
    f.write_all(text.as_bytes()).map_err(io("writing", path))
}

/// Fill `dir` with the media's files.
fn stage(req: &MediaRequest<'_>, dir: &Path) -> Result<(), BuildError> {
    write_private(&dir.join("autounattend.xml"), &answer_xml(req.answer)?)?;
    let drivers = dir.join("$WinPEDriver$");
    let mut left = MAX_DRIVERS;
    for f in &req.drivers.folders {
        let to = drivers.join(f.driver);
        fs::create_dir_all(&to).map_err(io("creating", &to))?;
        left = left.saturating_sub(req.virtio.extract_dir(&f.dir, &to, left)?);
    }
    let ours = dir.join(MEDIA_DIR);
    fs::create_dir_all(&ours).map_err(io("creating", &ours))?;
    write_private(
        &ours.join(FIRST_LOGON),
        &first_logon_script(req.first_logon),
    )?;
    if !req.first_logon.msi_ids.is_empty() {
        write_private(&ours.join("msi.ps1"), &msi_script(&req.first_logon.msi_ids))?;
    }
    if let Some(lg) = req.looking_glass_installer {
        let meta = fs::metadata(lg).map_err(io("reading", lg))?;
        if !meta.is_file() || meta.len() > MAX_INSTALLER {
            return Err(BuildError::BadInstaller(lg.to_path_buf()));
        }
        let to = ours.join(LG_INSTALLER);
        fs::copy(lg, &to).map_err(io("copying", lg))?;
    }
    Ok(())
}

/// Build the media at `req.out`.
pub fn build(req: &MediaRequest<'_>) -> Result<PathBuf, BuildError> {
    let parent = match req.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let staging = tempfile::Builder::new()
        .prefix(".vfio-assistant-answer-")
        .tempdir_in(parent)
        .map_err(io("creating a folder in", parent))?;
    fs::set_permissions(staging.path(), fs::Permissions::from_mode(0o700))
        .map_err(io("protecting", staging.path()))?;
    let files = staging.path().join("files");
    fs::create_dir(&files).map_err(io("creating", &files))?;
    stage(req, &files)?;
    let image = staging.path().join("answer.iso");
    let mut cmd = Command::new(crate::syspath::program("xorriso"));
    crate::syspath::clean(&mut cmd);
    let out = cmd
        .args([
            "-as",
            "mkisofs",
            "-quiet",
            "-J",
            "-joliet-long",
            "-r",
            "-V",
            LABEL,
            "-o",
        ])
        .arg(&image)
        .arg(&files)
        .stdin(Stdio::null())
        .output()
        .map_err(BuildError::NoXorriso)?;
    if !out.status.success() || !image.is_file() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        // xorriso's own verdicts ("FAILURE : Image size … exceeds free
        // space"), else its last line; never its banner.
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| {
                ["FAILURE", "SORRY", "FATAL", "ABORT"]
                    .iter()
                    .any(|w| l.contains(w))
            })
            .collect();
        let said = if said.is_empty() {
            stderr.lines().last().unwrap_or("no message").to_string()
        } else {
            said.join(" / ")
        };
        return Err(BuildError::Xorriso {
            path: req.out.to_path_buf(),
            stderr: said,
        });
    }
    fs::set_permissions(&image, fs::Permissions::from_mode(0o600))
        .map_err(io("protecting", &image))?;
    fs::rename(&image, req.out).map_err(io("moving the media to", req.out))?;
    Ok(req.out.to_path_buf())
}
