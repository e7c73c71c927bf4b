//! A journal entry as data: what one transaction changed (every file's
//! bytes before, the boot files it regenerated, the commands it ran, the
//! values it wrote) and how far it got. A leaf under the journal
//! (journal.rs reads and writes it; entry_check.rs checks it).

use super::kind::ChangeId;
use super::model::{Plan, Request};
use serde::{Deserialize, Serialize};

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
    pub change: ChangeId,
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
    pub applied: Vec<ChangeId>,
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
    pub completed: Vec<ChangeId>,
    /// Steps of a rollback or an undo that could not be done, each with why.
    #[serde(default)]
    pub undo_failures: Vec<String>,
}
