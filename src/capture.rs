//! `snapshot`: capture exactly the files the model reads into a `.tar.gz`, so a
//! user can attach their host to a bug report and we can turn it into a fixture.
//!
//! The scan runs over a recording `HostRoot`; every path it touched is archived
//! with the symlinks on the way kept as symlinks (sysfs is mostly links). Files
//! under `proc` are stored as plain files (their links point at process ids).
//! MAC addresses, UUIDs and serial numbers (also the PCI Device Serial Number
//! in config space) are masked; other binary files (ACPI tables) and device
//! nodes are stored as empty placeholders, since the model only asks whether
//! they exist.

use crate::host::{ScanError, scan};
use crate::parse::pci_config::mask_serial_number;
use crate::sysroot::{HostPath, HostRoot};
use crate::userfile::NewFile;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// The archive could not be started or put in place (exists, a link…).
    #[error(transparent)]
    Output(#[from] crate::userfile::UserFileError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(path: &Path, source: std::io::Error) -> CaptureError {
    CaptureError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// What ended up in the archive.
#[derive(Debug, Default, Clone)]
pub struct CaptureReport {
    pub files: usize,
    pub symlinks: usize,
    pub directories: usize,
    pub placeholders: usize,
    /// Paths that could not be read (e.g. permission denied when not root).
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    Link(PathBuf),
    File,
}

/// Walk `rel` inside `root` component by component; record the symlinks met
/// and the directories on the way, and return the physical path reached.
/// Links resolve inside the root (an absolute target starts at the root).
fn walk(root: &HostRoot, rel: &Path, out: &mut BTreeMap<PathBuf, Entry>) -> Option<PathBuf> {
    let mut todo: Vec<std::ffi::OsString> = rel
        .components()
        .rev()
        .map(|c| c.as_os_str().to_owned())
        .collect();
    let mut cur = PathBuf::new();
    let mut hops = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            cur.pop();
            continue;
        }
        if part == "." {
            continue;
        }
        let next = cur.join(&part);
        let at = HostPath::from_relative(&next)?;
        let meta = root.symlink_metadata(&at).ok()?;
        if meta.file_type().is_symlink() {
            hops += 1;
            if hops > 40 {
                return None;
            }
            let target = root.read_link(&at).ok()?;
            out.insert(next.clone(), Entry::Link(target.clone()));
            // Files under proc whose links name a process: stop and store the content.
            if next.starts_with("proc") && todo.is_empty() {
                return Some(next);
            }
            if target.is_absolute() {
                cur = PathBuf::new();
            }
            for comp in target.components().rev() {
                if let Component::Normal(p) = comp {
                    todo.push(p.to_owned());
                } else if comp == Component::ParentDir {
                    todo.push("..".into());
                }
            }
            continue;
        }
        cur = next;
        if meta.is_dir() {
            out.entry(cur.clone()).or_insert(Entry::Dir);
        }
    }
    Some(cur)
}

/// Mask MAC addresses (`aa:bb:cc:dd:ee:ff`) and UUIDs in text.
pub fn mask_identifiers(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(len) = mac_at(bytes, i) {
            out.push_str("00:00:00:00:00:00");
            i += len;
        } else if let Some(len) = uuid_at(bytes, i) {
            out.push_str("00000000-0000-0000-0000-000000000000");
            i += len;
        } else {
            let ch_len = text[i..].chars().next().map(char::len_utf8).unwrap_or(1);
            out.push_str(&text[i..i + ch_len]);
            i += ch_len;
        }
    }
    out
}

fn boundary(bytes: &[u8], i: usize) -> bool {
    i >= bytes.len() || !(bytes[i].is_ascii_alphanumeric() || bytes[i] == b':' || bytes[i] == b'-')
}

fn mac_at(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && !boundary(b, i - 1) {
        return None;
    }
    let len = 17;
    if i + len > b.len() {
        return None;
    }
    for k in 0..len {
        let c = b[i + k];
        let ok = if k % 3 == 2 {
            c == b':'
        } else {
            c.is_ascii_hexdigit()
        };
        if !ok {
            return None;
        }
    }
    boundary(b, i + len).then_some(len)
}

fn uuid_at(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && !boundary(b, i - 1) {
        return None;
    }
    let len = 36;
    if i + len > b.len() {
        return None;
    }
    for k in 0..len {
        let c = b[i + k];
        let ok = if matches!(k, 8 | 13 | 18 | 23) {
            c == b'-'
        } else {
            c.is_ascii_hexdigit()
        };
        if !ok {
            return None;
        }
    }
    boundary(b, i + len).then_some(len)
}

const MAX_CAPTURED_FILE: u64 = 4 * 1024 * 1024;

/// Scan `root` while recording, then write every touched path into `out`
/// (gzip tar). `out` appears whole or not at all; an existing file there is
/// replaced only with `replace`, and a link or FIFO there is refused.
pub fn capture(root: &HostRoot, out: &Path, replace: bool) -> Result<CaptureReport, CaptureError> {
    // Refused before the scan, not after it.
    let file = NewFile::create(out, replace)?;
    let rec = root.recording();
    let snapshot = scan(&rec)?;
    // What the Tuning page plans from and where the journal stands, so a
    // snapshot (another machine's over SSH, a bug report) shows them too.
    // (The journal's records are listed, not read through the root.)
    let _ = crate::tuning::facts::gather(&rec);
    let env = crate::tuning::apply::Env::new(rec.clone(), None, false);
    let _ = crate::tuning::status::status(&env);
    let journal: Vec<PathBuf> = env
        .journal
        .list()
        .iter()
        .filter_map(|e| env.journal.entry_file(&e.id).ok())
        .filter_map(|f| f.strip_prefix(root.base()).ok().map(Path::to_path_buf))
        .collect();
    let base = root.base().to_path_buf();
    let mut entries: BTreeMap<PathBuf, Entry> = BTreeMap::new();
    for rel in rec.recorded().into_iter().chain(journal) {
        if let Some(physical) = walk(root, &rel, &mut entries)
            && let Some(at) = HostPath::from_relative(&physical)
            && let Ok(meta) = root.symlink_metadata(&at)
            && !meta.is_dir()
            && !meta.file_type().is_symlink()
        {
            entries.insert(physical, Entry::File);
        }
    }
    // The parents of everything, so the tree extracts cleanly.
    let parents: Vec<PathBuf> = entries
        .keys()
        .flat_map(|p| {
            p.ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .map(Path::to_path_buf)
                .collect::<Vec<_>>()
        })
        .collect();
    for p in parents {
        entries.entry(p).or_insert(Entry::Dir);
    }

    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    tar.follow_symlinks(false);
    let mut report = CaptureReport::default();
    let manifest = format!(
        "VFIO Assistant host snapshot\ntool: vfio-assistant {}\nschema: {}\ncaptured from: {}\nkernel: {}\nMasked: MAC addresses, UUIDs and serial numbers. Binary files and device nodes are empty placeholders.\nRead with: vfio-assistant scan --root FILE (or extract it: mkdir host && tar xzf FILE -C host; vfio-assistant scan --root host)\n",
        env!("CARGO_PKG_VERSION"),
        crate::host::SCAN_SCHEMA_VERSION,
        base.display(),
        snapshot.kernel.release.as_deref().unwrap_or("unknown"),
    );
    append_file(
        &mut tar,
        Path::new("SNAPSHOT.txt"),
        manifest.as_bytes(),
        out,
    )?;
    for (rel, entry) in &entries {
        match entry {
            Entry::Dir => {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                tar.append_data(&mut h, rel, std::io::empty())
                    .map_err(|e| io_err(out, e))?;
                report.directories += 1;
            }
            Entry::Link(target) => {
                if rel.starts_with("proc") {
                    // Store what it points at as content instead.
                    store_file(&mut tar, root, rel, out, &mut report)?;
                    continue;
                }
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                tar.append_link(&mut h, rel, target)
                    .map_err(|e| io_err(out, e))?;
                report.symlinks += 1;
            }
            Entry::File => store_file(&mut tar, root, rel, out, &mut report)?,
        }
    }
    let enc = tar.into_inner().map_err(|e| io_err(out, e))?;
    let mut file = enc.finish().map_err(|e| io_err(out, e))?;
    file.flush().map_err(|e| io_err(out, e))?;
    file.commit()?;
    Ok(report)
}

fn append_file<W: Write>(
    tar: &mut tar::Builder<W>,
    rel: &Path,
    data: &[u8],
    out: &Path,
) -> Result<(), CaptureError> {
    append_file_mode(tar, rel, data, out, 0o644)
}

/// A file with its mode: 0o755 keeps that a file is executable (a libvirt
/// hook that is not would not run, and the checks say so), nothing more.
fn append_file_mode<W: Write>(
    tar: &mut tar::Builder<W>,
    rel: &Path,
    data: &[u8],
    out: &Path,
    mode: u32,
) -> Result<(), CaptureError> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(mode);
    h.set_size(data.len() as u64);
    tar.append_data(&mut h, rel, data)
        .map_err(|e| io_err(out, e))
}

/// Store the file at `rel` (following a last link inside the root: what a
/// `proc` link names is stored as content).
fn store_file<W: Write>(
    tar: &mut tar::Builder<W>,
    root: &HostRoot,
    rel: &Path,
    out: &Path,
    report: &mut CaptureReport,
) -> Result<(), CaptureError> {
    let at = HostPath::from_relative(rel);
    let meta = match at.as_ref().map(|p| root.metadata(p)) {
        Some(Ok(m)) => m,
        _ => {
            report.skipped.push(rel.display().to_string());
            return Ok(());
        }
    };
    let Some(at) = at else { return Ok(()) };
    // Executable stays executable, placeholders too (a root-only hook
    // script read as a user is still a hook that runs).
    let mode = if std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0 {
        0o755
    } else {
        0o644
    };
    if rel == Path::new("dev/kmsg") {
        // The kernel log device: store the records it gives now, masked.
        let text = root.read_kmsg(&HostPath::dev("kmsg")).unwrap_or_default();
        report.files += 1;
        return append_file(tar, rel, mask_identifiers(&text).as_bytes(), out);
    }
    if !meta.is_file() {
        report.placeholders += 1;
        return append_file(tar, rel, b"", out);
    }
    let read = root.read_bytes(&at, MAX_CAPTURED_FILE);
    let data = read.as_deref().unwrap_or_default();
    if read.is_ok() && rel.file_name().is_some_and(|n| n == "config") && rel.starts_with("sys") {
        // PCI config space: binary, kept (capabilities), serial number zeroed.
        report.files += 1;
        return append_file(tar, rel, &mask_serial_number(data), out);
    }
    if read.is_err() {
        // Root-only files (ACPI tables) still exist: keep a placeholder.
        report.placeholders += 1;
        report.skipped.push(rel.display().to_string());
        return append_file_mode(tar, rel, b"", out, mode);
    }
    let body_len = data.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    if data[..body_len].contains(&0) {
        report.placeholders += 1;
        return append_file_mode(tar, rel, b"", out, mode);
    }
    let text = String::from_utf8_lossy(data);
    let masked = if rel.file_name().is_some_and(|n| n == "serial") {
        "masked\n".to_string()
    } else {
        mask_identifiers(&text)
    };
    report.files += 1;
    append_file_mode(tar, rel, masked.as_bytes(), out, mode)
}

/// Unpack a snapshot archive into `dest` (which must exist), safely and
/// within `unpack::Limits::SNAPSHOT` (see unpack.rs).
pub fn extract(archive: &[u8], dest: &Path) -> Result<(), crate::unpack::UnpackError> {
    crate::unpack::unpack_tar_gz(
        archive,
        "the snapshot archive",
        dest,
        &crate::unpack::Limits::SNAPSHOT,
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_macs_and_uuids_not_pci_addresses() {
        let t =
            "root=UUID=0a1b2c3d-1111-2222-3333-444455556666 mac 52:54:00:12:34:56 pci 0000:01:00.0";
        let m = mask_identifiers(t);
        assert!(m.contains("UUID=00000000-0000-0000-0000-000000000000"));
        assert!(m.contains("mac 00:00:00:00:00:00"));
        assert!(m.contains("0000:01:00.0"));
    }
}
