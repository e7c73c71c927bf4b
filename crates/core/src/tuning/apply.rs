//! Applying a plan as one transaction. Before anything changes, the
//! preflight (`preflight.rs`) checks everything it can; then the journal
//! entry is written with the before-state of every file, value and
//! generated boot file. The changes run in plan order, and the plan puts
//! them so that every prefix leaves a host that boots into either the old
//! setup or the new one: what the boot reads harmlessly first (the
//! initramfs with vfio-pci and no IDs to claim), the boot entry that
//! carries the new command line last of the boot changes, then the runtime
//! values. Within a change: its input files, what its values need
//! (`prepare`), its values, the commands that regenerate its boot files,
//! and those files checked right there — a staged grub.cfg before it is
//! renamed into place — and made durable for the boot loader
//! (`artifacts.rs`). Each change is marked complete in the journal as it
//! ends. A failure at any step undoes every change that started
//! (`undo.rs`: inputs first, then the generated files, then checked).
//! With `--root` (or `--dry-run`) commands are not run, only recorded.

use super::artifacts;
use super::facts::TuneFacts;
use super::fsops::{WriteError, confined, read_file, write_file, write_value};
use super::journal::{
    ArtifactBefore, CommandRecord, Entry, EntryState, FileBefore, Journal, JournalError, new_id,
};
use super::model::{Change, CommandStep, Plan, Request, Verify};
use super::verify::{verify, verify_name};
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::path::PathBuf;

pub use super::preflight::preflight;
pub use super::undo::{drift, undo};

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub id: String,
    pub state: EntryState,
    pub failure: Option<String>,
    /// Things said after the apply (hugepages the kernel did not give…).
    pub notes: Vec<String>,
    pub needs_reboot: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("refused before changing anything: {0}")]
    Preflight(String),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

pub(super) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(super) fn read_value(root: &HostRoot, path: &str) -> Option<String> {
    let target = confined(root, path, true).ok()?;
    let bytes = crate::userfile::read_bytes(&target, 1 << 20).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// Run `argv` (no shell), recording its output; an exit other than 0 fails.
pub(super) fn run_command(
    env: &Env,
    argv: &[String],
    records: &mut Vec<CommandRecord>,
) -> Result<(), String> {
    let Some((prog, args)) = argv.split_first() else {
        return Err("empty command".into());
    };
    let mut cmd = match &env.tool_dir {
        Some(d) => {
            let mut c = std::process::Command::new(d.join(prog));
            c.env("VFIO_ASSISTANT_ROOT", env.root.base());
            c
        }
        None => std::process::Command::new(prog),
    };
    let out = cmd.args(args).stdin(std::process::Stdio::null()).output();
    let (status, text) = match &out {
        Ok(o) => {
            let mut t = String::from_utf8_lossy(&o.stdout).into_owned();
            t.push_str(&String::from_utf8_lossy(&o.stderr));
            (o.status.code(), t)
        }
        Err(e) => (None, e.to_string()),
    };
    let tail = if text.len() > 65536 {
        let mut cut = text.len() - 65536;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text[cut..].to_string()
    } else {
        text
    };
    records.push(CommandRecord {
        argv: argv.to_vec(),
        status,
        output: tail.clone(),
    });
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`{}` exited with {}: {}",
            argv.join(" "),
            o.status,
            tail.lines().last().unwrap_or("")
        )),
        Err(e) => Err(format!("`{}` could not run: {e}", argv.join(" "))),
    }
}

/// Run a command step, or record that it was not run.
pub(super) fn command_step(
    env: &Env,
    c: &CommandStep,
    records: &mut Vec<CommandRecord>,
) -> Result<(), String> {
    let argv = c.argv();
    if !(env.run_commands && c.run) {
        records.push(CommandRecord {
            argv,
            status: None,
            output: "not run".into(),
        });
        return Ok(());
    }
    run_command(env, &argv, records)
}

/// A value for writing: a cleared driver_override is an empty line.
pub(super) fn value_text(v: &str) -> String {
    if v == "(null)" {
        "\n".into()
    } else {
        v.to_string()
    }
}

/// Writing `addr` to `/sys/bus/pci/drivers/DRV/unbind` needs the device to
/// be on DRV now (else the kernel says ENODEV, or the file is not there at
/// all because DRV is not loaded): false when there is nothing to unbind.
pub(super) fn unbind_applies(root: &HostRoot, path: &str, value: &str) -> bool {
    let Some(drv) = path
        .strip_prefix("/sys/bus/pci/drivers/")
        .and_then(|r| r.strip_suffix("/unbind"))
    else {
        return true;
    };
    let link = root
        .link_name(&HostPath::sys(&format!(
            "bus/pci/devices/{}/driver",
            value.trim()
        )))
        .ok()
        .flatten();
    link.as_deref() == Some(drv)
}

/// Is this verification about a generated boot file (checked right after
/// the command that writes it, before the next change)?
fn about_artifacts(v: &Verify) -> bool {
    matches!(
        v,
        Verify::InitramfsHas { .. } | Verify::BootEntriesHave { .. }
    )
}

struct Run<'a> {
    env: &'a Env,
    step: usize,
    entry: Entry,
    /// The simulated power cut happened (tests).
    crashed: bool,
}

impl Run<'_> {
    fn inject(&mut self, what: &str) -> Result<(), String> {
        let n = self.step;
        self.step += 1;
        if self.env.pause_at == Some(n) {
            std::thread::sleep(TEST_PAUSE);
        }
        if self.env.crash_at == Some(n) {
            self.crashed = true;
            return Err(format!("power cut at step {n} ({what})"));
        }
        if self.env.fail_at == Some(n) {
            return Err(
                WriteError::Injected(format!("injected failure at step {n} ({what})")).to_string(),
            );
        }
        Ok(())
    }

    fn started(&mut self, progress: &mut dyn FnMut(Progress), step: &str) -> Result<(), String> {
        progress(Progress::Started { step: step.into() });
        self.inject(step)
    }

    /// One change, start to end (see the module comment for the order).
    fn change(&mut self, c: &Change, progress: &mut dyn FnMut(Progress)) -> Result<(), String> {
        let env = self.env;
        for f in &c.files {
            let step = format!("{}: write {}", c.id, f.path);
            self.started(progress, &step)?;
            write_file(
                &env.root,
                &f.path,
                f.after.as_deref().map(str::as_bytes),
                None,
            )
            .map_err(|e| format!("{step}: {e}"))?;
            if super::artifacts::read_by_boot_loader(&f.path) {
                super::artifacts::make_durable(&env.root, &f.path)
                    .map_err(|e| format!("{step}: {e}"))?;
            }
            progress(Progress::Done { step });
        }
        for cmd in &c.prepare {
            let step = format!("{}: {}", c.id, cmd.argv().join(" "));
            self.started(progress, &step)?;
            command_step(env, cmd, &mut self.entry.commands).map_err(|e| format!("{step}: {e}"))?;
            progress(Progress::Done { step });
        }
        for v in &c.values {
            let step = format!("{}: {} = {}", c.id, v.path, v.after);
            self.started(progress, &step)?;
            if !unbind_applies(&env.root, &v.path, &v.after) {
                progress(Progress::Done { step });
                continue;
            }
            match write_value(&env.root, &v.path, &value_text(&v.after)) {
                Ok(()) => progress(Progress::Done { step }),
                Err(e) if v.may_fail => progress(Progress::Refused {
                    step,
                    why: e.to_string(),
                }),
                Err(e) => return Err(format!("{step}: {e}")),
            }
        }
        let mut ran = false;
        for cmd in &c.commands {
            let step = format!("{}: {}", c.id, cmd.argv().join(" "));
            self.started(progress, &step)?;
            command_step(env, cmd, &mut self.entry.commands).map_err(|e| format!("{step}: {e}"))?;
            ran |= env.run_commands && cmd.run;
            progress(Progress::Done { step });
        }
        if ran {
            self.artifacts(c, progress)?;
        }
        Ok(())
    }

    /// The generated boot files: checked where the command wrote them,
    /// switched into place, made durable, their hash journaled.
    fn artifacts(&mut self, c: &Change, progress: &mut dyn FnMut(Progress)) -> Result<(), String> {
        let env = self.env;
        for v in c.verify.iter().filter(|v| about_artifacts(v)) {
            let staged = staged_verify(c, v);
            let (ok, detail, fatal) = verify(env, &staged);
            progress(Progress::Verified {
                what: format!("{}: {}", c.id, verify_name(v)),
                ok,
                detail: detail.clone(),
            });
            if !ok && fatal {
                return Err(format!("{}: verification failed: {detail}", c.id));
            }
        }
        for a in &c.artifacts {
            let step = format!("{}: {} in place, durable", c.id, a.path);
            self.started(progress, &step)?;
            if let Some(s) = &a.staging {
                let from = artifacts::locate(&env.root, s).map_err(|e| format!("{step}: {e}"))?;
                if !from.exists() {
                    return Err(format!("{step}: the command did not write {s}"));
                }
                artifacts::put(&env.root, &a.path, Some(&from), None, true)
                    .map_err(|e| format!("{step}: {e}"))?;
            }
            artifacts::make_durable(&env.root, &a.path).map_err(|e| format!("{step}: {e}"))?;
            let sha = artifacts::sha256(&env.root, &a.path).map_err(|e| format!("{step}: {e}"))?;
            if let Some(r) = self.entry.artifacts.iter_mut().find(|r| r.path == a.path) {
                r.written_sha256 = sha;
            }
            progress(Progress::Done { step });
        }
        env.journal.write(&self.entry).map_err(|e| e.to_string())
    }
}

/// A verification of generated files, pointed at where they were written
/// (the staging file of a staged artifact).
fn staged_verify(c: &Change, v: &Verify) -> Verify {
    match v {
        Verify::BootEntriesHave { files, tokens } => Verify::BootEntriesHave {
            files: files.iter().map(|f| c.written_at(f).to_string()).collect(),
            tokens: tokens.clone(),
        },
        other => other.clone(),
    }
}

/// The journal entry with the before-state of everything `changes` touch.
fn before_state(
    env: &Env,
    id: &str,
    plan: &Plan,
    req: &Request,
    changes: &[&Change],
) -> Result<Entry, ApplyError> {
    let mut entry = Entry {
        id: id.to_string(),
        created: now_secs(),
        request: req.clone(),
        plan: plan.clone(),
        applied: changes.iter().map(|c| c.id.clone()).collect(),
        state: EntryState::Applying,
        files: Vec::new(),
        values: Vec::new(),
        commands: Vec::new(),
        failure: None,
        ran_commands: env.run_commands,
        boot_id: read_value(&env.root, "/proc/sys/kernel/random/boot_id"),
        artifacts: Vec::new(),
        completed: Vec::new(),
        undo_failures: Vec::new(),
    };
    let pre = |e: WriteError| ApplyError::Preflight(e.to_string());
    for c in changes {
        for f in &c.files {
            let cur = read_file(&env.root, &f.path).map_err(pre)?;
            let n = entry.files.len();
            let (saved_as, meta) = match &cur {
                Some((bytes, meta)) => (Some(env.journal.save_before(id, n, bytes)?), Some(*meta)),
                None => (None, None),
            };
            entry.files.push(FileBefore {
                path: f.path.clone(),
                saved_as,
                mode: meta.map(|m| m.0),
                uid: meta.map(|m| m.1),
                gid: meta.map(|m| m.2),
                written: f.after.clone(),
            });
        }
        for v in c.values.iter().filter(|v| !v.action) {
            entry.values.push((v.path.clone(), v.before.clone()));
        }
        if !env.run_commands {
            continue;
        }
        for a in &c.artifacts {
            let n = entry.artifacts.len();
            let at = artifacts::locate(&env.root, &a.path).map_err(pre)?;
            let mode = artifacts::mode(&env.root, &a.path).map_err(pre)?;
            let saved_as = match mode {
                Some(_) => Some(env.journal.save_artifact(id, n, &at)?),
                None => None,
            };
            entry.artifacts.push(ArtifactBefore {
                path: a.path.clone(),
                change: c.id.clone(),
                saved_as,
                mode,
                written_sha256: None,
            });
        }
    }
    Ok(entry)
}

/// Apply `plan`'s changes (those in `req.only`, or all) as one transaction.
pub fn apply(
    env: &Env,
    facts: &TuneFacts,
    plan: &Plan,
    req: &Request,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome, ApplyError> {
    let changes: Vec<&Change> = plan.changes.iter().collect();
    // The same allowlist the journal is read back against: a plan that
    // could not be undone is not applied.
    super::targets::check_plan(plan).map_err(ApplyError::Preflight)?;
    env.journal.check()?;
    preflight(env, facts, &changes)?;
    let id = new_id(now_secs());
    let entry = before_state(env, &id, plan, req, &changes)?;
    env.journal.write(&entry)?;
    let mut run = Run {
        env,
        step: 0,
        entry,
        crashed: false,
    };
    let mut notes = Vec::new();
    let result = (|| -> Result<(), String> {
        for c in &changes {
            run.change(c, progress)?;
            run.entry.completed.push(c.id.clone());
            env.journal.write(&run.entry).map_err(|e| e.to_string())?;
        }
        for c in &changes {
            for v in c.verify.iter().filter(|v| !about_artifacts(v)) {
                let (ok, detail, fatal) = verify(env, v);
                progress(Progress::Verified {
                    what: format!("{}: {}", c.id, verify_name(v)),
                    ok,
                    detail: detail.clone(),
                });
                if !ok && fatal {
                    return Err(format!("{}: verification failed: {detail}", c.id));
                }
                if !ok {
                    notes.push(format!("{}: {detail}", c.id));
                }
            }
        }
        Ok(())
    })();
    if run.crashed {
        // The journal says what it said when the power went.
        return Ok(Outcome {
            id,
            state: EntryState::Applying,
            failure: None,
            notes,
            needs_reboot: false,
        });
    }
    let mut entry = run.entry;
    match result {
        Ok(()) => entry.state = EntryState::Applied,
        Err(why) => {
            progress(Progress::Failed {
                step: format!("step {}", run.step.saturating_sub(1)),
                why: why.clone(),
            });
            // Every change that started, newest first: the one that failed
            // and those completed before it.
            let started = entry.completed.len() + 1;
            let ids: Vec<String> = entry.applied.iter().take(started).cloned().collect();
            super::undo::inverse(env, &mut entry, &ids, true, progress);
            entry.state = EntryState::RolledBack;
            entry.failure = Some(if entry.undo_failures.is_empty() {
                why
            } else {
                format!(
                    "{why}; the rollback could not undo everything: {}",
                    entry.undo_failures.join("; ")
                )
            });
        }
    }
    env.journal.write(&entry)?;
    Ok(Outcome {
        id,
        state: entry.state,
        failure: entry.failure.clone(),
        notes,
        needs_reboot: entry.state == EntryState::Applied && plan.needs_reboot(),
    })
}
