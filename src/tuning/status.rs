//! `tune status`: what is applied, what waits for a reboot (the tokens the
//! boot configuration has and `/proc/cmdline` does not yet), what took
//! effect after a good boot, and drift (a journaled file changed since).

use super::apply::{Env, drift};
use super::journal::{Entry, EntryState};
use super::model::{Effect, Verify};
use super::tokens::missing;
use crate::sysroot::HostPath;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Applied; everything takes effect now.
    Applied,
    /// Boot-time changes configured, the host has not booted them yet.
    WaitingForReboot,
    /// Booted since, and `/proc/cmdline` holds every token.
    TookEffect,
    /// Booted since, but the tokens are not there (the new setup did not boot?).
    DidNotTake,
    RolledBack,
    Undone,
    /// The process died while applying: `tune undo` restores what it can.
    Interrupted,
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryStatus {
    pub id: String,
    pub created: u64,
    pub changes: Vec<String>,
    pub standing: Standing,
    /// Kernel parameters configured and not yet in /proc/cmdline.
    pub pending_tokens: Vec<String>,
    /// Journaled files changed since (by hand, by a package update).
    pub drifted: Vec<String>,
    pub failure: Option<String>,
}

fn tokens_of(e: &Entry) -> Vec<String> {
    let mut out = Vec::new();
    for c in e.plan.changes.iter().filter(|c| e.applied.contains(&c.id)) {
        for v in &c.verify {
            match v {
                Verify::BootEntriesHave { tokens, .. } | Verify::CmdlineHas { tokens } => {
                    for t in tokens {
                        if !out.contains(t) {
                            out.push(t.clone());
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out
}

pub fn entry_status(env: &Env, e: &Entry) -> EntryStatus {
    let cmdline = env
        .root
        .read_attr(&HostPath::proc("cmdline"))
        .unwrap_or_default();
    let boot_id = env
        .root
        .read_attr(&HostPath::proc("sys/kernel/random/boot_id"))
        .ok();
    let tokens = tokens_of(e);
    let pending = missing(&cmdline, &tokens);
    let rebooted = e.boot_id.is_some() && boot_id.is_some() && e.boot_id != boot_id;
    let boot_changes = e
        .plan
        .changes
        .iter()
        .any(|c| e.applied.contains(&c.id) && c.effect == Effect::AfterReboot);
    let standing = match e.state {
        EntryState::Applying => Standing::Interrupted,
        EntryState::RolledBack => Standing::RolledBack,
        EntryState::Undone => Standing::Undone,
        EntryState::Applied if !boot_changes => Standing::Applied,
        EntryState::Applied if !rebooted && !pending.is_empty() => Standing::WaitingForReboot,
        EntryState::Applied if !rebooted => Standing::WaitingForReboot,
        EntryState::Applied if pending.is_empty() => Standing::TookEffect,
        EntryState::Applied => Standing::DidNotTake,
    };
    EntryStatus {
        id: e.id.clone(),
        created: e.created,
        changes: e.applied.clone(),
        standing,
        pending_tokens: if e.state == EntryState::Applied {
            pending
        } else {
            Vec::new()
        },
        drifted: if e.state == EntryState::Applied {
            drift(env, e)
        } else {
            Vec::new()
        },
        failure: e.failure.clone(),
    }
}

/// Every transaction's status, oldest first.
pub fn status(env: &Env) -> Vec<EntryStatus> {
    env.journal
        .list()
        .iter()
        .map(|e| entry_status(env, e))
        .collect()
}
