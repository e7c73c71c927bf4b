//! Files the user names on the command line or in the app (a domain XML, a
//! ROM file): read with a size cap and without ever blocking — a FIFO or a
//! device where a file belongs is refused, not waited on — so bad input gets
//! a clear error and bounded memory.

use std::io::Read;
use std::path::Path;

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

/// The bytes of a regular file, at most `limit`.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, UserFileError> {
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
}
