//! Unpacking a host snapshot (`.tar.gz`, what `vfio-assistant snapshot`
//! writes) that anyone may hand us, into a folder of our own. Only what a
//! snapshot holds is accepted — files, folders and symbolic links, at plain
//! relative paths — and nothing can land or point outside the folder:
//!
//! * no absolute path, no `..`, nothing written through a link an earlier
//!   entry made;
//! * a link whose target would leave the folder (absolute, or climbing past
//!   the top) is rewritten to the same place inside it, as `--root` reads it;
//! * a link whose target passes through another link is refused, in either
//!   order (see links.rs): `u -> .` then `v -> u/../..` would lead out;
//! * everything is the user's alone, created so (not changed after): folders
//!   0700, files 0600, or 0700 when the archive had any executable bit (a
//!   hook script stays executable to our checks); the umask only narrows it;
//! * hard links, devices, FIFOs and sockets are refused;
//! * the unpacked bytes and the number of entries are capped (a gzip bomb
//!   stops at the cap, not at a full disk).

mod links;

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// An unpacked folder's mode: the user's alone.
pub const DIR_MODE: u32 = 0o700;
/// An unpacked file's mode, and an executable one's.
pub const FILE_MODE: u32 = 0o600;
pub const EXEC_MODE: u32 = 0o700;

/// A new folder, created with `DIR_MODE` (never widened after).
fn make_dir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(DIR_MODE).create(path)
}

/// How much an archive may unpack to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The tar stream after decompression (headers included).
    pub max_stream_bytes: u64,
    /// The files' contents together.
    pub max_file_bytes: u64,
    pub max_entries: usize,
}

impl Limits {
    /// A snapshot is a few MB of small files (each at most 4 MiB) in tens of
    /// thousands of entries; these are far above any real one.
    pub const SNAPSHOT: Limits = Limits {
        max_stream_bytes: 1 << 30,
        max_file_bytes: 512 << 20,
        max_entries: 200_000,
    };
}

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("{archive}: {message}")]
    Refused { archive: String, message: String },
    #[error("{archive}: {path}: {source}")]
    Io {
        archive: String,
        path: String,
        #[source]
        source: io::Error,
    },
}

/// What was unpacked.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UnpackReport {
    pub files: usize,
    pub directories: usize,
    pub symlinks: usize,
    /// Links whose target left the folder, now pointing at the same place inside it.
    pub links_rewritten: usize,
    pub file_bytes: u64,
}

/// A reader that fails once more than `left` bytes went through it.
struct Capped<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            io::Error::other(format!(
                "unpacks to more than {} MiB; not a host snapshot",
                self.limit >> 20
            ))
        })?;
        Ok(n)
    }
}

/// The plain components of an entry's path; `None` when it is absolute or
/// has `..` (a path that could land outside the folder).
fn clean_path(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// A link target that stays inside the folder: as it is when it does, else
/// the place it names inside the folder (an absolute target from the top,
/// `..` stopping at the top), written relative to the link. `None`: as is.
fn inside_target(link: &Path, target: &Path) -> Option<PathBuf> {
    let parent: Vec<OsString> = link
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .map(|c| c.as_os_str().to_owned())
        .collect();
    let mut at = if target.is_absolute() {
        Vec::new()
    } else {
        parent.clone()
    };
    let mut escapes = target.is_absolute();
    for c in target.components() {
        match c {
            Component::ParentDir => escapes |= at.pop().is_none(),
            Component::Normal(n) => at.push(n.to_owned()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    if !escapes {
        return None;
    }
    let mut rel: PathBuf = parent.iter().map(|_| "..").collect();
    rel.extend(&at);
    if rel.as_os_str().is_empty() {
        rel.push(".");
    }
    Some(rel)
}

/// Unpack the gzip tar `src` (named `archive` in messages) into the existing
/// folder `dest`, within `limits`.
pub fn unpack_tar_gz(
    src: impl Read,
    archive: &str,
    dest: &Path,
    limits: &Limits,
) -> Result<UnpackReport, UnpackError> {
    let refused = |message: String| UnpackError::Refused {
        archive: archive.to_string(),
        message,
    };
    let io_at = |path: &Path, source: io::Error| UnpackError::Io {
        archive: archive.to_string(),
        path: path.display().to_string(),
        source,
    };
    let stream = Capped {
        inner: flate2::read::GzDecoder::new(src),
        left: limits.max_stream_bytes,
        limit: limits.max_stream_bytes,
    };
    let mut tar = tar::Archive::new(stream);
    let mut report = UnpackReport::default();
    // Folders made or checked so far (relative): none of them is a link.
    let mut real_dirs: HashSet<PathBuf> = HashSet::new();
    let mut links = links::Links::default();
    let entries = tar.entries().map_err(|e| io_at(Path::new(""), e))?;
    for (n, entry) in entries.enumerate() {
        if n >= limits.max_entries {
            return Err(refused(format!(
                "more than {} entries; not a host snapshot",
                limits.max_entries
            )));
        }
        let mut entry = entry.map_err(|e| io_at(Path::new(""), e))?;
        let raw = entry
            .path()
            .map_err(|e| io_at(Path::new(""), e))?
            .into_owned();
        let kind = entry.header().entry_type();
        if kind.is_pax_global_extensions() {
            continue;
        }
        let rel = clean_path(&raw).ok_or_else(|| {
            refused(format!(
                "{}: a path outside the archive's folder",
                raw.display()
            ))
        })?;
        if rel.as_os_str().is_empty() {
            continue; // `./` itself
        }
        make_parents(dest, &rel, &mut real_dirs).map_err(|e| match e {
            Parent::Io(e) => io_at(&rel, e),
            Parent::NotADir(p) => refused(format!(
                "{}: goes through {}, which is not a folder (a link?)",
                rel.display(),
                p.display()
            )),
        })?;
        let full = dest.join(&rel);
        match kind {
            tar::EntryType::Directory => {
                match fs::symlink_metadata(&full) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        return Err(refused(format!(
                            "{}: a folder where another entry is",
                            rel.display()
                        )));
                    }
                    Err(_) => make_dir(&full).map_err(|e| io_at(&rel, e))?,
                }
                real_dirs.insert(rel);
                report.directories += 1;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().map_err(|e| io_at(&rel, e))?;
                let left = limits.max_file_bytes.saturating_sub(report.file_bytes);
                if size > left {
                    return Err(refused(format!(
                        "{}: the files come to more than {} MiB; not a host snapshot",
                        rel.display(),
                        limits.max_file_bytes >> 20
                    )));
                }
                // create_new: never through a link or over an earlier entry.
                // Executable stays executable (a hook script); no other bit
                // of the archive's mode is taken.
                let exec = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
                let mut out = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(if exec { EXEC_MODE } else { FILE_MODE })
                    .open(&full)
                    .map_err(|e| io_at(&rel, e))?;
                let copied =
                    io::copy(&mut (&mut entry).take(size), &mut out).map_err(|e| io_at(&rel, e))?;
                report.file_bytes += copied;
                report.files += 1;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|e| io_at(&rel, e))?
                    .ok_or_else(|| refused(format!("{}: a link to nothing", rel.display())))?
                    .into_owned();
                let target = match inside_target(&rel, &target) {
                    Some(t) => {
                        report.links_rewritten += 1;
                        t
                    }
                    None => target,
                };
                links
                    .admit(&rel, &target)
                    .map_err(|why| refused(format!("{}: {why}", rel.display())))?;
                std::os::unix::fs::symlink(&target, &full).map_err(|e| io_at(&rel, e))?;
                report.symlinks += 1;
            }
            other => {
                let what = match other {
                    tar::EntryType::Link => "a hard link",
                    tar::EntryType::Char => "a character device",
                    tar::EntryType::Block => "a block device",
                    tar::EntryType::Fifo => "a FIFO",
                    _ => "an entry of an unknown kind",
                };
                return Err(refused(format!(
                    "{}: {what}; a host snapshot holds only files, folders and links",
                    rel.display()
                )));
            }
        }
    }
    Ok(report)
}

enum Parent {
    Io(io::Error),
    NotADir(PathBuf),
}

/// Make the folders above `rel` inside `dest`, refusing any that is not a
/// real folder (a link an earlier entry made would lead outside).
fn make_parents(dest: &Path, rel: &Path, real_dirs: &mut HashSet<PathBuf>) -> Result<(), Parent> {
    let Some(parent) = rel.parent() else {
        return Ok(());
    };
    let mut at = PathBuf::new();
    for c in parent.components() {
        at.push(c);
        if real_dirs.contains(&at) {
            continue;
        }
        match fs::symlink_metadata(dest.join(&at)) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(Parent::NotADir(at)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                make_dir(&dest.join(&at)).map_err(Parent::Io)?;
            }
            Err(e) => return Err(Parent::Io(e)),
        }
        real_dirs.insert(at.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
