//! The journal: one folder per transaction, written before the first
//! change, holding the before-state of everything it touches — each file's
//! bytes, mode and owner (or "absent"), each value — the plan it applied,
//! every command's output, and where it got to. `tune undo` restores from
//! it, also after a reboot; `tune status` compares it with the host.
//! Default place `/var/lib/vfio-assistant/journal/<id>/` (inside the root
//! with `--root`).

use super::model::{Plan, Request};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A file as it was before the transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileBefore {
    /// As the host spells it.
    pub path: String,
    /// `None`: the file was absent.
    pub saved_as: Option<String>,
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// What the transaction wrote (to tell drift later); `None`: removed.
    pub written: Option<String>,
}

/// A generated boot file as it was before the transaction, and as the
/// transaction left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactBefore {
    pub path: String,
    /// The change that regenerates it.
    pub change: String,
    /// `None`: it was absent.
    pub saved_as: Option<String>,
    pub mode: Option<u32>,
    /// sha256 of what the transaction left there (set once it is written):
    /// undo puts the saved bytes back only while it still reads so.
    pub written_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRecord {
    pub argv: Vec<String>,
    pub status: Option<i32>,
    /// The last 64 KiB of what it printed (stdout then stderr).
    pub output: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Written before the first change; still so if the process died.
    Applying,
    Applied,
    /// A step failed; everything before it was restored.
    RolledBack,
    /// Written before an undo starts; still so if it was interrupted (undo
    /// again finishes it).
    Undoing,
    Undone,
}

impl EntryState {
    /// In words, for messages and lists.
    pub fn label(self) -> &'static str {
        match self {
            EntryState::Applying => "interrupted while applying",
            EntryState::Applied => "applied",
            EntryState::RolledBack => "rolled back",
            EntryState::Undoing => "interrupted while undoing",
            EntryState::Undone => "undone",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    /// Seconds since the epoch.
    pub created: u64,
    pub request: Request,
    pub plan: Plan,
    /// The change ids applied (a subset of the plan with `--only`).
    pub applied: Vec<String>,
    pub state: EntryState,
    pub files: Vec<FileBefore>,
    /// Value path → what it was before.
    pub values: Vec<(String, String)>,
    pub commands: Vec<CommandRecord>,
    /// The step that failed and why, when rolled back.
    pub failure: Option<String>,
    /// Whether commands really ran (not with `--root` or `--dry-run`).
    pub ran_commands: bool,
    /// `/proc/sys/kernel/random/boot_id` when applied: a later status knows
    /// whether the host has rebooted since.
    pub boot_id: Option<String>,
    /// Generated boot files, saved before the first change.
    #[serde(default)]
    pub artifacts: Vec<ArtifactBefore>,
    /// The change ids whose steps all ran (an interrupted transaction got
    /// this far).
    #[serde(default)]
    pub completed: Vec<String>,
    /// Steps of a rollback or an undo that could not be done, each with why.
    #[serde(default)]
    pub undo_failures: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("journal entry {path} is not readable: {message}")]
    Bad { path: String, message: String },
    #[error("no journal entry {0}")]
    NoEntry(String),
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A new id: sortable by time, unique in this process.
pub fn new_id(now_secs: u64) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{now_secs:012}-{}-{n}", std::process::id())
}

/// An id is ours only when it has this shape (no path in it).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() < 64 && id.chars().all(|c| c.is_ascii_digit() || c == '-')
}

pub struct Journal {
    pub dir: PathBuf,
}

impl Journal {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Journal { dir: dir.into() }
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
        std::fs::create_dir_all(&d).map_err(io(&d))?;
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
        std::fs::create_dir_all(&d).map_err(io(&d))?;
        let name = format!("{n:04}");
        let p = d.join(&name);
        std::fs::copy(from, &p).map_err(io(&p))?;
        std::fs::File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(io(&p))?;
        sync_dir(&d)?;
        Ok(name)
    }

    /// Where a saved boot file is kept.
    pub fn artifact_path(&self, id: &str, name: &str) -> Result<PathBuf, JournalError> {
        if !name.chars().all(|c| c.is_ascii_digit()) {
            return Err(JournalError::NoEntry(name.into()));
        }
        Ok(self.entry_dir(id)?.join("artifacts").join(name))
    }

    pub fn read_before(&self, id: &str, name: &str) -> Result<Vec<u8>, JournalError> {
        if !name.chars().all(|c| c.is_ascii_digit()) {
            return Err(JournalError::NoEntry(name.into()));
        }
        let p = self.entry_dir(id)?.join("files").join(name);
        std::fs::read(&p).map_err(io(&p))
    }

    /// Write (or rewrite) the entry, synced.
    pub fn write(&self, e: &Entry) -> Result<(), JournalError> {
        let d = self.entry_dir(&e.id)?;
        std::fs::create_dir_all(&d).map_err(io(&d))?;
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
        Ok(())
    }

    /// Where an entry's record is kept.
    pub fn entry_file(&self, id: &str) -> Result<PathBuf, JournalError> {
        Ok(self.entry_dir(id)?.join("entry.json"))
    }

    pub fn load(&self, id: &str) -> Result<Entry, JournalError> {
        let p = self.entry_file(id)?;
        let bytes =
            crate::userfile::read_bytes(&p, 64 * 1024 * 1024).map_err(|e| JournalError::Bad {
                path: p.display().to_string(),
                message: e.to_string(),
            })?;
        serde_json::from_slice(&bytes).map_err(|e| JournalError::Bad {
            path: p.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Every entry, oldest first (unreadable ones skipped).
    pub fn list(&self) -> Vec<Entry> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| valid_id(n))
            .collect();
        ids.sort();
        ids.iter().filter_map(|id| self.load(id).ok()).collect()
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

fn write_synced(p: &Path, bytes: &[u8]) -> Result<(), JournalError> {
    use std::io::Write;
    let mut f = std::fs::File::create(p).map_err(io(p))?;
    f.write_all(bytes).map_err(io(p))?;
    f.sync_all().map_err(io(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_paths_never() {
        assert!(valid_id(&new_id(1_700_000_000)));
        for bad in ["", "../x", "a/b", "1/..", "x"] {
            assert!(!valid_id(bad), "{bad}");
        }
        let j = Journal::new("/nonexistent");
        assert!(matches!(j.load("../../etc"), Err(JournalError::NoEntry(_))));
        assert!(j.read_before("1", "../x").is_err());
    }
}
