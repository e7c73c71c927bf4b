//! Files the user names on the command line or in the app (a domain XML, a
//! ROM file): read with a size cap and without ever blocking — a FIFO or a
//! device where a file belongs is refused, not waited on — so bad input gets
//! a clear error and bounded memory.
//!
//! And files written where the user says (`snapshot OUT`, `rom --save OUT`):
//! written to a temporary file beside the target, synced, then renamed into
//! place, so a full disk or a crash never leaves a cut-off file; an existing
//! file is replaced only when asked (`--force`); a symlink, FIFO or device at
//! the target is refused, never written through.
//!
//! And what we make for the user's data alone (a snapshot, the folders a
//! snapshot is fetched or unpacked into): created 0600 / 0700, with that
//! mode at creation (the umask may only narrow it), never chmod'ed after.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum UserFileError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {what}, not a regular file")]
    NotAFile { path: String, what: &'static str },
    #[error("{path}: larger than {limit} bytes; this is not the file it should be")]
    TooLarge { path: String, limit: u64 },
    #[error("{path} already exists; pass --force to replace it")]
    Exists { path: String },
    #[error("{path} is a symbolic link; name the file itself (nothing is written through a link)")]
    Symlink { path: String },
}

/// What a non-regular file is, in words (`a FIFO (named pipe)`).
pub(crate) fn kind(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a folder"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// A regular file opened for reading, without blocking on a FIFO (refused).
pub fn open_regular(path: &Path) -> Result<std::fs::File, UserFileError> {
    use std::os::unix::fs::OpenOptionsExt;
    let p = path.display().to_string();
    const O_NONBLOCK: i32 = 0o4000;
    // O_NONBLOCK: opening a FIFO for reading returns at once instead of
    // waiting for a writer; the type check below then refuses it.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(|source| UserFileError::Io {
            path: p.clone(),
            source,
        })?;
    let meta = file.metadata().map_err(|source| UserFileError::Io {
        path: p.clone(),
        source,
    })?;
    if !meta.is_file() {
        return Err(UserFileError::NotAFile {
            path: p,
            what: kind(&meta.file_type()),
        });
    }
    Ok(file)
}

/// The bytes of a regular file, at most `limit`.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, UserFileError> {
    let p = path.display().to_string();
    let file = open_regular(path)?;
    let mut data = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|source| UserFileError::Io {
            path: p.clone(),
            source,
        })?;
    if data.len() as u64 > limit {
        return Err(UserFileError::TooLarge { path: p, limit });
    }
    Ok(data)
}

/// A text file (invalid UTF-8 replaced), at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, UserFileError> {
    let bytes = read_bytes(path, limit)?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// The mode of a file of the user's alone (a snapshot).
pub const PRIVATE_FILE_MODE: u32 = 0o600;
/// The mode of a folder of the user's alone.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// A new temporary folder (`prefix` and a random name, in the temporary
/// folder or `inside`), created 0700: tempfile's own are created with the
/// default mode, 0755 under the usual umask, readable by every user.
pub fn private_tempdir(prefix: &str, inside: Option<&Path>) -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let mut b = tempfile::Builder::new();
    b.prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(PRIVATE_DIR_MODE));
    match inside {
        Some(dir) => b.tempdir_in(dir),
        None => b.tempdir(),
    }
}

/// A new file being written: nothing appears at its path until `commit`.
/// Dropped without `commit` (an error on the way), it leaves nothing behind.
#[derive(Debug)]
pub struct NewFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
    replace: bool,
}

impl NewFile {
    /// Start writing `path`. An existing regular file there is an error
    /// unless `replace` (then it is replaced only at `commit`, keeping its
    /// permissions); a link, FIFO, folder or device there is always refused.
    pub fn create(path: &Path, replace: bool) -> Result<NewFile, UserFileError> {
        Self::create_as(path, replace, None)
    }

    /// As `create`, for a file of the user's alone (a snapshot): created
    /// 0600, also where it replaces a file of another mode.
    pub fn create_private(path: &Path, replace: bool) -> Result<NewFile, UserFileError> {
        Self::create_as(path, replace, Some(PRIVATE_FILE_MODE))
    }

    fn create_as(
        path: &Path,
        replace: bool,
        private: Option<u32>,
    ) -> Result<NewFile, UserFileError> {
        use std::os::unix::fs::PermissionsExt;
        let shown = path.display().to_string();
        let io = |source| UserFileError::Io {
            path: shown.clone(),
            source,
        };
        let existing = match std::fs::symlink_metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(e)),
        };
        let mode = match (&existing, private) {
            (Some(m), _) if m.file_type().is_symlink() => {
                return Err(UserFileError::Symlink { path: shown });
            }
            (Some(m), _) if !m.is_file() => {
                return Err(UserFileError::NotAFile {
                    path: shown,
                    what: kind(&m.file_type()),
                });
            }
            (Some(_), _) if !replace => return Err(UserFileError::Exists { path: shown }),
            // The user's alone, whatever was there before; created so (the
            // umask may only narrow it).
            (_, Some(private)) => private,
            (Some(m), None) => m.permissions().mode() & 0o7777,
            // What a plain create gives (the umask applies at open).
            (None, None) => 0o666,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "names no file",
                ))
            })?;
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".part")
            .permissions(std::fs::Permissions::from_mode(mode))
            .tempfile_in(dir)
            .map_err(io)?;
        if existing.is_some() && private.is_none() {
            // Exactly the replaced file's mode, umask or not.
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))
                .map_err(io)?;
        }
        Ok(NewFile {
            tmp,
            path: path.to_path_buf(),
            replace,
        })
    }

    /// Sync the data, move it into place, sync the folder.
    pub fn commit(self) -> Result<(), UserFileError> {
        let shown = self.path.display().to_string();
        let io = |source| UserFileError::Io {
            path: shown.clone(),
            source,
        };
        self.tmp.as_file().sync_all().map_err(io)?;
        // A link put there since `create` is replaced, not written through:
        // rename never follows the target.
        let persisted = if self.replace {
            self.tmp.persist(&self.path)
        } else {
            self.tmp.persist_noclobber(&self.path)
        };
        match persisted {
            Ok(_) => {}
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(UserFileError::Exists { path: shown });
            }
            Err(e) => return Err(io(e.error)),
        }
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        // The rename itself survives a crash once the folder is synced.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)
    }
}

impl Write for NewFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tmp.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.tmp.flush()
    }
}

/// Write `bytes` to `path` atomically (see `NewFile`): all of it or nothing.
pub fn write_new_atomic(path: &Path, bytes: &[u8], replace: bool) -> Result<(), UserFileError> {
    let mut f = NewFile::create(path, replace)?;
    f.write_all(bytes).map_err(|source| UserFileError::Io {
        path: path.display().to_string(),
        source,
    })?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let ok = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(ok.success());
        let e = read_text(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[test]
    fn size_is_capped() {
        let e = read_bytes(Path::new("/dev/zero"), 1000).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("big.xml");
        std::fs::write(&f, vec![b'x'; 2000]).unwrap();
        assert!(matches!(
            read_bytes(&f, 1000),
            Err(UserFileError::TooLarge { .. })
        ));
        assert_eq!(read_bytes(&f, 2000).unwrap().len(), 2000);
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writing_refuses_to_clobber_links_and_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("host.tar.gz");
        write_new_atomic(&out, b"one", false).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"one");
        let e = write_new_atomic(&out, b"two", false).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        assert_eq!(std::fs::read(&out).unwrap(), b"one");
        write_new_atomic(&out, b"two", true).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"two");

        // A link at the target: refused, its target untouched.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = dir.path().join("link.rom");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        for force in [false, true] {
            let e = write_new_atomic(&link, b"x", force).unwrap_err();
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");

        // A FIFO at the target: refused at once, not opened (that would block).
        let fifo = dir.path().join("pipe");
        let ok = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(ok.success());
        let e = write_new_atomic(&fifo, b"x", true).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        // No temporary file is left anywhere.
        assert_eq!(
            names_in(dir.path()),
            ["host.tar.gz", "link.rom", "pipe", "victim"]
        );
    }

    #[test]
    fn an_unfinished_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("snap.tar.gz");
        let mut f = NewFile::create(&out, false).unwrap();
        f.write_all(b"half of it").unwrap();
        assert!(!out.exists(), "nothing at the target before commit");
        drop(f); // an error on the way (a full disk) drops it
        assert!(names_in(dir.path()).is_empty());
        // Replacing keeps the old file's mode.
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&out, "old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_new_atomic(&out, b"new", true).unwrap();
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    /// A private file (a snapshot) is 0600, also where it replaces a file
    /// anyone could read; a private folder 0700.
    #[test]
    fn private_files_and_folders_are_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = private_tempdir("t-", None).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(dir.path()), PRIVATE_DIR_MODE);
        let inner = private_tempdir("t-", Some(dir.path())).unwrap();
        assert_eq!(mode(inner.path()), PRIVATE_DIR_MODE);
        let out = dir.path().join("snap.tar.gz");
        let mut f = NewFile::create_private(&out, false).unwrap();
        f.write_all(b"x").unwrap();
        f.commit().unwrap();
        assert_eq!(mode(&out), PRIVATE_FILE_MODE);
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut f = NewFile::create_private(&out, true).unwrap();
        f.write_all(b"y").unwrap();
        f.commit().unwrap();
        assert_eq!(mode(&out), PRIVATE_FILE_MODE);
        assert_eq!(std::fs::read(&out).unwrap(), b"y");
    }
}
