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
use super::fsops::{WriteError, read_file, write_file, write_value};
use super::journal::{ArtifactBefore, Entry, EntryState, FileBefore, new_id};
use super::model::{Change, ChangeId, Plan, Request, Verify};
use super::txn::now_secs;
use super::txn::steps::{command_step, read_value, unbind_applies, value_text};
use super::verify::{verify, verify_name, verify_written};

pub use super::preflight::preflight;
pub use super::txn::{ApplyError, Env, Outcome, Progress, StepError, TEST_PAUSE, keep_on_hangup};
pub use super::undo::{drift, undo};

/// Is this verification about a generated boot file (checked right after
/// the command that writes it, before the next change)?
fn about_artifacts(v: &Verify) -> bool {
    matches!(
        v,
        Verify::InitramfsHas { .. } | Verify::BootEntriesHave { .. } | Verify::MenuEntryHas { .. }
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
    fn inject(&mut self, what: &str) -> Result<(), StepError> {
        let n = self.step;
        self.step += 1;
        if self.env.pause_at == Some(n) {
            std::thread::sleep(TEST_PAUSE);
        }
        if self.env.crash_at == Some(n) {
            self.crashed = true;
            return Err(StepError::PowerCut {
                n,
                what: what.to_string(),
            });
        }
        if self.env.fail_at == Some(n) {
            return Err(StepError::Injected(WriteError::Injected(format!(
                "injected failure at step {n} ({what})"
            ))));
        }
        Ok(())
    }

    fn started(&mut self, progress: &mut dyn FnMut(Progress), step: &str) -> Result<(), StepError> {
        progress(Progress::Started { step: step.into() });
        self.inject(step)
    }

    /// One change, start to end (see the module comment for the order).
    fn change(&mut self, c: &Change, progress: &mut dyn FnMut(Progress)) -> Result<(), StepError> {
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
            .map_err(|e| wrote(&step, e))?;
            if super::artifacts::read_by_boot_loader(&f.path) {
                super::artifacts::make_durable(&env.root, &f.path).map_err(|e| wrote(&step, e))?;
            }
            progress(Progress::Done { step });
        }
        for cmd in &c.prepare {
            let step = format!("{}: {}", c.id, cmd.argv().join(" "));
            self.started(progress, &step)?;
            command_step(env, cmd, &mut self.entry.commands)
                .map_err(|e| failed_command(&step, e))?;
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
                Err(e) => return Err(wrote(&step, e)),
            }
        }
        let mut ran = false;
        for cmd in &c.commands {
            let step = format!("{}: {}", c.id, cmd.argv().join(" "));
            self.started(progress, &step)?;
            command_step(env, cmd, &mut self.entry.commands)
                .map_err(|e| failed_command(&step, e))?;
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
    fn artifacts(
        &mut self,
        c: &Change,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(), StepError> {
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
                return Err(StepError::Verify {
                    change: c.id.to_string(),
                    detail,
                });
            }
        }
        for a in &c.artifacts {
            let step = format!("{}: {} in place, durable", c.id, a.path);
            self.started(progress, &step)?;
            if let Some(s) = &a.staging {
                let from = artifacts::locate(&env.root, s).map_err(|e| wrote(&step, e))?;
                if !from.exists() {
                    return Err(StepError::NotWritten {
                        step,
                        staging: s.clone(),
                    });
                }
                artifacts::put(&env.root, &a.path, Some(&from), None, true)
                    .map_err(|e| wrote(&step, e))?;
            }
            artifacts::make_durable(&env.root, &a.path).map_err(|e| wrote(&step, e))?;
            let sha = artifacts::sha256(&env.root, &a.path).map_err(|e| wrote(&step, e))?;
            if let Some(r) = self.entry.artifacts.iter_mut().find(|r| r.path == a.path) {
                r.written_sha256 = sha;
            }
            progress(Progress::Done { step });
        }
        Ok(env.journal.write(&self.entry)?)
    }
}

/// A command of the step `step` that failed.
fn failed_command(step: &str, source: super::txn::steps::CommandFailed) -> StepError {
    StepError::Command {
        step: step.to_string(),
        source,
    }
}

/// A write of the step `step` that failed.
fn wrote(step: &str, source: WriteError) -> StepError {
    StepError::Write {
        step: step.to_string(),
        source,
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
        Verify::MenuEntryHas { file, id, tokens } => Verify::MenuEntryHas {
            file: c.written_at(file).to_string(),
            id: id.clone(),
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
    super::targets::check_plan(plan).map_err(|e| ApplyError::Preflight(e.to_string()))?;
    env.journal.check()?;
    preflight(env, facts, &changes)?;
    let id = new_id(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default(),
    );
    let entry = before_state(env, &id, plan, req, &changes)?;
    env.journal.write(&entry)?;
    let mut run = Run {
        env,
        step: 0,
        entry,
        crashed: false,
    };
    let mut notes = Vec::new();
    let result = (|| -> Result<(), StepError> {
        for c in &changes {
            run.change(c, progress)?;
            run.entry.completed.push(c.id.clone());
            env.journal.write(&run.entry)?;
        }
        for c in &changes {
            // A change that runs no command writes its boot entry itself:
            // checked here, as written (no generator ran for it above).
            let direct = c.commands.is_empty();
            for v in c.verify.iter().filter(|v| {
                !about_artifacts(v) || (direct && matches!(v, Verify::BootEntriesHave { .. }))
            }) {
                let (ok, detail, fatal) = if direct {
                    verify_written(env, v)
                } else {
                    verify(env, v)
                };
                progress(Progress::Verified {
                    what: format!("{}: {}", c.id, verify_name(v)),
                    ok,
                    detail: detail.clone(),
                });
                if !ok && fatal {
                    return Err(StepError::Verify {
                        change: c.id.to_string(),
                        detail,
                    });
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
            let why = why.to_string();
            progress(Progress::Failed {
                step: format!("step {}", run.step.saturating_sub(1)),
                why: why.clone(),
            });
            // Every change that started, newest first: the one that failed
            // and those completed before it.
            let started = entry.completed.len() + 1;
            let ids: Vec<ChangeId> = entry.applied.iter().take(started).cloned().collect();
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
