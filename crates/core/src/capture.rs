//! `snapshot`: capture exactly the files the model reads into a `.tar.gz`, so a
//! user can attach their host to a bug report and we can turn it into a fixture.
//!
//! The scan runs over a recording `HostRoot`; every path it touched is archived
//! with the symlinks on the way kept as symlinks (sysfs is mostly links). Files
//! under `proc` are stored as plain files (their links point at process ids).
//! MAC addresses, UUIDs and serial numbers (also the PCI Device Serial Number
//! in config space) are masked, and so are the values of settings named like
//! secrets, private keys left out (see secrets.rs; SNAPSHOT.txt names what
//! was masked); other binary files (ACPI tables) and device nodes are stored
//! as empty placeholders, since the model only asks whether they exist.
//! Everything in the archive is marked the user's alone (folders 0700, files
//! 0600, 0700 where executable), and so is the archive file itself.

pub mod secrets;

use crate::host::{ScanError, scan};
use crate::parse::pci_config::mask_serial_number;
use crate::sysroot::link_walk::{Met, walk_links};
use crate::sysroot::{HostPath, HostRoot};
use crate::userfile::NewFile;
use flate2::Compression;
use flate2::write::GzEncoder;
use secrets::{is_private_key, mask_secrets};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

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
    /// The settings whose values were masked, by file (names, never values).
    pub masked: BTreeMap<String, Vec<String>>,
    /// Private keys, stored as empty placeholders.
    pub private_keys: Vec<String>,
}

/// The modes an archive's entries carry: the user's alone (a `tar x` as
/// root keeps them; the unpacker sets its own, the same).
const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;
const EXEC_MODE: u32 = 0o700;

/// What an entry holds in the archive.
enum Body {
    Dir,
    Link(PathBuf),
    File { data: Vec<u8>, mode: u32 },
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
    let gone = || std::io::Error::from(std::io::ErrorKind::NotFound);
    walk_links(rel, |next, is_last| {
        let at = HostPath::from_relative(next).ok_or_else(gone)?;
        let meta = root.symlink_metadata(&at).map_err(|_| gone())?;
        if meta.file_type().is_symlink() {
            let target = root.read_link(&at).map_err(|_| gone())?;
            out.insert(next.to_path_buf(), Entry::Link(target.clone()));
            // Files under proc whose links name a process: stop and store the content.
            if next.starts_with("proc") && is_last {
                return Ok(Met::Stop);
            }
            return Ok(Met::Link(target));
        }
        if meta.is_dir() {
            out.entry(next.to_path_buf()).or_insert(Entry::Dir);
        }
        Ok(Met::NotLink)
    })
    .ok()
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
/// (gzip tar). `out` appears whole or not at all, mode 0600; an existing
/// file there is replaced only with `replace`, and a link or FIFO there is
/// refused.
pub fn capture(root: &HostRoot, out: &Path, replace: bool) -> Result<CaptureReport, CaptureError> {
    // Refused before the scan, not after it; the user's alone (0600),
    // created so.
    let file = NewFile::create_private(out, replace)?;
    let rec = root.recording();
    let snapshot = scan(&rec)?;
    // What the Tuning page plans from and where the journal stands, so a
    // snapshot (another machine's over SSH, a bug report) shows them too.
    // (The journal's public records are listed, not read through the root;
    // never the journal itself: it keeps copies of root-only files.)
    let _ = crate::tuning::facts::gather(&rec);
    let env = crate::tuning::apply::Env::new(rec.clone(), None, false);
    let _ = crate::tuning::status::status(&env);
    let journal: Vec<PathBuf> = env
        .journal
        .list()
        .iter()
        .filter_map(|e| crate::tuning::records::file(&env.journal, &e.id))
        .filter(|f| f.is_file())
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

    // Everything read (and masked) first, so SNAPSHOT.txt, the archive's
    // first entry, can say what was masked.
    let mut report = CaptureReport::default();
    let mut bodies: Vec<(&PathBuf, Body)> = Vec::with_capacity(entries.len());
    for (rel, entry) in &entries {
        let body = match entry {
            Entry::Dir => {
                report.directories += 1;
                Body::Dir
            }
            // Links under proc name a process: what they point at is
            // stored as content instead.
            Entry::Link(target) if !rel.starts_with("proc") => {
                report.symlinks += 1;
                Body::Link(target.clone())
            }
            Entry::Link(_) | Entry::File => match stored(root, rel, &mut report) {
                Some((data, mode)) => Body::File { data, mode },
                None => continue,
            },
        };
        bodies.push((rel, body));
    }
    let manifest = format!(
        "VFIO Assistant host snapshot\ntool: vfio-assistant {}\nschema: {}\ncaptured from: {}\nkernel: {}\nMasked: MAC addresses, UUIDs and serial numbers; the values of settings named like secrets (passwords, keys, tokens, auth), the name kept; private keys are left out. Binary files and device nodes are empty placeholders.\n{}Read with: vfio-assistant scan --root FILE (or extract it: mkdir host && tar xzf FILE -C host; vfio-assistant scan --root host)\n",
        env!("CARGO_PKG_VERSION"),
        crate::host::SCAN_SCHEMA_VERSION,
        base.display(),
        snapshot.kernel.release.as_deref().unwrap_or("unknown"),
        masked_list(&report),
    );
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    tar.follow_symlinks(false);
    append_file_mode(
        &mut tar,
        Path::new("SNAPSHOT.txt"),
        manifest.as_bytes(),
        out,
        FILE_MODE,
    )?;
    for (rel, body) in bodies {
        match body {
            Body::Dir => {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(DIR_MODE);
                h.set_size(0);
                tar.append_data(&mut h, rel, std::io::empty())
                    .map_err(|e| io_err(out, e))?;
            }
            Body::Link(target) => {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                tar.append_link(&mut h, rel, target)
                    .map_err(|e| io_err(out, e))?;
            }
            Body::File { data, mode } => append_file_mode(&mut tar, rel, &data, out, mode)?,
        }
    }
    let enc = tar.into_inner().map_err(|e| io_err(out, e))?;
    let mut file = enc.finish().map_err(|e| io_err(out, e))?;
    file.flush().map_err(|e| io_err(out, e))?;
    file.commit()?;
    Ok(report)
}

/// A file with its mode: `EXEC_MODE` keeps that a file is executable (a
/// libvirt hook that is not would not run, and the checks say so), nothing
/// more.
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

/// What SNAPSHOT.txt says was masked: each file with the names of its
/// masked settings, and the private keys left out.
fn masked_list(report: &CaptureReport) -> String {
    let mut text = String::new();
    if report.masked.is_empty() {
        text.push_str("Masked settings: none.\n");
    } else {
        text.push_str("Masked settings (the name kept, the value replaced by \"(masked)\"):\n");
        for (file, keys) in &report.masked {
            text.push_str(&format!("  {file}: {}\n", keys.join(", ")));
        }
    }
    if !report.private_keys.is_empty() {
        text.push_str("Private keys left out (empty placeholders):\n");
        for file in &report.private_keys {
            text.push_str(&format!("  {file}\n"));
        }
    }
    text
}

/// What to store for the file at `rel` (following a last link inside the
/// root: what a `proc` link names is stored as content) and its mode; None
/// when it is not there to read.
fn stored(root: &HostRoot, rel: &Path, report: &mut CaptureReport) -> Option<(Vec<u8>, u32)> {
    let at = HostPath::from_relative(rel);
    let meta = match at.as_ref().map(|p| root.metadata(p)) {
        Some(Ok(m)) => m,
        _ => {
            report.skipped.push(rel.display().to_string());
            return None;
        }
    };
    let at = at?;
    // Executable stays executable, placeholders too (a root-only hook
    // script read as a user is still a hook that runs).
    let mode = if std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0 {
        EXEC_MODE
    } else {
        FILE_MODE
    };
    let shown = rel.display().to_string();
    if rel == Path::new("dev/kmsg") {
        // The kernel log device: store the records it gives now, masked.
        let text = root.read_kmsg(&HostPath::dev("kmsg")).unwrap_or_default();
        report.files += 1;
        let (text, keys) = mask_secrets(&text, false);
        if !keys.is_empty() {
            report.masked.insert(shown, keys);
        }
        return Some((mask_identifiers(&text).into_bytes(), FILE_MODE));
    }
    if !meta.is_file() {
        report.placeholders += 1;
        return Some((Vec::new(), FILE_MODE));
    }
    if rel.starts_with("sys/firmware/efi/efivars")
        && rel
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("SecureBoot-"))
    {
        // Secure Boot's state: five bytes, binary, nothing secret.
        report.files += 1;
        return Some((root.read_bytes(&at, 64).unwrap_or_default(), FILE_MODE));
    }
    if rel.starts_with("lib/modules") && rel.extension().is_some_and(|e| e == "ko") {
        // A kernel module: its end only (where a signature is), which is all
        // a scan reads of it; NVIDIA's alone is tens of megabytes.
        report.files += 1;
        let tail = crate::host::signing::module_tail(root, &at).unwrap_or_default();
        return Some((tail, FILE_MODE));
    }
    let read = root.read_bytes(&at, MAX_CAPTURED_FILE);
    let data = read.as_deref().unwrap_or_default();
    if read.is_ok() && rel.file_name().is_some_and(|n| n == "config") && rel.starts_with("sys") {
        // PCI config space: binary, kept (capabilities), serial number zeroed.
        report.files += 1;
        return Some((mask_serial_number(data), FILE_MODE));
    }
    if read.is_err() {
        // Root-only files (ACPI tables) still exist: keep a placeholder.
        report.placeholders += 1;
        report.skipped.push(shown);
        return Some((Vec::new(), mode));
    }
    let body_len = data.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    if data[..body_len].contains(&0) {
        report.placeholders += 1;
        return Some((Vec::new(), mode));
    }
    let text = String::from_utf8_lossy(data);
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    if is_private_key(&name, &text) {
        // Never its contents, not even masked: that it is there is enough.
        report.placeholders += 1;
        report.private_keys.push(shown);
        return Some((Vec::new(), mode));
    }
    let masked = if name == "serial" {
        "masked\n".to_string()
    } else {
        // Kernel pseudo-files hold no `name value` settings of a user's.
        let config = !["sys", "proc", "dev"].iter().any(|t| rel.starts_with(t));
        let (text, keys) = mask_secrets(&text, config);
        if !keys.is_empty() {
            report.masked.insert(shown, keys);
        }
        mask_identifiers(&text)
    };
    report.files += 1;
    Some((masked.into_bytes(), mode))
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
