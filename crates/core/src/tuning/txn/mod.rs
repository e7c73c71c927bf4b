//! The transaction core every change kind is applied and undone through:
//! where and how (`Env`), what it says as it goes (`Progress`), how it
//! ended (`Outcome`), how it can fail before it starts (`ApplyError`), and
//! the steps themselves (`steps`: commands run or recorded, values read and
//! written). apply.rs, undo.rs, verify.rs and status.rs use it; it uses
//! none of them, and knows no change kind.

pub mod steps;

use super::fsops::WriteError;
use super::journal::{EntryState, Journal, JournalError};
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::path::PathBuf;

/// Where and how to apply.
pub struct Env {
    pub root: HostRoot,
    pub journal: Journal,
    /// Run commands (false with `--root` and `--dry-run`).
    pub run_commands: bool,
    /// Fault injection for tests: the n-th step (0-based) fails.
    pub fail_at: Option<usize>,
    /// Tests only: the process "dies" as the n-th step starts (a power
    /// cut): no rollback, the journal left as it was at that moment.
    pub crash_at: Option<usize>,
    /// Tests only: the n-th step waits `TEST_PAUSE` before it starts, so a
    /// test can cut the connection (or the process) in the middle of a
    /// transaction, at a step it chose.
    pub pause_at: Option<usize>,
    /// Tests only: commands are looked up in this folder instead of PATH,
    /// and get the root in `VFIO_ASSISTANT_ROOT` (stand-ins for
    /// update-grub, update-initramfs, dracut, kernel-install that act on
    /// the test root).
    pub tool_dir: Option<PathBuf>,
}

impl Env {
    /// The journal's default place under `root`.
    pub fn default_journal(root: &HostRoot) -> PathBuf {
        root.resolve(&HostPath::var("lib/vfio-assistant/journal"))
    }

    pub fn new(root: HostRoot, journal: Option<PathBuf>, run_commands: bool) -> Env {
        let journal = match journal {
            Some(dir) => Journal::new(dir),
            None => Journal::under(root.base(), Env::default_journal(&root)),
        };
        Env {
            root,
            journal,
            run_commands,
            fail_at: None,
            crash_at: None,
            pause_at: None,
            tool_dir: None,
        }
    }
}

/// How long `Env::pause_at` waits.
pub const TEST_PAUSE: std::time::Duration = std::time::Duration::from_secs(3);

/// A transaction is not cut by a terminal that goes away: from here on this
/// process ignores SIGHUP (`ssh -t` dropped, the terminal window closed), so
/// an apply or undo runs to its end and its journal says so. (A real power
/// cut is still what the journal is for.) Called by the CLI and the helper
/// just before a transaction starts.
pub fn keep_on_hangup() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler
    // code; it is async-signal-safe and valid at any point.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
}

/// One line of progress, as the helper streams it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum Progress {
    Started {
        step: String,
    },
    Done {
        step: String,
    },
    /// Recorded, not fatal (EPP refused with EBUSY, a per-CPU IRQ).
    Refused {
        step: String,
        why: String,
    },
    Failed {
        step: String,
        why: String,
    },
    RolledBack {
        step: String,
    },
    Verified {
        what: String,
        ok: bool,
        detail: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Outcome {
    pub id: String,
    pub state: EntryState,
    pub failure: Option<String>,
    /// Things said after the apply (hugepages the kernel did not give…).
    pub notes: Vec<String>,
    pub needs_reboot: bool,
}

/// Why a step of a running transaction failed; its words are the journal
/// entry's `failure` and the progress's `Failed` line.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The simulated power cut (tests).
    #[error("power cut at step {n} ({what})")]
    PowerCut { n: usize, what: String },
    /// A failure a test asked for.
    #[error("{0}")]
    Injected(WriteError),
    #[error("{step}: {source}")]
    Write { step: String, source: WriteError },
    #[error("{step}: {source}")]
    Command {
        step: String,
        source: steps::CommandFailed,
    },
    #[error("{step}: the command did not write {staging}")]
    NotWritten { step: String, staging: String },
    #[error("{change}: verification failed: {detail}")]
    Verify { change: String, detail: String },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("refused before changing anything: {0}")]
    Preflight(String),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// Seconds since 1970, for the journal's times.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
