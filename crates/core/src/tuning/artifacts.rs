//! Generated boot files — grub.cfg, initramfs images, boot entries — as the
//! transaction handles them: saved into the journal before the first change
//! (copied, never read whole into memory: an image may be 100 MiB), their
//! hash taken after the command that regenerates them, a staged file renamed
//! over the real one (the switch the next boot sees), and made durable for
//! the boot loader. GRUB reads ext4 without replaying its journal: a file
//! the kernel has synced may still be invisible to GRUB until the journal is
//! checkpointed, so on the live host the file system holding it is frozen
//! and thawed at once (FIFREEZE/FITHAW, what `fsfreeze -f; fsfreeze -u`
//! does and what GRUB's own documentation advises), which writes everything
//! to its final place.

use super::fsops::{Content, WriteError, confined, replace_at};
use crate::sysroot::HostRoot;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

pub use super::targets::artifact_allowed;

fn io(path: &str) -> impl Fn(std::io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.into(),
        source,
    }
}

/// Where a generated file is under the root, refused when not allowlisted.
pub fn locate(root: &HostRoot, path: &str) -> Result<std::path::PathBuf, WriteError> {
    if !artifact_allowed(path) {
        return Err(WriteError::NotAllowed(path.into()));
    }
    confined(root, path, false)
}

/// The sha256 of a file at host `path`, streamed (None: absent).
pub fn sha256(root: &HostRoot, path: &str) -> Result<Option<String>, WriteError> {
    let p = locate(root, path)?;
    sha256_file(&p).map_err(io(path))
}

/// The sha256 of a file anywhere (the journal's copies), streamed.
pub fn sha256_file(p: &Path) -> std::io::Result<Option<String>> {
    let mut f = match std::fs::File::open(p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(Some(
        h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
    ))
}

/// The file's mode, when it is there.
pub fn mode(root: &HostRoot, path: &str) -> Result<Option<u32>, WriteError> {
    let p = locate(root, path)?;
    match std::fs::symlink_metadata(&p) {
        Ok(m) if m.is_file() => Ok(Some(m.mode() & 0o7777)),
        Ok(_) => Err(WriteError::NotAllowed(format!(
            "{path} (not a regular file)"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path)(e)),
    }
}

fn sync_dir(dir: &Path, path: &str) -> Result<(), WriteError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(path))
}

/// Put `from` (a saved copy, or a staged file when `rename` is set) at host
/// `path` atomically: a temporary file beside it, synced, renamed; the
/// folder synced. `None`: remove it.
pub fn put(
    root: &HostRoot,
    path: &str,
    from: Option<&Path>,
    file_mode: Option<u32>,
    rename: bool,
) -> Result<(), WriteError> {
    let target = locate(root, path)?;
    let dir = target
        .parent()
        .ok_or_else(|| WriteError::NotAllowed(path.into()))?;
    let Some(src) = from else {
        return match std::fs::remove_file(&target) {
            Ok(()) => sync_dir(dir, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(path)(e)),
        };
    };
    // A copy keeps its source's mode unless the journal says another.
    let mode = match (file_mode, rename) {
        (Some(m), _) => m,
        (None, true) => 0,
        (None, false) => std::fs::metadata(src).map_err(io(path))?.mode(),
    };
    let from = if rename {
        Content::Rename(src)
    } else {
        Content::Copy(src)
    };
    replace_at(&target, path, from, (mode, u32::MAX, u32::MAX))
}

/// The top folder of the file system `p` is on (its mount point).
fn mount_point(p: &Path) -> Option<std::path::PathBuf> {
    let dev = std::fs::metadata(p).ok()?.dev();
    let mut top = p.to_path_buf();
    let mut cur = p.parent();
    while let Some(d) = cur {
        match std::fs::metadata(d) {
            Ok(m) if m.dev() == dev => top = d.to_path_buf(),
            _ => break,
        }
        cur = d.parent();
    }
    Some(top)
}

// _IOWR('X', 119, int) and _IOWR('X', 120, int) (linux/fs.h).
/// A file the boot loader reads (an entry on the ESP, a config under
/// /boot): written files there are made durable at once, before anything
/// points the boot at them (a cut right after must not leave the boot a
/// one-shot entry whose file never reached a vfat disk).
pub fn read_by_boot_loader(path: &str) -> bool {
    path.starts_with("/boot/") || path.starts_with("/efi/")
}

const FIFREEZE: libc::c_ulong = 0xC004_5877;
const FITHAW: libc::c_ulong = 0xC004_5878;

/// Make what was written under host `path` durable for the boot loader: on
/// the live host the file system is frozen and thawed at once (its journal
/// checkpointed, every block in its final place); elsewhere, and where the
/// file system cannot be frozen (vfat has no journal to replay), its data
/// are synced. Returns what was done, for the journal's record.
pub fn make_durable(root: &HostRoot, path: &str) -> Result<&'static str, WriteError> {
    let target = confined(root, path, false)?;
    // The folder it is in (or would be: a removed file's, the nearest one
    // that is there).
    let mut dir = target.clone();
    while !dir.is_dir() {
        if !dir.pop() {
            return Err(WriteError::NotAllowed(path.into()));
        }
    }
    let d = std::fs::File::open(&dir).map_err(io(path))?;
    // syncfs: every dirty page of that file system, not only this folder's.
    rustix::fs::syncfs(&d).map_err(|e| io(path)(e.into()))?;
    if !root.is_live() {
        return Ok("synced");
    }
    let Some(mp) = mount_point(&dir) else {
        return Ok("synced");
    };
    let m = std::fs::File::open(&mp).map_err(io(path))?;
    let fd = m.as_raw_fd();
    // SAFETY: FIFREEZE/FITHAW take an open descriptor of the mount point and
    // an unused int argument; the thaw follows at once whatever happens.
    let frozen = unsafe { libc::ioctl(fd, FIFREEZE as _, 0) };
    if frozen != 0 {
        // EOPNOTSUPP (vfat), EBUSY (frozen by someone else): synced is the
        // most this file system offers.
        return Ok("synced");
    }
    // SAFETY: as above.
    let thawed = unsafe { libc::ioctl(fd, FITHAW as _, 0) };
    if thawed != 0 {
        return Err(io(path)(std::io::Error::last_os_error()));
    }
    Ok("checkpointed (frozen and thawed)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_generated_boot_files() {
        for ok in [
            "/boot/grub/grub.cfg",
            "/boot/initrd.img-6.1.0-50-amd64",
            "/boot/initramfs-6.11.4-301.fc41.x86_64.img",
            "/boot/efi/0123abcd/6.1.0-50-amd64/initrd",
            "/boot/efi/0123abcd/6.1.0-50-amd64/initrd.img-6.1.0-50-amd64",
            "/boot/efi/loader/entries/0123abcd-6.1.0-50-amd64.conf",
        ] {
            assert!(artifact_allowed(ok), "{ok}");
        }
        for bad in [
            "/etc/passwd",
            "/boot/vmlinuz-6.1.0-50-amd64",
            "/boot/initrd.img-",
            "/boot/efi/../x/initrd",
            "/boot/grub/grub.cfg/x",
            "/boot/efi/loader/entries/..",
        ] {
            assert!(!artifact_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn put_saves_and_removes_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::at(dir.path());
        std::fs::create_dir_all(dir.path().join("boot/grub")).unwrap();
        let saved = dir.path().join("saved");
        std::fs::write(&saved, b"old cfg\n").unwrap();
        put(
            &root,
            "/boot/grub/grub.cfg",
            Some(&saved),
            Some(0o444),
            false,
        )
        .unwrap();
        let p = dir.path().join("boot/grub/grub.cfg");
        assert_eq!(std::fs::read(&p).unwrap(), b"old cfg\n");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o444);
        assert!(saved.exists(), "a copy, the saved bytes stay");
        let h = sha256(&root, "/boot/grub/grub.cfg").unwrap().unwrap();
        assert_eq!(h.len(), 64);
        assert_eq!(
            make_durable(&root, "/boot/grub/grub.cfg").unwrap(),
            "synced"
        );
        put(&root, "/boot/grub/grub.cfg", None, None, false).unwrap();
        assert!(!p.exists());
        assert_eq!(sha256(&root, "/boot/grub/grub.cfg").unwrap(), None);
        assert!(put(&root, "/etc/passwd", Some(&saved), None, false).is_err());
    }
}
