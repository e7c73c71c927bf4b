//! `HostRoot`: the one place that knows where a host's `/sys`, `/proc`, `/dev`,
//! `/etc` and `/boot` live. Every read of the host goes through it, so the whole
//! model can be built from a captured snapshot or a fixture tree (`--root DIR`).
//!
//! A `HostRoot` can also record every path it was asked about; `snapshot` uses
//! that record to capture exactly the files the model reads.
//!
//! A captured root is a jail: every link is resolved inside it (see
//! `confined.rs`), so a tree someone handed us cannot make us read the
//! machine we run on. Files are opened without blocking and only regular
//! ones are read (a FIFO where a sysfs attribute belongs would hang a plain
//! open for ever).

mod confined;
pub(crate) mod link_walk;
mod opened;

mod host_path;

pub use host_path::{HostPath, ReadError};
pub use opened::{OpenedRoot, RootError, open_root};

use confined::{Jail, Last};
use rustix::fs::{Mode, OFlags};
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The root of a host's file system as the model sees it.
#[derive(Clone, Debug)]
pub struct HostRoot {
    base: PathBuf,
    recorder: Option<Arc<Mutex<BTreeSet<PathBuf>>>>,
    /// A captured root's directory, opened on first use; every path is
    /// resolved inside it. Unused for the live root.
    jail: Arc<OnceLock<Jail>>,
}

/// Refuse what is not a regular file where one is expected. Device nodes
/// under `/dev` are read as they are (PM QoS gives its limit as 4 bytes).
fn check_regular(path: &HostPath, meta: &fs::Metadata) -> Result<(), ReadError> {
    use std::os::unix::fs::FileTypeExt;
    let ft = meta.file_type();
    if ft.is_file() || (ft.is_char_device() && path.0.starts_with("dev")) {
        return Ok(());
    }
    let message = if ft.is_dir() {
        "is a directory, expected a file".to_string()
    } else {
        format!("{}, not a regular file", crate::userfile::kind(&ft))
    };
    Err(ReadError::Io {
        path: path.to_string(),
        message,
    })
}

/// Sysfs attribute files are tiny; anything bigger than this is not an attribute.
const MAX_TEXT_BYTES: u64 = 16 * 1024 * 1024;

impl HostRoot {
    /// The running machine.
    pub fn live() -> Self {
        Self::at(PathBuf::from(std::path::MAIN_SEPARATOR_STR))
    }

    /// A captured snapshot or fixture tree.
    pub fn at(base: impl Into<PathBuf>) -> Self {
        HostRoot {
            base: base.into(),
            recorder: None,
            jail: Arc::default(),
        }
    }

    /// The same root, remembering every path read from now on.
    pub fn recording(&self) -> Self {
        HostRoot {
            base: self.base.clone(),
            recorder: Some(Arc::new(Mutex::new(BTreeSet::new()))),
            jail: Arc::clone(&self.jail),
        }
    }

    /// Paths read so far (relative to the root), when recording.
    pub fn recorded(&self) -> Vec<PathBuf> {
        match &self.recorder {
            Some(rec) => match rec.lock() {
                Ok(set) => set.iter().cloned().collect(),
                Err(poisoned) => poisoned.into_inner().iter().cloned().collect(),
            },
            None => Vec::new(),
        }
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    pub fn is_live(&self) -> bool {
        self.base == Path::new(std::path::MAIN_SEPARATOR_STR)
    }

    /// Where `path` is on this machine's file system, spelled out. Only for
    /// the live root's writes (ROM enable, PM QoS) and for messages: a read
    /// through this path would follow links out of a captured root.
    pub fn resolve(&self, path: &HostPath) -> PathBuf {
        self.base.join(&path.0)
    }

    fn jail(&self) -> io::Result<&Jail> {
        if let Some(j) = self.jail.get() {
            return Ok(j);
        }
        // Two threads may both open it: the first one stored wins.
        let _ = self.jail.set(Jail::open(&self.base)?);
        self.jail
            .get()
            .ok_or_else(|| io::Error::other("the root directory could not be kept open"))
    }

    /// Open `path` with `flags`: inside the root for a captured one.
    fn open_fd(&self, path: &HostPath, flags: OFlags, last: Last) -> io::Result<OwnedFd> {
        if self.is_live() {
            let nofollow = match last {
                Last::Follow => OFlags::empty(),
                Last::NoFollow => OFlags::NOFOLLOW,
            };
            return Ok(rustix::fs::open(
                self.resolve(path),
                flags | nofollow | OFlags::CLOEXEC,
                Mode::empty(),
            )?);
        }
        self.jail()?.open_at(&path.0, flags, last)
    }

    /// `stat` (`Last::Follow`) or `lstat` of `path`, inside the root.
    fn stat(&self, path: &HostPath, last: Last) -> io::Result<fs::Metadata> {
        if self.is_live() {
            let full = self.resolve(path);
            return match last {
                Last::Follow => fs::metadata(full),
                Last::NoFollow => fs::symlink_metadata(full),
            };
        }
        fs::File::from(self.jail()?.open_at(&path.0, OFlags::PATH, last)?).metadata()
    }

    /// A regular file opened for reading, without blocking (a FIFO is refused).
    fn open_regular(&self, path: &HostPath) -> Result<fs::File, ReadError> {
        let fd = self
            .open_fd(path, OFlags::RDONLY | OFlags::NONBLOCK, Last::Follow)
            .map_err(|e| ReadError::from_io(path, &e))?;
        let file = fs::File::from(fd);
        let meta = file.metadata().map_err(|e| ReadError::from_io(path, &e))?;
        check_regular(path, &meta)?;
        Ok(file)
    }

    /// A regular file to read as a stream (a big image), opened inside the
    /// root and without blocking.
    pub fn open_file(&self, path: &HostPath) -> Result<fs::File, ReadError> {
        self.note(path);
        self.open_regular(path)
    }

    fn note(&self, path: &HostPath) {
        if let Some(rec) = &self.recorder {
            match rec.lock() {
                Ok(mut set) => {
                    set.insert(path.0.clone());
                }
                Err(poisoned) => {
                    poisoned.into_inner().insert(path.0.clone());
                }
            }
        }
    }

    /// Does the root look like a Linux host at all (has `sys` or `proc`)?
    pub fn looks_like_host(&self) -> bool {
        let dir = |p: HostPath| self.stat(&p, Last::Follow).is_ok_and(|m| m.is_dir());
        dir(HostPath::sys("")) || dir(HostPath::proc(""))
    }

    /// The whole text of a file.
    pub fn read_text(&self, path: &HostPath) -> Result<String, ReadError> {
        self.read_text_sized(path, 0)
    }

    /// `read_text` with room for `expected` bytes up front: a file read again
    /// and again (`/proc/interrupts`, megabytes on a big host) is read into one
    /// buffer of about last time's size instead of a doubling series of them.
    pub fn read_text_sized(&self, path: &HostPath, expected: usize) -> Result<String, ReadError> {
        // One open and one read: no stat first (sysfs sizes lie anyway).
        let room = expected.saturating_add(expected / 8).max(4096);
        let bytes = self.read_bytes_into(path, MAX_TEXT_BYTES + 1, room)?;
        if bytes.len() as u64 > MAX_TEXT_BYTES {
            return Err(ReadError::Io {
                path: path.to_string(),
                message: "too large for an attribute".into(),
            });
        }
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// The raw bytes of a small binary file (PCI config space), at most `limit`.
    pub fn read_bytes(&self, path: &HostPath, limit: u64) -> Result<Vec<u8>, ReadError> {
        // Room for a whole attribute up front: one read call, not a growing series
        // (each config-space read traps on a VM).
        self.read_bytes_into(path, limit, 4096)
    }

    fn read_bytes_into(
        &self,
        path: &HostPath,
        limit: u64,
        room: usize,
    ) -> Result<Vec<u8>, ReadError> {
        use std::io::Read;
        self.note(path);
        let file = self.open_regular(path)?;
        let room = usize::try_from(limit).map_or(room, |l| room.min(l));
        let mut data = Vec::with_capacity(room);
        file.take(limit)
            .read_to_end(&mut data)
            .map_err(|e| ReadError::from_io(path, &e))?;
        Ok(data)
    }

    /// The kernel log. On a live host `dev/kmsg` is a character device read one
    /// record per call without blocking (`prio,seq,usec,flags;message`); in a
    /// snapshot it is a plain file of the same records.
    pub fn read_kmsg(&self, path: &HostPath) -> Result<String, ReadError> {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;
        self.note(path);
        let fd = self
            .open_fd(path, OFlags::RDONLY | OFlags::NONBLOCK, Last::Follow)
            .map_err(|e| ReadError::from_io(path, &e))?;
        let mut file = fs::File::from(fd);
        let meta = file.metadata().map_err(|e| ReadError::from_io(path, &e))?;
        if !meta.file_type().is_char_device() {
            return self.read_text(path);
        }
        let mut out = String::new();
        let mut buf = vec![0u8; 8192];
        for _ in 0..100_000 {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // A record overwritten while we read: skip to the next one.
                Err(e) if e.raw_os_error() == Some(32) => continue,
                Err(e) => return Err(ReadError::from_io(path, &e)),
            }
        }
        Ok(out)
    }

    /// The last `max_bytes` of a file (a log that only grows), as text.
    pub fn read_tail(&self, path: &HostPath, max_bytes: u64) -> Result<String, ReadError> {
        use std::io::{Read, Seek, SeekFrom};
        self.note(path);
        let mut file = self.open_regular(path)?;
        let meta = file.metadata().map_err(|e| ReadError::from_io(path, &e))?;
        let start = meta.len().saturating_sub(max_bytes);
        file.seek(SeekFrom::Start(start))
            .map_err(|e| ReadError::from_io(path, &e))?;
        let mut data = Vec::new();
        file.take(max_bytes)
            .read_to_end(&mut data)
            .map_err(|e| ReadError::from_io(path, &e))?;
        Ok(String::from_utf8_lossy(&data).into_owned())
    }

    /// `stat` of a path (following links), for the files a domain names.
    pub fn metadata(&self, path: &HostPath) -> Result<fs::Metadata, ReadError> {
        self.note(path);
        self.stat(path, Last::Follow)
            .map_err(|e| ReadError::from_io(path, &e))
    }

    /// `lstat` of a path: a link itself, not what it points at.
    pub fn symlink_metadata(&self, path: &HostPath) -> Result<fs::Metadata, ReadError> {
        self.note(path);
        self.stat(path, Last::NoFollow)
            .map_err(|e| ReadError::from_io(path, &e))
    }

    /// Is the file at `path` executable by its owner (a hook script)?
    pub fn is_executable(&self, path: &HostPath) -> bool {
        use std::os::unix::fs::PermissionsExt;
        self.note(path);
        self.stat(path, Last::Follow)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }

    /// A one-value attribute file, trimmed.
    pub fn read_attr(&self, path: &HostPath) -> Result<String, ReadError> {
        // Some kernels end attributes with a NUL after the newline.
        Ok(self
            .read_text(path)?
            .trim_matches(|c: char| c.is_whitespace() || c == '\0')
            .to_string())
    }

    /// An attribute, or `None` when the file is absent; other errors are returned.
    pub fn read_attr_opt(&self, path: &HostPath) -> Result<Option<String>, ReadError> {
        match self.read_attr(path) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// An attribute parsed by `parse`; a parse failure becomes `ReadError::Invalid`.
    pub fn read_parsed<T, E: std::fmt::Display>(
        &self,
        path: &HostPath,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Option<T>, ReadError> {
        match self.read_attr_opt(path)? {
            None => Ok(None),
            Some(text) => parse(&text)
                .map(Some)
                .map_err(|e| ReadError::invalid(path, &text, e.to_string())),
        }
    }

    /// Does anything (file, directory, link, even a dangling one) exist at `path`?
    pub fn exists(&self, path: &HostPath) -> bool {
        self.note(path);
        self.stat(path, Last::NoFollow).is_ok()
    }

    /// Is `path` a regular file (following links: a dangling link is not)?
    pub fn is_file(&self, path: &HostPath) -> bool {
        self.note(path);
        self.stat(path, Last::Follow).is_ok_and(|m| m.is_file())
    }

    /// Is `path` a directory (following links)?
    pub fn is_dir(&self, path: &HostPath) -> bool {
        self.note(path);
        self.stat(path, Last::Follow).is_ok_and(|m| m.is_dir())
    }

    /// The names in a directory, sorted. A missing directory is `NotFound`.
    pub fn list_dir(&self, path: &HostPath) -> Result<Vec<String>, ReadError> {
        self.note(path);
        let entries = self
            .open_fd(path, OFlags::RDONLY | OFlags::DIRECTORY, Last::Follow)
            .and_then(confined::list_fd)
            .map_err(|e| ReadError::from_io(path, &e))?;
        let mut names = Vec::with_capacity(entries.len());
        for (name, is_link) in entries {
            let name = name.to_string_lossy().into_owned();
            // A listing's links (group members, class entries) are part of what we read.
            if is_link {
                self.note(&path.join(&name));
            }
            names.push(name);
        }
        names.sort();
        Ok(names)
    }

    /// The target of a symlink, as stored.
    pub fn read_link(&self, path: &HostPath) -> Result<PathBuf, ReadError> {
        self.note(path);
        self.open_fd(path, OFlags::PATH, Last::NoFollow)
            .and_then(|fd| confined::read_link_fd(&fd))
            .map_err(|e| ReadError::from_io(path, &e))
    }

    /// The last component of a symlink's target (`driver` -> `vfio-pci`).
    pub fn link_name(&self, path: &HostPath) -> Result<Option<String>, ReadError> {
        match self.read_link(path) {
            Ok(target) => Ok(target.file_name().map(|n| n.to_string_lossy().into_owned())),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A symlink resolved lexically inside the root (`../../devices/x` from
    /// `sys/bus/pci/devices/y`), without touching anything outside the root.
    /// Returns `None` when the link is absent or escapes the root.
    pub fn resolve_link(&self, path: &HostPath) -> Result<Option<HostPath>, ReadError> {
        let target = match self.read_link(path) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut parts: Vec<std::ffi::OsString> = Vec::new();
        if target.is_relative()
            && let Some(parent) = path.0.parent()
        {
            parts.extend(parent.components().map(|c| c.as_os_str().to_owned()));
        }
        for comp in target.components() {
            match comp {
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Ok(None);
                    }
                }
                Component::Normal(p) => parts.push(p.to_owned()),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        let joined: PathBuf = parts.iter().collect();
        Ok(Some(HostPath(joined)))
    }

    /// Is `path` itself a symlink?
    pub fn is_symlink(&self, path: &HostPath) -> bool {
        self.stat(path, Last::NoFollow)
            .is_ok_and(|m| m.file_type().is_symlink())
    }
}

#[cfg(test)]
mod tests;
