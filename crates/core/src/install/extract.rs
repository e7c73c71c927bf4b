//! Copying a checked folder tree out of an image into a real folder: names
//! that could leave the target (`/`, `..`) or that no file should have (NUL,
//! control characters) are refused before anything is written; files are
//! created new (never through a link or over a file already there), folders
//! 0755 and files 0644 from the start, data copied in bounded pieces.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::iso::{IsoImage, MediaError, Node};

/// The bytes copied at a time.
const CHUNK_BYTES: u64 = 1 << 20;

/// Whether `name` may become one file name inside the target folder.
pub(crate) fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 255
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Writes `plan` (paths below `to`, parents before children) into `to`.
pub(crate) fn write(
    image: &IsoImage,
    plan: &[(PathBuf, Node)],
    to: &Path,
) -> Result<u64, MediaError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MediaError::Io { path, source }
    };
    let meta = std::fs::symlink_metadata(to).map_err(io(to))?;
    if !meta.is_dir() {
        return Err(MediaError::Io {
            path: to.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "the place to copy into is not a folder",
            ),
        });
    }
    let mut written = 0u64;
    for (rel, node) in plan {
        let target = to.join(rel);
        if node.is_dir {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(&target)
                .map_err(io(&target))?;
            continue;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&target)
            .map_err(io(&target))?;
        let mut offset = 0u64;
        while offset < node.size {
            let take = (node.size - offset).min(CHUNK_BYTES) as usize;
            let chunk = image.disc().read_node(node, offset, take)?;
            file.write_all(&chunk).map_err(io(&target))?;
            offset += take as u64;
        }
        written += node.size;
    }
    Ok(written)
}
