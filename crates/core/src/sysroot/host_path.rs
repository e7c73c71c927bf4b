//! `HostPath`, a path inside a host (relative to its root, never absolute),
//! and `ReadError`, why a read of one failed: the values every reader of
//! the host passes to and gets from `HostRoot`.

use std::io;
use std::path::{Component, Path, PathBuf};

/// A path inside a host, relative to the host's root (never absolute).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPath(pub(super) PathBuf);

impl HostPath {
    fn under(top: &str, rel: &str) -> Self {
        let rel = rel.trim_start_matches('/');
        if rel.is_empty() {
            HostPath(PathBuf::from(top))
        } else {
            HostPath(Path::new(top).join(rel))
        }
    }
    /// A path below the host's `/sys`.
    pub fn sys(rel: &str) -> Self {
        Self::under("sys", rel)
    }
    /// A path below the host's `/proc`.
    pub fn proc(rel: &str) -> Self {
        Self::under("proc", rel)
    }
    /// A path below the host's `/dev`.
    pub fn dev(rel: &str) -> Self {
        Self::under("dev", rel)
    }
    /// A path below the host's `/etc`.
    pub fn etc(rel: &str) -> Self {
        Self::under("etc", rel)
    }
    /// A path below the host's `/boot`.
    pub fn boot(rel: &str) -> Self {
        Self::under("boot", rel)
    }
    /// A path below the host's `/usr` (firmware images, helper binaries).
    pub fn usr(rel: &str) -> Self {
        Self::under("usr", rel)
    }
    /// A path below the host's `/lib` (the kernel's modules).
    pub fn lib(rel: &str) -> Self {
        Self::under("lib", rel)
    }
    /// A path below the host's `/var` (libvirt's logs and images).
    pub fn var(rel: &str) -> Self {
        Self::under("var", rel)
    }
    /// A path below the host's `/run` (daemon sockets).
    pub fn run(rel: &str) -> Self {
        Self::under("run", rel)
    }
    /// Whether a path a user gave names a device node (`/dev/…`), e.g. a block
    /// device as a VM disk.
    pub fn is_device_node(abs: &str) -> bool {
        Path::new(abs).starts_with("/dev")
    }
    /// An absolute host path a user gave (a ROM file in a domain), kept inside
    /// the root: `..` and `.` components are dropped. `None` for a relative path.
    pub fn from_absolute(abs: &str) -> Option<Self> {
        let p = Path::new(abs);
        if !p.is_absolute() {
            return None;
        }
        let clean: PathBuf = p
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        (!clean.as_os_str().is_empty()).then_some(HostPath(clean))
    }
    /// A path relative to the host root as stored (in an archive, a
    /// recording), keeping only its plain components. `None` when empty.
    pub fn from_relative(rel: &Path) -> Option<Self> {
        let clean: PathBuf = rel
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        (!clean.as_os_str().is_empty()).then_some(HostPath(clean))
    }
    /// A child of this path.
    pub fn join(&self, rel: impl AsRef<Path>) -> Self {
        HostPath(self.0.join(rel))
    }
    /// The path relative to the host root (e.g. `sys/bus/pci`).
    pub fn relative(&self) -> &Path {
        &self.0
    }
    /// The last component, as text.
    pub fn file_name(&self) -> Option<String> {
        self.0.file_name().map(|n| n.to_string_lossy().into_owned())
    }
    /// The path as the host itself would spell it (`/sys/bus/pci`), for evidence.
    pub fn display_abs(&self) -> String {
        format!("/{}", self.0.display())
    }
}

impl std::fmt::Display for HostPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "/{}", self.0.display())
    }
}

/// Why a read failed, with the path it failed on.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ReadError {
    #[error("{path}: not present")]
    NotFound { path: String },
    #[error("{path}: permission denied (run as root to read it)")]
    PermissionDenied { path: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: unexpected value {value:?}: {reason}")]
    Invalid {
        path: String,
        value: String,
        reason: String,
    },
}

impl ReadError {
    pub(super) fn from_io(path: &HostPath, err: &io::Error) -> Self {
        let path = path.to_string();
        match err.kind() {
            io::ErrorKind::NotFound => ReadError::NotFound { path },
            io::ErrorKind::PermissionDenied => ReadError::PermissionDenied { path },
            _ if err.raw_os_error() == Some(libc::ELOOP) => ReadError::Io {
                path,
                message: format!(
                    "a loop of symbolic links (or more than {} links in a row)",
                    super::link_walk::MAX_LINK_HOPS
                ),
            },
            _ => ReadError::Io {
                path,
                message: err.to_string(),
            },
        }
    }
    /// An unexpected value at `path`.
    pub fn invalid(path: &HostPath, value: &str, reason: impl Into<String>) -> Self {
        // At most 80 characters (not bytes: a value is any text, and a cut
        // inside a character would panic).
        let value = value.trim();
        let value = match value.char_indices().nth(80) {
            Some((cut, _)) => format!("{}…", &value[..cut]),
            None => value.to_string(),
        };
        ReadError::Invalid {
            path: path.to_string(),
            value,
            reason: reason.into(),
        }
    }
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::NotFound { .. })
    }
}
