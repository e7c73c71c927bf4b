//! `tune status`: what is applied, what waits for a reboot (the tokens the
//! boot configuration has and `/proc/cmdline` does not yet), what took
//! effect after a good boot, what was interrupted and what the next boot
//! gets then, and drift — of the files it wrote and of the boot files
//! generated from them (a grub.cfg regenerated without its parameters, an
//! initramfs without vfio-pci), and, after a rollback or an undo, what its
//! boot files still hold that they should not.

use super::journal::{Entry, EntryState};
use super::kind::Kind;
use super::model::{Effect, Verify};
use super::tokens::missing;
use super::txn::Env;
use super::undo::drift;
use super::verify::{entries_check, initramfs_check};
use crate::sysroot::HostPath;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The process died (a power cut, a kill) while applying or undoing:
    /// `tune undo` restores the host from the journal.
    Interrupted,
    /// Its process is still applying or undoing it (the app that started
    /// it was closed; the helper goes on to its end): wait, never restore.
    Running,
}

/// What the boot configuration starts next, for a transaction that touched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextBoot {
    /// The setup from before the transaction.
    Old,
    /// The transaction's setup: every parameter in the default entries.
    New,
    /// Some parameters and not others: never left by this tool on purpose.
    Mixed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryStatus {
    pub id: String,
    pub created: u64,
    pub changes: Vec<crate::tuning::kind::ChangeId>,
    /// How many of `changes` ran to their end (all, once applied).
    pub completed: usize,
    pub standing: Standing,
    /// Kernel parameters configured and not yet in /proc/cmdline.
    pub pending_tokens: Vec<String>,
    /// After the reboot: the devices the binding at boot was for that are
    /// not on vfio-pci (their own driver took them first), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unbound: Vec<String>,
    /// Journaled files changed since (by hand, by a package update), and
    /// generated boot files that no longer hold what it put there.
    pub drifted: Vec<String>,
    /// After a rollback or an undo: what the boot files still hold of it.
    #[serde(default)]
    pub leftovers: Vec<String>,
    /// What the next boot starts, when the transaction changed the boot
    /// configuration and it could be read.
    pub next_boot: Option<NextBoot>,
    /// Interrupted: how far it got, in words.
    pub detail: Option<String>,
    /// Its kernel command line is a boot entry of its own booted once
    /// (systemd-boot's copy, an image of ours) and was not kept yet: what
    /// the next boot starts and how to keep it, in words.
    pub tried_once: Option<String>,
    /// When this boot came up from that entry: the request that keeps it
    /// (this transaction's own, its kernel command line only), which the
    /// planner turns into the keep (`tune keep`, the Tuning page's button).
    pub keep: Option<super::model::Request>,
    pub failure: Option<String>,
}

/// Whether the host booted since the transaction (its boot id changed).
pub(super) fn booted_since(env: &Env, e: &Entry) -> bool {
    let now = env
        .root
        .read_attr(&HostPath::proc("sys/kernel/random/boot_id"))
        .ok();
    e.boot_id.is_some() && now.is_some() && e.boot_id != now
}

fn tokens_of(e: &Entry) -> Vec<String> {
    let mut out = Vec::new();
    for c in e.plan.changes.iter().filter(|c| e.applied.contains(&c.id)) {
        for v in &c.verify {
            match v {
                Verify::BootEntriesHave { tokens, .. }
                | Verify::CmdlineHas { tokens }
                | Verify::MenuEntryHas { tokens, .. } => {
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

/// After a boot since it: the devices its binding at boot was for that
/// another driver (or none) holds, said with that driver. Only for a boot
/// that came up with its parameters (else that is the reason, said as
/// pending tokens).
fn unbound_after_boot(env: &Env, e: &Entry) -> Vec<String> {
    let mut out = Vec::new();
    for c in e.plan.changes.iter().filter(|c| e.applied.contains(&c.id)) {
        for v in &c.verify {
            let Verify::DriverAfterReboot { device, driver } = v else {
                continue;
            };
            // From the journal: a sysfs name only when it is a PCI address.
            if !crate::host::pci::is_pci_address(device) {
                out.push(format!("{device:?} is not a PCI address"));
                continue;
            }
            let dev = HostPath::sys(&format!("bus/pci/devices/{device}"));
            if !env.root.exists(&dev) {
                out.push(format!("{device} is not on the bus this boot"));
                continue;
            }
            let now = env
                .root
                .link_name(&HostPath::sys(&format!("bus/pci/devices/{device}/driver")))
                .ok()
                .flatten();
            if now.as_deref() != Some(driver.as_str()) {
                out.push(format!(
                    "{device} is on {}, not {driver}: {}",
                    now.as_deref().unwrap_or("no driver"),
                    if now.is_some() {
                        "its own driver took it first (is vfio-pci in this boot's initramfs, and its IDs on the kernel command line?)"
                    } else {
                        "vfio-pci did not claim it (its IOMMU group, or `dmesg | grep vfio`, says why)"
                    }
                ));
            }
        }
    }
    out
}

/// Whether the boot entries the transaction changes hold its parameters.
fn next_boot(env: &Env, e: &Entry) -> Option<NextBoot> {
    if !e.ran_commands && !e.plan.changes.iter().any(|c| c.id == "cmdline") {
        return None;
    }
    let c = e.plan.changes.iter().find(|c| c.id == "cmdline")?;
    let (files, tokens) = c.verify.iter().find_map(|v| match v {
        Verify::BootEntriesHave { files, tokens } if !tokens.is_empty() => Some((files, tokens)),
        _ => None,
    })?;
    let readable = files
        .iter()
        .any(|f| HostPath::from_absolute(f).is_some_and(|p| env.root.exists(&p)));
    if !readable {
        return None;
    }
    let lacking = entries_check(&env.root, files, tokens, true);
    let holding = entries_check(&env.root, files, tokens, false);
    Some(match (lacking.is_empty(), holding.is_empty()) {
        (true, _) => NextBoot::New,
        (false, true) => NextBoot::Old,
        (false, false) => NextBoot::Mixed,
    })
}

/// Generated boot files that disagree with the transaction's standing:
/// missing what it added while applied (want: true), still holding it after
/// a rollback or an undo (want: false).
fn boot_file_problems(env: &Env, e: &Entry, want: bool) -> Vec<String> {
    if !e.ran_commands {
        return Vec::new();
    }
    let mut out = Vec::new();
    for c in e.plan.changes.iter().filter(|c| e.applied.contains(&c.id)) {
        for v in &c.verify {
            match v {
                Verify::BootEntriesHave { files, tokens } if !tokens.is_empty() => {
                    out.extend(entries_check(&env.root, files, tokens, want));
                }
                Verify::MenuEntryHas { file, id, tokens } => {
                    out.extend(super::verify::menu_entry_check(
                        &env.root, file, id, tokens, want, true,
                    ));
                }
                Verify::InitramfsHas {
                    images,
                    modules,
                    files,
                } => {
                    // After an undo, only what was not there before must be gone.
                    let added: Vec<String> = files
                        .iter()
                        .filter(|f| {
                            e.files.iter().any(|fb| {
                                fb.saved_as.is_none()
                                    && fb.path.trim_start_matches('/') == f.as_str()
                            })
                        })
                        .cloned()
                        .collect();
                    if want {
                        out.extend(initramfs_check(&env.root, images, modules, files, true));
                    } else if !added.is_empty() {
                        out.extend(initramfs_check(&env.root, images, &[], &added, false));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Whether its kernel command line change is an entry of its own that
/// systemd-boot boots once (`bootctl set-oneshot`).
fn boot_once(e: &Entry) -> bool {
    e.plan
        .changes
        .iter()
        .filter(|c| e.applied.contains(&c.id))
        .any(super::model::Change::boots_once)
}

/// Whether a later transaction, still applied, changed the kernel command
/// line again: the keep of an entry tried once, or a new try.
fn cmdline_later(later: &[Entry]) -> bool {
    later.iter().any(|x| {
        x.state == EntryState::Applied && x.applied.iter().any(|c| c.kind == Kind::Cmdline)
    })
}

/// For an entry booted once and not kept since, after a boot: what the next
/// boot starts, in words (`took`: this boot came up from it).
fn tried_once_words(took: bool) -> String {
    if took {
        "This boot came up from the new entry, which is booted once: the next reboot starts the old default again. Keep it (the Tuning page's Keep button, or `tune keep`) and it becomes the default.".into()
    } else {
        "The new entry is booted once only and this boot is the old default: the try did not come up, or a later reboot went back to the old setup. Apply again to try it once more, or undo.".into()
    }
}

/// One transaction's status, knowing the transactions after it (`later`:
/// a keep since makes an entry tried once no longer pending).
fn entry_status(env: &Env, e: &Entry, later: &[Entry]) -> EntryStatus {
    let cmdline = env
        .root
        .read_attr(&HostPath::proc("cmdline"))
        .unwrap_or_default();
    let tokens = tokens_of(e);
    let pending = missing(&cmdline, &tokens);
    let rebooted = booted_since(env, e);
    let boot_changes = e
        .plan
        .changes
        .iter()
        .any(|c| e.applied.contains(&c.id) && c.effect == Effect::AfterReboot);
    let writer = super::running::writer_still_runs(&env.root, e);
    let unbound = if e.state == EntryState::Applied && rebooted && pending.is_empty() {
        unbound_after_boot(env, e)
    } else {
        Vec::new()
    };
    let standing = match e.state {
        EntryState::Applying | EntryState::Undoing if writer.is_some() => Standing::Running,
        EntryState::Applying | EntryState::Undoing => Standing::Interrupted,
        EntryState::RolledBack => Standing::RolledBack,
        EntryState::Undone => Standing::Undone,
        EntryState::Applied if !boot_changes => Standing::Applied,
        EntryState::Applied if !rebooted => Standing::WaitingForReboot,
        EntryState::Applied if pending.is_empty() && unbound.is_empty() => Standing::TookEffect,
        EntryState::Applied => Standing::DidNotTake,
    };
    let applied = e.state == EntryState::Applied;
    let mut drifted = Vec::new();
    let mut leftovers = Vec::new();
    match e.state {
        EntryState::Applied => {
            drifted = drift(env, e);
            drifted.extend(boot_file_problems(env, e, true));
        }
        EntryState::RolledBack | EntryState::Undone => {
            leftovers = boot_file_problems(env, e, false);
        }
        EntryState::Applying | EntryState::Undoing => {}
    }
    let once_pending = e.state == EntryState::Applied
        && rebooted
        && boot_changes
        && boot_once(e)
        && !cmdline_later(later);
    let next = if once_pending {
        // The one boot is spent: systemd-boot's default is the old entry.
        Some(NextBoot::Old)
    } else if boot_changes {
        next_boot(env, e)
    } else {
        None
    };
    let tried_once = once_pending.then(|| tried_once_words(standing == Standing::TookEffect));
    let keep = (once_pending && standing == Standing::TookEffect).then(|| super::model::Request {
        only: vec![crate::tuning::kind::ChangeId::of(Kind::Cmdline)],
        ..e.request.clone()
    });
    let at = e
        .applied
        .get(e.completed.len())
        .map(|c| format!("; it is in '{c}'"))
        .unwrap_or_default();
    let detail = match (e.state, writer) {
        (EntryState::Applying, Some(pid)) => Some(format!(
            "Still being applied by process {pid}, after {} of {} changes{at}: it goes on to its end even when the app that started it was closed. Wait for it; its status says how it ended once it has.",
            e.completed.len(),
            e.applied.len(),
        )),
        (EntryState::Undoing, Some(pid)) => Some(format!(
            "Still being undone by process {pid}: it goes on to its end even when the app that started it was closed. Wait for it; its status says how it ended once it has."
        )),
        (EntryState::Applying, None) => Some(format!(
            "Interrupted while applying (a power cut or a killed process), after {} of {} changes{}{}. `tune undo --last` restores the host as it was.",
            e.completed.len(),
            e.applied.len(),
            e.applied
                .get(e.completed.len())
                .map(|c| format!("; it was in '{c}'"))
                .unwrap_or_default(),
            match next {
                Some(NextBoot::Old) => ": the boot configuration is still the old one",
                Some(NextBoot::New) => ": the boot configuration already starts the new setup",
                Some(NextBoot::Mixed) => ": the boot configuration is half changed",
                None => "",
            }
        )),
        (EntryState::Undoing, None) => {
            Some("Interrupted while undoing: `tune undo --last` finishes the undo.".to_string())
        }
        _ => None,
    };
    EntryStatus {
        id: e.id.clone(),
        created: e.created,
        changes: e.applied.clone(),
        completed: e.completed.len(),
        standing,
        pending_tokens: if applied { pending } else { Vec::new() },
        unbound,
        drifted,
        leftovers,
        next_boot: next,
        detail,
        tried_once,
        keep,
        failure: e.failure.clone(),
    }
}

/// Every transaction's status, oldest first.
pub fn status(env: &Env) -> Vec<EntryStatus> {
    let all = env.journal.list();
    all.iter()
        .enumerate()
        .map(|(i, e)| entry_status(env, e, &all[i + 1..]))
        .collect()
}
