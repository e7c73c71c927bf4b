//! Where the host to read is — this machine, a captured root (a folder or a
//! snapshot file), the bundled demo, or another machine over SSH — as one
//! value the CLI and the app both start from: parsed once from the
//! arguments, opened once for reading, its libvirt and its name said the
//! same way in both faces.

use crate::{RemoteError, SshTarget};
use std::path::PathBuf;
use vfio_assistant_core::hypervisor::{DEFAULT_URI, TEST_URI};
use vfio_assistant_core::sysroot::{HostRoot, OpenedRoot, RootError, open_root};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSource {
    /// The running machine.
    Live,
    /// An extracted snapshot or fixture tree, or a snapshot file.
    Root(PathBuf),
    /// The bundled sample host.
    Demo,
    /// Another machine over SSH (`ssh://[user@]host[:port][/root]`): its
    /// snapshot, taken there by its own vfio-assistant; its libvirt over
    /// `qemu+ssh://`; its tuning through its helper, under sudo.
    Remote(SshTarget),
}

/// Why a host could not be opened for reading.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Root(#[from] RootError),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("{0}")]
    Demo(String),
    #[error("a private folder for the other machine's snapshot: {0}")]
    Folder(#[from] std::io::Error),
}

/// A host opened for reading, kept as long as it is read: an unpacked
/// snapshot, the unpacked demo, the other machine's fetched snapshot.
pub struct OpenedHost {
    pub root: HostRoot,
    /// The other machine's `/etc/machine-id`, when it was read there.
    pub machine_id: Option<String>,
    _kept: Kept,
}

#[allow(dead_code)] // held for their Drop: the folders go when the host does
enum Kept {
    Nothing,
    Root(OpenedRoot),
    Folder(tempfile::TempDir),
    Fetched(tempfile::TempDir, OpenedRoot),
}

impl HostSource {
    /// From the arguments every command and the app take: `--demo` first,
    /// then `--host`, then `--root`, else this machine.
    pub fn from_args(demo: bool, root: Option<PathBuf>, host: Option<SshTarget>) -> Self {
        match (demo, root, host) {
            (true, _, _) => HostSource::Demo,
            (false, _, Some(h)) => HostSource::Remote(h),
            (false, Some(r), None) => HostSource::Root(r),
            (false, None, None) => HostSource::Live,
        }
    }

    /// The libvirt its VMs are on: None for a captured root (no daemon
    /// there), libvirt's test driver for the demo.
    pub fn libvirt_uri(&self) -> Option<String> {
        match self {
            HostSource::Live => Some(DEFAULT_URI.into()),
            HostSource::Demo => Some(TEST_URI.into()),
            HostSource::Remote(t) => t.root.is_none().then(|| t.libvirt_uri()),
            HostSource::Root(_) => None,
        }
    }

    /// What the app's title and the CLI's report call it.
    pub fn label(&self) -> String {
        match self {
            HostSource::Live => "this machine".into(),
            HostSource::Demo => "demo host (sample data)".into(),
            HostSource::Root(p) => p.display().to_string(),
            HostSource::Remote(t) => format!("{} (over SSH)", t.shown()),
        }
    }

    /// Open it for reading (the other machine's snapshot is fetched now:
    /// the app does this on a worker, with its progress said).
    pub fn open(&self) -> Result<OpenedHost, SourceError> {
        let opened = |root, kept| OpenedHost {
            root,
            machine_id: None,
            _kept: kept,
        };
        match self {
            HostSource::Live => Ok(opened(HostRoot::live(), Kept::Nothing)),
            HostSource::Root(path) => {
                let o = open_root(path)?;
                Ok(opened(o.root().clone(), Kept::Root(o)))
            }
            HostSource::Demo => {
                let (root, dir) = vfio_assistant_core::demo::unpack_demo()
                    .map_err(|e| SourceError::Demo(format!("{e:#}")))?;
                Ok(opened(root, Kept::Folder(dir)))
            }
            HostSource::Remote(t) => {
                // The user's alone (0700): the snapshot fetched into it is theirs.
                let dir =
                    vfio_assistant_core::userfile::private_tempdir("vfio-assistant-fetch-", None)?;
                let file = dir.path().join(format!("{}.tar.gz", t.host));
                let fetched = t.fetch_snapshot(&file)?;
                let o = open_root(&file)?;
                Ok(OpenedHost {
                    root: o.root().clone(),
                    machine_id: fetched.machine_id,
                    _kept: Kept::Fetched(dir, o),
                })
            }
        }
    }
}
