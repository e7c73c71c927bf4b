//! A unified kernel image, read as the firmware and systemd-boot see it:
//! the command line it boots with (its `.cmdline` section), the kernel it
//! carries (`.uname`), and whether it is signed. What a UKI boots with is in
//! the image, not in any file under /etc: this is how a change to its
//! command line is verified, and what a plan tells the user before it.
//!
//! A UKI is tens of megabytes (kernel and initramfs inside): only its
//! headers and the small text sections are read, each bounded.

use crate::parse::pe::{self, PeError, PeImage};
use crate::sysroot::{HostPath, HostRoot, ReadError};
use serde::Serialize;
use std::os::unix::fs::FileExt;

/// The most of a text section that is read (a command line is at most a
/// few KiB: the kernel's COMMAND_LINE_SIZE is 2048 on x86).
const TEXT_BYTES: u64 = 64 * 1024;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Uki {
    /// The `.cmdline` section; None when the image has none (systemd-boot
    /// then passes the command line its entry or the user gives).
    pub cmdline: Option<String>,
    /// The `.uname` section: the kernel release inside.
    pub uname: Option<String>,
    /// An Authenticode signature is present (needed under Secure Boot).
    pub signed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UkiError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{path}: {error}")]
    NotPe { path: String, error: PeError },
    #[error("{path}: section {section} lies outside the file")]
    Section { path: String, section: String },
}

/// The UKI at `path`: its headers, then its `.cmdline` and `.uname`.
pub fn read_uki(root: &HostRoot, path: &HostPath) -> Result<Uki, UkiError> {
    use std::io::Read;
    // One open: the headers, then each text section at its offset.
    let file = root.open_file(path)?;
    let mut head = Vec::new();
    (&file)
        .take(pe::HEADER_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| {
            UkiError::Read(ReadError::Io {
                path: path.to_string(),
                message: e.to_string(),
            })
        })?;
    let image: PeImage = pe::parse(&head).map_err(|error| UkiError::NotPe {
        path: path.to_string(),
        error,
    })?;
    let text = |name: &str| -> Result<Option<String>, UkiError> {
        let Some(s) = image.section(name) else {
            return Ok(None);
        };
        let want = usize::try_from(s.size.min(TEXT_BYTES)).unwrap_or(0);
        let mut buf = vec![0u8; want];
        // A section past the end of the file (cut short, or lying) is an
        // error, never a shorter command line.
        file.read_exact_at(&mut buf, s.offset)
            .map_err(|_| UkiError::Section {
                path: path.to_string(),
                section: name.to_string(),
            })?;
        Ok(Some(pe::section_text(&buf)))
    };
    Ok(Uki {
        cmdline: text(".cmdline")?,
        uname: text(".uname")?,
        signed: image.signed,
    })
}
