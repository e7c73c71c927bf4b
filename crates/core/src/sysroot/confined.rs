//! Paths resolved inside a captured host root, never outside it. A snapshot
//! or fixture tree is full of symlinks (sysfs is mostly links) and anyone can
//! hand us one: a link `proc/cmdline -> /home/me/secret` or
//! `sys/x -> ../../../../etc` must not read the machine we run on. Every open
//! is `openat2(RESOLVE_IN_ROOT)` on a descriptor of the root, so the kernel
//! resolves each link as if the root were `/` (an absolute target starts at
//! the root, `..` stops there), as a chroot would. Where `openat2` is missing
//! (Linux before 5.6, or a sandbox that refuses it) the same walk is done here,
//! one component at a time with a limit on links followed.

use super::link_walk::{Met, walk_links};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// Whether this kernel has `openat2`: 0 not known yet, 1 yes, 2 no.
static OPENAT2: AtomicU8 = AtomicU8::new(0);

/// Whether the last component of a path is followed when it is a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Last {
    Follow,
    NoFollow,
}

/// An open descriptor of a host root; every path is resolved inside it.
#[derive(Debug)]
pub(super) struct Jail {
    root: OwnedFd,
    /// Use `openat2`; false: the walk here (also forced in tests).
    kernel_resolves: bool,
}

impl Jail {
    /// Open the root directory `base` (following links: the user named it).
    pub(super) fn open(base: &Path) -> io::Result<Jail> {
        let root = rustix::fs::open(
            base,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Jail {
            root,
            kernel_resolves: OPENAT2.load(Ordering::Relaxed) != 2,
        })
    }

    /// The same root, resolved by the walk here instead of the kernel.
    #[cfg(test)]
    pub(super) fn walking(base: &Path) -> io::Result<Jail> {
        let mut j = Self::open(base)?;
        j.kernel_resolves = false;
        Ok(j)
    }

    /// Open `rel` inside the root with `flags` (`O_CLOEXEC` is added).
    pub(super) fn open_at(&self, rel: &Path, flags: OFlags, last: Last) -> io::Result<OwnedFd> {
        let flags = flags
            | OFlags::CLOEXEC
            | match last {
                Last::Follow => OFlags::empty(),
                Last::NoFollow => OFlags::NOFOLLOW,
            };
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        if self.kernel_resolves {
            // EAGAIN: a rename raced the resolution; try again, then walk.
            for _ in 0..3 {
                match rustix::fs::openat2(
                    &self.root,
                    rel,
                    flags,
                    Mode::empty(),
                    ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
                ) {
                    Ok(fd) => {
                        OPENAT2.store(1, Ordering::Relaxed);
                        return Ok(fd);
                    }
                    Err(rustix::io::Errno::NOSYS) => {
                        OPENAT2.store(2, Ordering::Relaxed);
                        break;
                    }
                    Err(rustix::io::Errno::AGAIN) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let physical = self.walk(rel, last)?;
        let physical = if physical.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            physical
        };
        // Every directory on the way is a real one inside the root, and the
        // last component was resolved already: follow nothing more.
        Ok(rustix::fs::openat(
            &self.root,
            &physical,
            flags | OFlags::NOFOLLOW,
            Mode::empty(),
        )?)
    }

    /// `rel` with every link on the way resolved inside the root (and the
    /// last one too with `Last::Follow`): a path of real directories.
    fn walk(&self, rel: &Path, last: Last) -> io::Result<PathBuf> {
        walk_links(rel, |next, is_last| {
            let st = match rustix::fs::statat(&self.root, next, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // A missing last component is for the caller's open to say.
                Err(rustix::io::Errno::NOENT) if is_last => return Ok(Met::Stop),
                Err(e) => return Err(e.into()),
            };
            if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
                return Ok(Met::NotLink);
            }
            if is_last && last == Last::NoFollow {
                return Ok(Met::Stop);
            }
            let target = rustix::fs::readlinkat(&self.root, next, Vec::new())?;
            Ok(Met::Link(PathBuf::from(OsString::from_vec(
                target.into_bytes(),
            ))))
        })
    }
}

/// The target of the link at `fd` (opened with `O_PATH | O_NOFOLLOW`).
pub(super) fn read_link_fd(fd: &OwnedFd) -> io::Result<PathBuf> {
    let target = rustix::fs::readlinkat(fd.as_fd(), "", Vec::new()).map_err(|e| {
        // The empty path names the descriptor itself; ENOENT means "not a link".
        if e == rustix::io::Errno::NOENT {
            rustix::io::Errno::INVAL
        } else {
            e
        }
    })?;
    Ok(PathBuf::from(OsString::from_vec(target.into_bytes())))
}

/// The names in the directory `fd` (opened for reading), and whether each
/// is a symlink, unsorted.
pub(super) fn list_fd(fd: OwnedFd) -> io::Result<Vec<(OsString, bool)>> {
    let mut out = Vec::new();
    let dir_fd = fd.try_clone()?;
    for entry in rustix::fs::Dir::new(fd)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let is_link = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(&dir_fd, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink),
            t => t == FileType::Symlink,
        };
        out.push((OsString::from_vec(name.to_vec()), is_link));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::fs::File;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    fn read(j: &Jail, rel: &str) -> io::Result<String> {
        let fd = j.open_at(Path::new(rel), OFlags::RDONLY, Last::Follow)?;
        let mut s = String::new();
        File::from(fd).read_to_string(&mut s)?;
        Ok(s)
    }

    /// A root with a secret beside it, links that try to reach it, links
    /// that stay inside, and a loop.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("secret"), "outside").unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(root.join("sys/devices/pci0000:00/0000:00:01.0")).unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        fs::create_dir_all(root.join("proc")).unwrap();
        fs::write(
            root.join("sys/devices/pci0000:00/0000:00:01.0/vendor"),
            "0x10de\n",
        )
        .unwrap();
        fs::write(root.join("secret"), "inside").unwrap();
        symlink(
            "../../../devices/pci0000:00/0000:00:01.0",
            root.join("sys/bus/pci/devices/0000:00:01.0"),
        )
        .unwrap();
        symlink(dir.path().join("secret"), root.join("proc/cmdline")).unwrap();
        symlink("../../../../../../secret", root.join("sys/up")).unwrap();
        symlink("loop-b", root.join("sys/loop-a")).unwrap();
        symlink("loop-a", root.join("sys/loop-b")).unwrap();
        (dir, root)
    }

    #[test]
    fn links_resolve_inside_the_root_both_ways() {
        let (_dir, root) = tree();
        for j in [Jail::open(&root).unwrap(), Jail::walking(&root).unwrap()] {
            assert_eq!(
                read(&j, "sys/bus/pci/devices/0000:00:01.0/vendor").unwrap(),
                "0x10de\n"
            );
            // An absolute target starts at the root; `..` stops there.
            assert_eq!(
                read(&j, "proc/cmdline").unwrap_err().kind(),
                io::ErrorKind::NotFound
            );
            assert_eq!(read(&j, "sys/up").unwrap(), "inside");
            assert_eq!(read(&j, "../../secret").unwrap(), "inside");
            let e = read(&j, "sys/loop-a").unwrap_err();
            assert_eq!(e.raw_os_error(), Some(40), "ELOOP: {e}");
            // Not following the last link: the link itself.
            let fd = j
                .open_at(Path::new("proc/cmdline"), OFlags::PATH, Last::NoFollow)
                .unwrap();
            assert!(
                File::from(fd.try_clone().unwrap())
                    .metadata()
                    .unwrap()
                    .is_symlink()
            );
            assert_eq!(
                read_link_fd(&fd).unwrap(),
                root.parent().unwrap().join("secret")
            );
            let dir = j
                .open_at(
                    Path::new("sys/bus/pci/devices"),
                    OFlags::RDONLY | OFlags::DIRECTORY,
                    Last::Follow,
                )
                .unwrap();
            assert_eq!(
                list_fd(dir).unwrap(),
                vec![(OsString::from("0000:00:01.0"), true)]
            );
        }
    }
}
