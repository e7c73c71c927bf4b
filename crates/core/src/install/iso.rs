//! One opened installer image (an .iso file or a disc's block device), read
//! by whichever filesystem it carries: UDF first (Windows installer images
//! keep their files only there; their ISO 9660 part holds a README.TXT), else
//! ISO 9660 with Joliet names, else Rock Ridge, else plain ISO 9660 names.
//! Paths inside the image are looked up case-insensitively.
//!
//! Everything is read with `pread` in bounded pieces: a 5 GB install.wim is
//! never held whole, and a hostile image (a folder inside itself, an extent
//! past the end, a million entries) gets an error, not a loop or a crash.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};

use super::{iso9660, udf};

/// The bytes of one sector (ISO 9660 and UDF logical blocks on optical media).
pub(crate) const SECTOR_BYTES: u64 = 2048;
/// The deepest path looked up or folder tree extracted.
pub(crate) const MAX_DEPTH: usize = 64;
/// The most bytes one folder's own data may hold (its list of entries).
pub(crate) const MAX_DIR_BYTES: u64 = 32 << 20;
/// The most entries one folder may hold.
pub(crate) const MAX_DIR_ENTRIES: usize = 100_000;
/// The most pieces (extents) one file may be made of.
pub(crate) const MAX_EXTENTS: usize = 65_536;
/// The most bytes one `read_at` hands back.
pub const MAX_READ_AT_BYTES: usize = 256 << 20;
/// The most entries (files and folders) one `extract_dir` copies.
pub const MAX_EXTRACT_ENTRIES: usize = 200_000;

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a disc image: {why}")]
    NotAnImage { path: PathBuf, why: String },
    #[error("the image has no {path_in_image}")]
    NotFound { path_in_image: String },
    #[error("{path_in_image} in the image is {size} bytes, more than the {max} bytes allowed here")]
    TooLarge {
        path_in_image: String,
        size: u64,
        max: u64,
    },
    #[error("{path_in_image} in the image is a folder, not a file")]
    IsADirectory { path_in_image: String },
    #[error("{path_in_image} in the image is a file, not a folder")]
    NotADirectory { path_in_image: String },
    #[error("the image holds a name that cannot be copied out safely: {name:?} in {dir_in_image}")]
    BadName { dir_in_image: String, name: String },
    #[error("the image is damaged or hostile: {what}")]
    Corrupt { what: String },
    #[error("the image uses something this reader does not support: {what}")]
    Unsupported { what: String },
    #[error("this is not a Windows installer image: {found}")]
    NotWindows { found: String },
    #[error("{path} is not there: check the path, or choose the ISO with Browse…")]
    Missing { path: PathBuf },
    #[error("{path}: no Windows 10 or 11 client edition for amd64 or arm64 on it")]
    NoClientEdition { path: PathBuf },
}

pub(crate) fn corrupt(what: impl Into<String>) -> MediaError {
    MediaError::Corrupt { what: what.into() }
}

/// One name in a folder of the image.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IsoEntry {
    pub name: String,
    pub is_dir: bool,
    /// Bytes (0 for a folder).
    pub size: u64,
}

/// Which filesystem of the image its files are read through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Filesystem {
    Udf,
    Joliet,
    RockRidge,
    Iso9660,
}

/// Where a piece of a file's data is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Extent {
    /// `len` bytes at byte `offset` of the image.
    Image { offset: u64, len: u64 },
    /// `len` bytes of zeros (allocated but not recorded, or a hole).
    Zeros { len: u64 },
    /// The data itself, kept inside the file's descriptor (UDF).
    Inline(Vec<u8>),
}

impl Extent {
    fn len(&self) -> u64 {
        match self {
            Extent::Image { len, .. } | Extent::Zeros { len } => *len,
            Extent::Inline(data) => data.len() as u64,
        }
    }
}

/// A file or folder as a filesystem module hands it up.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
    pub extents: Vec<Extent>,
    /// Where its descriptor is (a byte of the image): one folder met twice
    /// on a walk has the same id, which is how a loop is found.
    pub id: u64,
}

/// The image file, read by position; every read is checked against its end.
#[derive(Debug)]
pub(crate) struct Disc {
    file: File,
    pub path: PathBuf,
    pub size_bytes: u64,
}

impl Disc {
    pub fn open(path: &Path) -> Result<Disc, MediaError> {
        use std::os::unix::fs::OpenOptionsExt;
        let io = |source| MediaError::Io {
            path: path.to_path_buf(),
            source,
        };
        let not_image = |why: String| MediaError::NotAnImage {
            path: path.to_path_buf(),
            why,
        };
        // O_NONBLOCK: a FIFO put where the image belongs opens at once (and is
        // refused below) instead of waiting for a writer.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let ft = meta.file_type();
        let size_bytes = if ft.is_file() {
            meta.len()
        } else if ft.is_block_device() {
            // A disc in a drive (/dev/sr0): its size is where a seek to the end lands.
            use std::io::Seek;
            let mut f = &file;
            f.seek(std::io::SeekFrom::End(0)).map_err(io)?
        } else {
            return Err(not_image(format!(
                "it is {}, not a file",
                crate::userfile::kind(&ft)
            )));
        };
        if size_bytes < 17 * SECTOR_BYTES {
            return Err(not_image(format!(
                "{size_bytes} bytes is too small for one (its descriptors begin at byte 32768)"
            )));
        }
        Ok(Disc {
            file,
            path: path.to_path_buf(),
            size_bytes,
        })
    }

    /// `len` bytes at `offset`; an error if any of them lies past the end.
    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, MediaError> {
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > self.size_bytes) {
            return Err(corrupt(format!(
                "it points at bytes {offset}..{} but ends at byte {}: it is cut short or damaged",
                offset.saturating_add(len as u64),
                self.size_bytes
            )));
        }
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|source| MediaError::Io {
                path: self.path.clone(),
                source,
            })?;
        Ok(buf)
    }

    pub fn sector(&self, n: u64) -> Result<Vec<u8>, MediaError> {
        let offset = n
            .checked_mul(SECTOR_BYTES)
            .ok_or_else(|| corrupt(format!("sector {n} is out of any range")))?;
        self.read(offset, SECTOR_BYTES as usize)
    }

    /// `len` bytes of a node's data from `offset`, through its extents.
    pub fn read_node(&self, node: &Node, offset: u64, len: usize) -> Result<Vec<u8>, MediaError> {
        let mut out = Vec::with_capacity(len);
        let mut skip = offset;
        for extent in &node.extents {
            if out.len() == len {
                break;
            }
            let ext_len = extent.len();
            if skip >= ext_len {
                skip -= ext_len;
                continue;
            }
            let take = (ext_len - skip).min((len - out.len()) as u64) as usize;
            match extent {
                Extent::Image { offset: at, .. } => {
                    out.extend(self.read(at.saturating_add(skip), take)?);
                }
                Extent::Zeros { .. } => out.resize(out.len() + take, 0),
                Extent::Inline(data) => {
                    let from = skip as usize;
                    out.extend_from_slice(data.get(from..from + take).unwrap_or_default());
                }
            }
            skip = 0;
        }
        if out.len() != len {
            return Err(corrupt(format!(
                "{}'s data ends before its recorded size ({} bytes)",
                node.name, node.size
            )));
        }
        Ok(out)
    }
}

#[derive(Debug)]
enum Fs {
    Udf(udf::Udf),
    Iso(iso9660::Iso9660),
}

/// An opened installer image.
#[derive(Debug)]
pub struct IsoImage {
    disc: Disc,
    fs: Fs,
    label: String,
}

impl IsoImage {
    /// Opens `path` (an image file or a block device) and reads its volume
    /// descriptors. A FIFO, a folder or a too-small file is refused.
    pub fn open(path: &Path) -> Result<IsoImage, MediaError> {
        let disc = Disc::open(path)?;
        let vds = iso9660::scan_descriptors(&disc)?;
        if vds.has_udf || udf::has_anchor(&disc) {
            let udf = udf::Udf::open(&disc)?;
            let label = udf.label.clone();
            return Ok(IsoImage {
                disc,
                fs: Fs::Udf(udf),
                label,
            });
        }
        match iso9660::Iso9660::open(&disc, &vds)? {
            Some(iso) => {
                let label = iso.label.clone();
                Ok(IsoImage {
                    disc,
                    fs: Fs::Iso(iso),
                    label,
                })
            }
            None => Err(MediaError::NotAnImage {
                path: path.to_path_buf(),
                why: "it has neither a UDF nor an ISO 9660 filesystem".to_string(),
            }),
        }
    }

    /// The volume's name: UDF's logical volume identifier, else the primary
    /// volume descriptor's (`CCCOMA_X64FRE_EN-US_DV9`, `virtio-win-0.1.266`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Which filesystem the files are read through.
    pub fn filesystem(&self) -> Filesystem {
        match &self.fs {
            Fs::Udf(_) => Filesystem::Udf,
            Fs::Iso(iso) => iso.names,
        }
    }

    /// The entries of folder `dir` ("/" or "/viostor/w11"), sorted by name.
    pub fn list(&self, dir: &str) -> Result<Vec<IsoEntry>, MediaError> {
        let node = self.lookup(dir)?;
        if !node.is_dir {
            return Err(MediaError::NotADirectory {
                path_in_image: dir.to_string(),
            });
        }
        let mut entries: Vec<IsoEntry> = self
            .read_dir(&node)?
            .into_iter()
            .map(|n| IsoEntry {
                name: n.name,
                is_dir: n.is_dir,
                size: if n.is_dir { 0 } else { n.size },
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Whether `path` names a file or folder of the image.
    pub fn exists(&self, path: &str) -> bool {
        self.lookup(path).is_ok()
    }

    /// The whole of `file`; refused when it is larger than `max` bytes.
    pub fn read(&self, file: &str, max: u64) -> Result<Vec<u8>, MediaError> {
        let node = self.file_node(file)?;
        if node.size > max {
            return Err(MediaError::TooLarge {
                path_in_image: file.to_string(),
                size: node.size,
                max,
            });
        }
        let len = usize::try_from(node.size).map_err(|_| MediaError::TooLarge {
            path_in_image: file.to_string(),
            size: node.size,
            max,
        })?;
        self.disc.read_node(&node, 0, len)
    }

    /// `len` bytes of `file` from byte `offset`, read through its extents;
    /// an error when they run past the file's end or `len` is above
    /// [`MAX_READ_AT_BYTES`].
    pub fn read_at(&self, file: &str, offset: u64, len: usize) -> Result<Vec<u8>, MediaError> {
        let node = self.file_node(file)?;
        if len > MAX_READ_AT_BYTES {
            return Err(MediaError::TooLarge {
                path_in_image: file.to_string(),
                size: len as u64,
                max: MAX_READ_AT_BYTES as u64,
            });
        }
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > node.size)
        {
            return Err(corrupt(format!(
                "bytes {offset}..{} of {file} were asked for, but it holds {} bytes",
                offset.saturating_add(len as u64),
                node.size
            )));
        }
        self.disc.read_node(&node, offset, len)
    }

    /// The size of `file` in bytes.
    pub fn file_size(&self, file: &str) -> Result<u64, MediaError> {
        Ok(self.file_node(file)?.size)
    }

    /// Copies folder `dir` of the image, with everything below it, into the
    /// existing folder `to`; returns the bytes written. The whole tree is
    /// walked and checked first (names, loops, at most `max_total` bytes and
    /// [`MAX_EXTRACT_ENTRIES`] entries), so a refusal writes nothing.
    pub fn extract_dir(&self, dir: &str, to: &Path, max_total: u64) -> Result<u64, MediaError> {
        let root = self.lookup(dir)?;
        if !root.is_dir {
            return Err(MediaError::NotADirectory {
                path_in_image: dir.to_string(),
            });
        }
        let plan = self.plan_extract(dir, root, max_total)?;
        super::extract::write(self, &plan, to)
    }

    fn plan_extract(
        &self,
        dir: &str,
        root: Node,
        max_total: u64,
    ) -> Result<Vec<(PathBuf, Node)>, MediaError> {
        let mut plan = Vec::new();
        let mut seen = HashSet::from([root.id]);
        let mut total = 0u64;
        // (path below `to`, path in the image, the folder, its depth)
        let mut stack = vec![(
            PathBuf::new(),
            dir.trim_end_matches('/').to_string(),
            root,
            0,
        )];
        while let Some((rel, in_image, node, depth)) = stack.pop() {
            if depth >= MAX_DEPTH {
                return Err(corrupt(format!(
                    "{in_image} lies more than {MAX_DEPTH} folders deep"
                )));
            }
            for child in self.read_dir(&node)? {
                if !super::extract::safe_name(&child.name) {
                    return Err(MediaError::BadName {
                        dir_in_image: if in_image.is_empty() {
                            "/".into()
                        } else {
                            in_image
                        },
                        name: child.name,
                    });
                }
                if plan.len() >= MAX_EXTRACT_ENTRIES {
                    return Err(corrupt(format!(
                        "{dir} holds more than {MAX_EXTRACT_ENTRIES} entries"
                    )));
                }
                let child_rel = rel.join(&child.name);
                let child_in_image = format!("{in_image}/{}", child.name);
                if child.is_dir {
                    if !seen.insert(child.id) {
                        return Err(corrupt(format!(
                            "the folder {child_in_image} is one already met on the way (a loop)"
                        )));
                    }
                    stack.push((child_rel.clone(), child_in_image, child.clone(), depth + 1));
                } else {
                    total = total.saturating_add(child.size);
                    if total > max_total {
                        return Err(MediaError::TooLarge {
                            path_in_image: dir.to_string(),
                            size: total,
                            max: max_total,
                        });
                    }
                }
                plan.push((child_rel, child));
            }
        }
        Ok(plan)
    }

    pub(crate) fn disc(&self) -> &Disc {
        &self.disc
    }

    fn root(&self) -> Node {
        match &self.fs {
            Fs::Udf(udf) => udf.root.clone(),
            Fs::Iso(iso) => iso.root.clone(),
        }
    }

    pub(crate) fn read_dir(&self, dir: &Node) -> Result<Vec<Node>, MediaError> {
        match &self.fs {
            Fs::Udf(udf) => udf.read_dir(&self.disc, dir),
            Fs::Iso(iso) => iso.read_dir(&self.disc, dir),
        }
    }

    fn file_node(&self, file: &str) -> Result<Node, MediaError> {
        let node = self.lookup(file)?;
        if node.is_dir {
            return Err(MediaError::IsADirectory {
                path_in_image: file.to_string(),
            });
        }
        Ok(node)
    }

    /// The node at `path`, each part matched exactly first, else ignoring case.
    fn lookup(&self, path: &str) -> Result<Node, MediaError> {
        let not_found = || MediaError::NotFound {
            path_in_image: path.to_string(),
        };
        let parts: Vec<&str> = path
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        if parts.len() > MAX_DEPTH || parts.contains(&"..") {
            return Err(not_found());
        }
        let mut node = self.root();
        for part in parts {
            if !node.is_dir {
                return Err(not_found());
            }
            let children = self.read_dir(&node)?;
            let wanted = part.to_lowercase();
            node = match children.iter().position(|c| c.name == part) {
                Some(i) => children.into_iter().nth(i),
                None => children
                    .into_iter()
                    .find(|c| c.name.to_lowercase() == wanted),
            }
            .ok_or_else(not_found)?;
        }
        Ok(node)
    }
}
