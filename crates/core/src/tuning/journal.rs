//! The journal: one folder per transaction, written before the first
//! change, holding the before-state of everything it touches — each file's
//! bytes, mode and owner (or "absent"), each value — the plan it applied,
//! every command's output, and where it got to. `tune undo` restores from
//! it, also after a reboot; `tune status` compares it with the host.
//! Default place `/var/lib/vfio-assistant/journal/<id>/` (inside the root
//! with `--root`).
//!
//! The journal is trusted only where nobody else could have written it:
//! every folder from the root down is a real folder (no link), owned by
//! root or by whoever runs us, writable by nobody else, and so is every
//! file read from it (`trust.rs`). It is created that way too — folders
//! 0700, files 0600, with their modes from the first byte: it keeps copies
//! of root-only files (qemu.conf). What it holds is data: the commands an
//! undo runs are `Cmd`s (a closed set), and every path and mode in an entry
//! is checked against the allowlist of its change kind (`targets.rs`)
//! before anything is done with it.

use std::path::{Path, PathBuf};

pub use super::entry::{ArtifactBefore, CommandRecord, Entry, EntryState, FileBefore};

pub use super::trust::JournalError;

fn io(path: &Path) -> impl Fn(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A new id: sortable by time, unique in this process. The process id is
/// padded to the widest a Linux pid gets (pid_max ≤ 4 194 304: seven
/// digits), so every id of a process's first transaction is as wide as the
/// next: the app's Tuning page lays them out alike whatever pid the helper
/// got (a pid of three digits after the pids wrapped once moved a line
/// break in the page's kept picture).
pub fn new_id(now: std::time::Duration) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{:014}-{:07}-{n}", now.as_millis(), std::process::id())
}

/// Ids in the order they were made: the number runs compared as numbers
/// (milliseconds, so two processes within one second keep their order; a
/// counter past 9 after one below it). The ids of earlier versions began
/// with seconds, a smaller number: they sort before every id of these.
pub fn sort_ids(ids: &mut [String]) {
    fn key(id: &str) -> Vec<u64> {
        id.split('-')
            .map(|p| p.parse().unwrap_or(u64::MAX))
            .collect()
    }
    ids.sort_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.cmp(b)));
}

/// An id is ours only when it has this shape (no path in it).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() < 64 && id.chars().all(|c| c.is_ascii_digit() || c == '-')
}

pub struct Journal {
    pub dir: PathBuf,
    /// Where the trust walk starts: the host root the journal is under (its
    /// folders from there down are checked), or the journal itself when a
    /// test names one.
    pub base: PathBuf,
}

impl Journal {
    /// A journal at `dir` under the host root `base`.
    pub fn under(base: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> Self {
        Journal {
            dir: dir.into(),
            base: base.into(),
        }
    }

    /// A journal a test names (only its own folder is walked).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Journal {
            base: dir.clone(),
            dir,
        }
    }

    /// Whether this journal may be believed: see `trust::check_dir`. A
    /// journal that is not there yet is fine (nothing to believe).
    pub fn check(&self) -> Result<(), JournalError> {
        super::trust::check_dir(&self.base, &self.dir)
    }

    /// Its folder, made (0700 from the journal down, each new folder above
    /// it 0755) and checked.
    fn made(&self, d: &Path) -> Result<(), JournalError> {
        let public = self.dir.parent().unwrap_or(&self.base);
        super::trust::make_dirs(&self.base, public, d)?;
        self.check()
    }

    fn entry_dir(&self, id: &str) -> Result<PathBuf, JournalError> {
        if !valid_id(id) {
            return Err(JournalError::NoEntry(id.to_string()));
        }
        Ok(self.dir.join(id))
    }

    /// Save the bytes of a file as it was; the name they are kept under.
    pub fn save_before(&self, id: &str, n: usize, bytes: &[u8]) -> Result<String, JournalError> {
        let d = self.entry_dir(id)?.join("files");
        self.made(&d)?;
        let name = format!("{n:04}");
        let p = d.join(&name);
        write_synced(&p, bytes)?;
        sync_dir(&d)?;
        Ok(name)
    }

    /// Save a generated boot file (an initramfs image may be 100 MiB: copied,
    /// not read into memory); the name it is kept under.
    pub fn save_artifact(&self, id: &str, n: usize, from: &Path) -> Result<String, JournalError> {
        let d = self.entry_dir(id)?.join("artifacts");
        self.made(&d)?;
        let name = format!("{n:04}");
        let p = d.join(&name);
        // Not fs::copy: that gives the copy the image's mode (0644).
        let copied = std::fs::File::open(from).and_then(|mut src| {
            let mut dst = private_file(&p)?;
            std::io::copy(&mut src, &mut dst)?;
            dst.sync_all()
        });
        copied.map_err(io(&p))?;
        sync_dir(&d)?;
        Ok(name)
    }

    /// Where a saved boot file is kept.
    pub fn artifact_path(&self, id: &str, name: &str) -> Result<PathBuf, JournalError> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_digit()) {
            return Err(JournalError::NoEntry(name.into()));
        }
        let p = self.entry_dir(id)?.join("artifacts").join(name);
        super::trust::check_file(&p)?;
        Ok(p)
    }

    pub fn read_before(&self, id: &str, name: &str) -> Result<Vec<u8>, JournalError> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_digit()) {
            return Err(JournalError::NoEntry(name.into()));
        }
        let p = self.entry_dir(id)?.join("files").join(name);
        super::trust::check_file(&p)?;
        std::fs::read(&p).map_err(io(&p))
    }

    /// Write (or rewrite) the entry, synced.
    pub fn write(&self, e: &Entry) -> Result<(), JournalError> {
        let d = self.entry_dir(&e.id)?;
        self.made(&d)?;
        let text = serde_json::to_string_pretty(e).map_err(|err| JournalError::Bad {
            path: d.display().to_string(),
            message: err.to_string(),
        })?;
        let tmp = d.join("entry.json.tmp");
        write_synced(&tmp, text.as_bytes())?;
        let fin = d.join("entry.json");
        std::fs::rename(&tmp, &fin).map_err(io(&fin))?;
        sync_dir(&d)?;
        if let Some(parent) = d.parent() {
            sync_dir(parent)?;
        }
        super::records::write(self, e)
    }

    /// Where an entry's record is kept.
    pub fn entry_file(&self, id: &str) -> Result<PathBuf, JournalError> {
        Ok(self.entry_dir(id)?.join("entry.json"))
    }

    /// An entry, only from a journal that may be believed, and only when
    /// every path, mode and command in it is one its change kind may have.
    pub fn load(&self, id: &str) -> Result<Entry, JournalError> {
        self.check()?;
        let p = self.entry_file(id)?;
        super::trust::check_dir(&self.dir, &self.entry_dir(id)?)?;
        super::trust::check_file(&p)?;
        let bytes = crate::userfile::read_bytes(&p, 64 * 1024 * 1024).map_err(|e| match e {
            crate::userfile::UserFileError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                JournalError::RootOnly {
                    path: self.dir.display().to_string(),
                }
            }
            e => JournalError::Bad {
                path: p.display().to_string(),
                message: e.to_string(),
            },
        })?;
        let e = parse_entry(&bytes).map_err(|e| JournalError::Bad {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        if e.id != id {
            return Err(JournalError::Bad {
                path: p.display().to_string(),
                message: format!("it names itself {:?}", e.id),
            });
        }
        Ok(e)
    }

    /// Every entry, oldest first (unreadable ones skipped: `readable` says
    /// why a whole journal cannot be read).
    pub fn list(&self) -> Vec<Entry> {
        match self.readable() {
            // Root's journal, read by a user (or a snapshot a user took):
            // its public records say where each transaction stands.
            Err(JournalError::RootOnly { .. }) => return super::records::list(self),
            Err(_) => return Vec::new(),
            Ok(()) if !self.dir.exists() => return super::records::list(self),
            Ok(()) => {}
        }
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| valid_id(n))
            .collect();
        sort_ids(&mut ids);
        ids.iter().filter_map(|id| self.load(id).ok()).collect()
    }

    /// Whether the journal can be read and believed (absent is fine).
    pub fn readable(&self) -> Result<(), JournalError> {
        self.check()?;
        match std::fs::read_dir(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                Err(JournalError::RootOnly {
                    path: self.dir.display().to_string(),
                })
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&self.dir)(e)),
            _ => Ok(()),
        }
    }

    /// The newest entry that is applied (what `undo --last` undoes).
    pub fn last_applied(&self) -> Option<Entry> {
        self.list()
            .into_iter()
            .rev()
            .find(|e| e.state == EntryState::Applied)
    }

    /// The newest entry undo can act on: applied, or interrupted while it
    /// was applying (the power cut, a killed process: its before-state was
    /// journaled before the first change, so undo restores it).
    pub fn last_undoable(&self) -> Option<Entry> {
        self.list().into_iter().rev().find(|e| {
            matches!(
                e.state,
                EntryState::Applied | EntryState::Applying | EntryState::Undoing
            )
        })
    }
}

fn sync_dir(d: &Path) -> Result<(), JournalError> {
    std::fs::File::open(d)
        .and_then(|f| f.sync_all())
        .map_err(io(d))
}

/// A new file of ours, 0600 from its creation (replacing one left by an
/// earlier try: removed first, so its old mode is not kept).
fn private_file(p: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(p)
}

fn write_synced(p: &Path, bytes: &[u8]) -> Result<(), JournalError> {
    use std::io::Write;
    let mut f = private_file(p).map_err(io(p))?;
    f.write_all(bytes).map_err(io(p))?;
    f.sync_all().map_err(io(p))
}

/// An entry from its bytes: the JSON, then every path, mode and command
/// checked against what its change kind may have (`entry_check::check_entry`).
/// What the journal loader does with a file's contents; fuzzed.
pub fn parse_entry(bytes: &[u8]) -> Result<Entry, EntryError> {
    let e: Entry = serde_json::from_slice(bytes).map_err(|e| EntryError::Json(e.to_string()))?;
    if !valid_id(&e.id) {
        return Err(EntryError::Id(e.id));
    }
    super::entry_check::check_entry(&e)?;
    Ok(e)
}

/// Why an entry's bytes are not believed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("{0}")]
    Json(String),
    #[error("{0:?} is not a transaction id")]
    Id(String),
    #[error(transparent)]
    Outside(#[from] super::targets::Outside),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_in_the_order_they_were_made() {
        let mut ids: Vec<String> = [
            "01700000000901-0000001-0",
            "01700000000005-0009999-10",
            "01700000000005-0009999-9",
            "01700000000006-0000002-0",
            "001796425264-0012978-0",
        ]
        .map(String::from)
        .to_vec();
        sort_ids(&mut ids);
        assert_eq!(
            ids,
            [
                "001796425264-0012978-0",
                "01700000000005-0009999-9",
                "01700000000005-0009999-10",
                "01700000000006-0000002-0",
                "01700000000901-0000001-0",
            ]
        );
    }

    #[test]
    fn ids_are_paths_never() {
        let t = std::time::Duration::new(1_700_000_000, 5);
        assert!(valid_id(&new_id(t)));
        // As wide whatever the time and pid: 14 digits of milliseconds, 7
        // of pid.
        let id = new_id(t);
        assert_eq!(
            id.split('-').map(str::len).take(2).collect::<Vec<_>>(),
            [14, 7],
            "{id}"
        );
        for bad in ["", "../x", "a/b", "1/..", "x"] {
            assert!(!valid_id(bad), "{bad}");
        }
        let j = Journal::new("/nonexistent");
        assert!(matches!(j.load("../../etc"), Err(JournalError::NoEntry(_))));
        assert!(j.read_before("1", "../x").is_err());
    }
}
