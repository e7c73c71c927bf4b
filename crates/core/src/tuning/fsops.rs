//! Writing to a host for the tuning, and nowhere else: only the allowlisted
//! places (boot configuration drop-ins, modprobe.d, the initramfs
//! generators' drop-ins, tmpfiles.d, irqbalance's defaults; the sysfs and
//! procfs knobs), never through a symlink below the root, and files always
//! atomically: a temporary file in the same folder, fsync, rename, the
//! folder synced; mode and owner kept.

use crate::sysroot::{HostPath, HostRoot};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{0}: not a place this tool writes")]
    NotAllowed(String),
    #[error(
        "{path}: {what} on the way (a symlink where a file or folder belongs); nothing written"
    )]
    Symlink { path: String, what: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: the folder is read-only (a read-only /boot?)")]
    ReadOnly(String),
    #[error("{0}")]
    Injected(String),
}

/// The mode a file we create gets: hooks and GRUB's generators are run,
/// everything else is read.
fn new_file_mode(path: &str) -> u32 {
    if path.starts_with("/etc/libvirt/hooks/") || path.starts_with("/etc/grub.d/") {
        0o755
    } else {
        0o644
    }
}

/// A file some change kind writes (`targets.rs` holds the allowlist).
pub fn file_allowed(path: &str) -> bool {
    super::targets::file_for(None, path)
}

/// A value some change kind writes.
pub fn value_allowed(path: &str) -> bool {
    super::targets::value_for(None, path)
}

/// Where `path` is under `root`, with no symlink below the root on the way
/// (the last component may be a link only when `final_link_ok`: sysfs
/// attributes are reached through device links). `..` is refused.
pub fn confined(root: &HostRoot, path: &str, final_link_ok: bool) -> Result<PathBuf, WriteError> {
    let p = Path::new(path);
    if !p.is_absolute()
        || p.components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(WriteError::NotAllowed(path.into()));
    }
    let hp = HostPath::from_absolute(path).ok_or_else(|| WriteError::NotAllowed(path.into()))?;
    let mut cur = root.base().to_path_buf();
    let parts: Vec<_> = hp.relative().components().collect();
    for (i, c) in parts.iter().enumerate() {
        cur.push(c);
        let last = i + 1 == parts.len();
        // sysfs is made of links (device → ../../devices/…): a live sysfs
        // path is followed by the kernel; a test root keeps them inside.
        if path.starts_with("/sys/") || path.starts_with("/proc/") || (last && final_link_ok) {
            continue;
        }
        if let Ok(m) = std::fs::symlink_metadata(&cur)
            && m.file_type().is_symlink()
        {
            return Err(WriteError::Symlink {
                path: path.into(),
                what: format!("{} is a link", cur.display()),
            });
        }
    }
    Ok(cur)
}

fn io(path: &str) -> impl Fn(std::io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.into(),
        source,
    }
}

/// Whether the folder is on a read-only mount.
pub fn read_only(dir: &Path) -> bool {
    rustix::fs::statvfs(dir).is_ok_and(|s| s.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
}

/// Replace (or create, or with `None` remove) the file at host `path`.
/// Mode and owner of an existing file are kept; a new one gets 0644 (0755
/// for a libvirt hook).
pub fn write_file(
    root: &HostRoot,
    path: &str,
    content: Option<&[u8]>,
    keep: Option<(u32, u32, u32)>,
) -> Result<(), WriteError> {
    if !file_allowed(path) {
        return Err(WriteError::NotAllowed(path.into()));
    }
    let target = confined(root, path, false)?;
    let dir = target
        .parent()
        .ok_or_else(|| WriteError::NotAllowed(path.into()))?;
    let Some(bytes) = content else {
        return match std::fs::remove_file(&target) {
            Ok(()) => sync_dir(dir, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(path)(e)),
        };
    };
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(io(path))?;
    }
    if read_only(dir) {
        return Err(WriteError::ReadOnly(path.into()));
    }
    let old = std::fs::symlink_metadata(&target).ok();
    let (mode, uid, gid) = match (keep, &old) {
        (Some(k), _) => k,
        (None, Some(m)) => (m.mode() & 0o7777, m.uid(), m.gid()),
        (None, None) => (new_file_mode(path), u32::MAX, u32::MAX),
    };
    replace_at(&target, path, Content::Bytes(bytes), (mode, uid, gid))
}

/// Where a file's new bytes come from.
pub enum Content<'a> {
    Bytes(&'a [u8]),
    /// A copy of this file (a journal's saved copy).
    Copy(&'a Path),
    /// This file itself, renamed into place (a staged grub.cfg): the switch
    /// the boot sees, all or nothing.
    Rename(&'a Path),
}

/// The one confined atomic writer (`write_file`, and `artifacts::put` for
/// the boot files): `target` is already confined and allowlisted for host
/// `path`. The bytes go to a temporary file beside it, 0600 until whole
/// (what it holds is never readable by others on the way, whatever the
/// umask), given `mode` (permission bits only: never setuid, setgid or
/// sticky) and, as root, its owner (`u32::MAX`: keep), synced, renamed over
/// the target; the folder is synced. A failure leaves the target as it was.
pub fn replace_at(
    target: &Path,
    path: &str,
    from: Content,
    (mode, uid, gid): Meta,
) -> Result<(), WriteError> {
    let dir = target
        .parent()
        .ok_or_else(|| WriteError::NotAllowed(path.into()))?;
    if let Content::Rename(src) = from {
        std::fs::File::open(src)
            .and_then(|f| f.sync_all())
            .map_err(io(path))?;
        std::fs::rename(src, target).map_err(io(path))?;
        return sync_dir(dir, path);
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.vfio-assistant.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        match from {
            Content::Bytes(bytes) => f.write_all(bytes)?,
            Content::Copy(src) => {
                std::io::copy(&mut std::fs::File::open(src)?, &mut f)?;
            }
            Content::Rename(_) => {}
        }
        f.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))?;
        if uid != u32::MAX {
            // Only root may give a file away; elsewhere (tests) it stays ours.
            let _ = std::os::unix::fs::fchown(&f, Some(uid), Some(gid));
        }
        f.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(path)(e));
    }
    sync_dir(dir, path)
}

fn sync_dir(dir: &Path, path: &str) -> Result<(), WriteError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(path))
}

/// Write a sysfs/procfs value (no create, no follow below the root except
/// sysfs's own links).
pub fn write_value(root: &HostRoot, path: &str, value: &str) -> Result<(), WriteError> {
    if !value_allowed(path) {
        return Err(WriteError::NotAllowed(path.into()));
    }
    let target = confined(root, path, true)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(!root.is_live())
        .open(&target)
        .map_err(io(path))?;
    f.write_all(value.as_bytes()).map_err(io(path))
}

/// (mode, uid, gid) of a file.
pub type Meta = (u32, u32, u32);

/// The current text of a host file (None: absent) with its mode and owner.
pub fn read_file(root: &HostRoot, path: &str) -> Result<Option<(Vec<u8>, Meta)>, WriteError> {
    let target = confined(root, path, false)?;
    match std::fs::symlink_metadata(&target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
        Ok(m) if !m.is_file() => Err(WriteError::NotAllowed(format!(
            "{path} (not a regular file)"
        ))),
        Ok(m) => {
            let bytes = crate::userfile::read_bytes(&target, 16 * 1024 * 1024).map_err(|e| {
                WriteError::Io {
                    path: path.into(),
                    source: std::io::Error::other(e.to_string()),
                }
            })?;
            Ok(Some((bytes, (m.mode() & 0o7777, m.uid(), m.gid()))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowlisted_places() {
        assert!(file_allowed("/etc/modprobe.d/vfio-assistant.conf"));
        assert!(!file_allowed("/etc/passwd"));
        assert!(!file_allowed("/etc/modprobe.d/../passwd"));
        assert!(value_allowed(
            "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"
        ));
        assert!(!value_allowed(
            "/sys/devices/system/cpu/../../../etc/shadow/cpufreq/scaling_governor"
        ));
        assert!(!value_allowed("/sys/kernel/mm/ksm/run/x"));
        assert!(!value_allowed("/proc/sysrq-trigger"));
    }

    #[test]
    fn atomic_write_keeps_mode_and_refuses_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::at(dir.path());
        let p = "/etc/modprobe.d/vfio-assistant.conf";
        write_file(&root, p, Some(b"one\n"), None).unwrap();
        let full = dir.path().join("etc/modprobe.d/vfio-assistant.conf");
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_file(&root, p, Some(b"two\n"), None).unwrap();
        assert_eq!(std::fs::read(&full).unwrap(), b"two\n");
        assert_eq!(std::fs::metadata(&full).unwrap().mode() & 0o777, 0o600);
        write_file(&root, p, None, None).unwrap();
        assert!(!full.exists());
        // A link planted where the file goes, pointing outside: refused.
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("x"), &full).unwrap();
        assert!(matches!(
            write_file(&root, p, Some(b"x"), None),
            Err(WriteError::Symlink { .. })
        ));
        assert!(!outside.path().join("x").exists());
        // A linked folder on the way: refused too.
        std::fs::remove_file(&full).unwrap();
        std::fs::remove_dir(dir.path().join("etc/modprobe.d")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("etc/modprobe.d")).unwrap();
        assert!(matches!(
            write_file(&root, p, Some(b"x"), None),
            Err(WriteError::Symlink { .. })
        ));
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    }
}
