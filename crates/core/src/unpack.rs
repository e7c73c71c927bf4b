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
mod tests {
    use super::*;

    #[test]
    fn link_targets_are_kept_inside() {
        let t = |link: &str, target: &str| {
            inside_target(Path::new(link), Path::new(target)).map(|p| p.display().to_string())
        };
        assert_eq!(
            t("sys/bus/pci/devices/x", "../../../devices/pci0000:00/x"),
            None
        );
        assert_eq!(
            t("proc/cmdline", "/home/me/secret").as_deref(),
            Some("../home/me/secret")
        );
        assert_eq!(t("sys/evil", "../../../../etc").as_deref(), Some("../etc"));
        assert_eq!(t("top", "/").as_deref(), Some("."));
    }

    /// A gzip tar of raw entries: (name as stored, kind, link target, data).
    /// Names are written into the header by hand, as a hostile tool would.
    fn archive(entries: &[Raw]) -> Vec<u8> {
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        for (name, kind, target, data) in entries {
            let mut h = tar::Header::new_old();
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            h.as_old_mut().linkname[..target.len()].copy_from_slice(target.as_bytes());
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    fn unpack(
        bytes: &[u8],
        limits: &Limits,
    ) -> (tempfile::TempDir, Result<UnpackReport, UnpackError>) {
        let top = tempfile::tempdir().unwrap();
        let dest = top.path().join("dest");
        fs::create_dir(&dest).unwrap();
        let r = unpack_tar_gz(bytes, "t.tar.gz", &dest, limits);
        (top, r)
    }

    use tar::EntryType as T;

    /// An entry as `archive` takes it: (name, kind, link target, data).
    type Raw<'a> = (&'a str, T, &'a str, &'a [u8]);

    #[test]
    fn hostile_entries_are_refused_and_land_nowhere() {
        let cases: [(&[Raw], &str); 9] = [
            (&[("../evil", T::Regular, "", b"x")], "outside"),
            (&[("/tmp/evil", T::Regular, "", b"x")], "outside"),
            (&[("sys/../../evil", T::Regular, "", b"x")], "outside"),
            (
                &[
                    ("a", T::Symlink, "..", b""),
                    ("a/evil", T::Regular, "", b"x"),
                ],
                "not a folder",
            ),
            (&[("h", T::Link, "/outside/passwd", b"")], "hard link"),
            (&[("p", T::Fifo, "", b"")], "FIFO"),
            (&[("d", T::Char, "", b"")], "character device"),
            // Through a link to the top: u/.. is the folder's parent.
            (
                &[
                    ("u", T::Symlink, ".", b""),
                    ("var", T::Symlink, "u/..", b""),
                ],
                "var: a link to u/.., which goes through u, itself a link",
            ),
            // The other order: the link on the way comes after.
            (
                &[
                    ("d/", T::Directory, "", b""),
                    ("d/w", T::Symlink, "../x/..", b""),
                    ("x", T::Symlink, ".", b""),
                ],
                "x: a link where an earlier link's target passes through",
            ),
        ];
        for (entries, says) in cases {
            let (top, r) = unpack(&archive(entries), &Limits::SNAPSHOT);
            let e = r.unwrap_err().to_string();
            assert!(e.contains(says), "{entries:?}: {e}");
            // Nothing beside the destination.
            let beside: Vec<_> = fs::read_dir(top.path()).unwrap().collect();
            assert_eq!(beside.len(), 1, "{entries:?}");
        }
    }

    #[test]
    fn links_that_leave_are_kept_pointing_inside() {
        let bytes = archive(&[
            ("proc/", T::Directory, "", b""),
            ("proc/cmdline", T::Symlink, "/home/me/secret", b""),
            (
                "sys/bus/pci/devices/x",
                T::Symlink,
                "../../../devices/x",
                b"",
            ),
            ("sys/devices/x/vendor", T::Regular, "", b"0x10de\n"),
        ]);
        let (top, r) = unpack(&bytes, &Limits::SNAPSHOT);
        let r = r.unwrap();
        assert_eq!((r.files, r.symlinks, r.links_rewritten), (1, 2, 1));
        let dest = top.path().join("dest");
        assert_eq!(
            fs::read_link(dest.join("proc/cmdline")).unwrap(),
            Path::new("../home/me/secret")
        );
        assert_eq!(
            fs::read_to_string(dest.join("sys/bus/pci/devices/x/vendor")).unwrap(),
            "0x10de\n"
        );
    }

    /// `u -> .` then `var -> u/../beside`: each target stays inside when
    /// read as text, yet `var` is the file beside the unpacked folder.
    #[test]
    fn a_link_through_a_link_does_not_lead_out() {
        let bytes = archive(&[
            ("u", T::Symlink, ".", b""),
            ("var", T::Symlink, "u/../beside", b""),
        ]);
        let top = tempfile::tempdir().unwrap();
        let dest = top.path().join("dest");
        fs::create_dir(&dest).unwrap();
        fs::write(top.path().join("beside"), "not the archive's").unwrap();
        let e = unpack_tar_gz(&bytes[..], "t.tar.gz", &dest, &Limits::SNAPSHOT)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.tar.gz: var: a link to u/../beside, which goes through u"),
            "{e}"
        );
        assert!(fs::symlink_metadata(dest.join("var")).is_err(), "not made");
    }

    /// Folders 0700, files 0600, 0700 where the archive had an executable
    /// bit (a hook): the user's alone, whatever modes the archive says.
    #[test]
    fn what_is_unpacked_is_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        for (name, kind, mode, data) in [
            ("etc/", T::Directory, 0o777, &b""[..]),
            (
                "etc/libvirt/qemu.conf",
                T::Regular,
                0o666,
                b"user = \"me\"\n",
            ),
            ("etc/libvirt/hooks/qemu", T::Regular, 0o755, b"#!/bin/sh\n"),
            ("etc/libvirt/hooks/other", T::Regular, 0o001, b"#!/bin/sh\n"),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_mode(mode);
            h.set_size(data.len() as u64);
            b.append_data(&mut h, name, data).unwrap();
        }
        let bytes = b.into_inner().unwrap().finish().unwrap();
        let (top, r) = unpack(&bytes, &Limits::SNAPSHOT);
        r.unwrap();
        let dest = top.path().join("dest");
        let mode = |rel: &str| fs::metadata(dest.join(rel)).unwrap().permissions().mode() & 0o7777;
        for dir in ["etc", "etc/libvirt", "etc/libvirt/hooks"] {
            assert_eq!(mode(dir), DIR_MODE, "{dir}");
        }
        assert_eq!(mode("etc/libvirt/qemu.conf"), FILE_MODE);
        assert_eq!(mode("etc/libvirt/hooks/qemu"), EXEC_MODE);
        assert_eq!(mode("etc/libvirt/hooks/other"), EXEC_MODE);
    }

    #[test]
    fn bombs_stop_at_the_caps() {
        let zeros = vec![0u8; 4 << 20];
        let bytes = archive(&[("big", T::Regular, "", &zeros)]);
        assert!(bytes.len() < 64 << 10, "a bomb: {} bytes", bytes.len());
        let small = Limits {
            max_stream_bytes: 1 << 20,
            ..Limits::SNAPSHOT
        };
        let e = unpack(&bytes, &small).1.unwrap_err().to_string();
        assert!(e.contains("more than 1 MiB"), "{e}");
        let few_bytes = Limits {
            max_file_bytes: 1 << 20,
            ..Limits::SNAPSHOT
        };
        let e = unpack(&bytes, &few_bytes).1.unwrap_err().to_string();
        assert!(e.contains("more than 1 MiB"), "{e}");
        let names: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
        let many: Vec<Raw> = names
            .iter()
            .map(|n| (n.as_str(), T::Regular, "", &b""[..]))
            .collect();
        let few_entries = Limits {
            max_entries: 10,
            ..Limits::SNAPSHOT
        };
        let e = unpack(&archive(&many), &few_entries)
            .1
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 10 entries"), "{e}");
        // Not gzip at all, or cut off: an error.
        assert!(unpack(b"plain text", &Limits::SNAPSHOT).1.is_err());
        let whole = archive(&[("f", T::Regular, "", b"data")]);
        assert!(
            unpack(&whole[..whole.len() / 2], &Limits::SNAPSHOT)
                .1
                .is_err()
        );
    }

    #[test]
    fn paths_outside_are_none() {
        assert_eq!(
            clean_path(Path::new("./sys/x")),
            Some(PathBuf::from("sys/x"))
        );
        assert_eq!(clean_path(Path::new("/outside/passwd")), None);
        assert_eq!(clean_path(Path::new("sys/../../x")), None);
    }
}
