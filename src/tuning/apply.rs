//! Applying a plan as one transaction, and undoing it. Before anything
//! changes: every file and value is still what the plan saw, every tool a
//! command needs is installed, every target is allowlisted and reached
//! without a symlink, `/boot` is writable — else a clear refusal and
//! nothing touched. Then the journal entry is written (with the before-state
//! of everything), the steps run in order, each reported as it starts and
//! ends; a failure at any step restores every step before it, so files are
//! byte-identical to before. Verification follows (values read back, the
//! rebuilt initramfs holds vfio_pci and our modprobe.d file, the boot
//! entries hold every token whole); a failed verification rolls back too.
//! With `--root` (or `--dry-run`) commands are not run, only recorded.

use super::facts::TuneFacts;
use super::fsops::{WriteError, confined, read_file, read_only, write_file, write_value};
use super::journal::{CommandRecord, Entry, EntryState, FileBefore, Journal, JournalError, new_id};
use super::model::{Change, CommandStep, Plan, Request, ValueChange, Verify};
use super::tokens::missing;
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::path::Path;

/// Where and how to apply.
pub struct Env {
    pub root: HostRoot,
    pub journal: Journal,
    /// Run commands (false with `--root` and `--dry-run`).
    pub run_commands: bool,
    /// Fault injection for tests: the n-th step (0-based) fails.
    pub fail_at: Option<usize>,
}

impl Env {
    /// The journal's default place under `root`.
    pub fn default_journal(root: &HostRoot) -> std::path::PathBuf {
        root.resolve(&HostPath::var("lib/vfio-assistant/journal"))
    }
}

/// One line of progress, as the helper streams it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn read_value(root: &HostRoot, path: &str) -> Option<String> {
    let target = confined(root, path, true).ok()?;
    let bytes = crate::userfile::read_bytes(&target, 1 << 20).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// Check everything before touching anything.
pub fn preflight(env: &Env, facts: &TuneFacts, changes: &[&Change]) -> Result<(), ApplyError> {
    let mut problems = Vec::new();
    for c in changes {
        for f in &c.files {
            if !super::fsops::file_allowed(&f.path) {
                problems.push(format!("{} is not a place this tool writes", f.path));
                continue;
            }
            match read_file(&env.root, &f.path) {
                Err(e) => problems.push(e.to_string()),
                Ok(now) => {
                    let now = now.map(|(b, _)| String::from_utf8_lossy(&b).into_owned());
                    if now != f.before {
                        problems.push(format!(
                            "{} changed since the plan was made: plan again",
                            f.path
                        ));
                    }
                }
            }
            if let Ok(t) = confined(&env.root, &f.path, false)
                && let Some(dir) = existing_parent(&t)
                && read_only(dir)
            {
                problems.push(format!("{} is on a read-only file system", f.path));
            }
        }
        for v in c.values.iter().filter(|v| !v.action) {
            if !super::fsops::value_allowed(&v.path) {
                problems.push(format!("{} is not a value this tool writes", v.path));
            } else if read_value(&env.root, &v.path).as_deref() != Some(v.before.as_str())
                && !(v.path.ends_with("/enabled")
                    && read_value(&env.root, &v.path)
                        .is_some_and(|n| n.contains(&format!("[{}]", v.before))))
            {
                problems.push(format!(
                    "{} is not '{}' any more: plan again",
                    v.path, v.before
                ));
            }
        }
        if env.run_commands {
            for cmd in c.commands.iter().chain(&c.undo_commands) {
                if let Some(tool) = cmd.argv.first()
                    && !facts.has_tool(tool)
                {
                    problems.push(format!("{} needs `{tool}`, which is not installed", c.id));
                }
            }
        }
    }
    problems.dedup();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApplyError::Preflight(problems.join("; ")))
    }
}

fn existing_parent(p: &Path) -> Option<&Path> {
    let mut d = p.parent();
    while let Some(x) = d {
        if x.exists() {
            return Some(x);
        }
        d = x.parent();
    }
    None
}

/// What was done, to undo in reverse on failure.
enum Done {
    File {
        path: String,
        before: Option<(Vec<u8>, (u32, u32, u32))>,
    },
    Value {
        path: String,
        before: String,
    },
    UndoValues(Vec<ValueChange>),
    Commands(Vec<CommandStep>),
}

struct Run<'a> {
    env: &'a Env,
    step: usize,
    done: Vec<Done>,
    entry: Entry,
}

impl Run<'_> {
    fn inject(&mut self, what: &str) -> Result<(), String> {
        let n = self.step;
        self.step += 1;
        if self.env.fail_at == Some(n) {
            return Err(
                WriteError::Injected(format!("injected failure at step {n} ({what})")).to_string(),
            );
        }
        Ok(())
    }

    fn command(&mut self, c: &CommandStep) -> Result<(), String> {
        if !(self.env.run_commands && c.run) {
            self.entry.commands.push(CommandRecord {
                argv: c.argv.clone(),
                status: None,
                output: "not run".into(),
            });
            return Ok(());
        }
        run_command(&c.argv, &mut self.entry.commands)
    }
}

/// Run `argv` (no shell), recording its output; an exit other than 0 fails.
fn run_command(argv: &[String], records: &mut Vec<CommandRecord>) -> Result<(), String> {
    let Some((prog, args)) = argv.split_first() else {
        return Err("empty command".into());
    };
    let out = std::process::Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output();
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

/// A value for writing: a cleared driver_override is an empty line.
fn value_text(v: &str) -> String {
    if v == "(null)" {
        "\n".into()
    } else {
        v.to_string()
    }
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
    preflight(env, facts, &changes)?;
    let id = new_id(now_secs());
    let boot_id = read_value(&env.root, "/proc/sys/kernel/random/boot_id");
    let mut entry = Entry {
        id: id.clone(),
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
        boot_id,
    };
    // The before-state of everything, saved before the first change.
    for c in &changes {
        for f in &c.files {
            let cur =
                read_file(&env.root, &f.path).map_err(|e| ApplyError::Preflight(e.to_string()))?;
            let n = entry.files.len();
            let (saved_as, meta) = match &cur {
                Some((bytes, meta)) => (Some(env.journal.save_before(&id, n, bytes)?), Some(*meta)),
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
    }
    env.journal.write(&entry)?;
    let mut run = Run {
        env,
        step: 0,
        done: Vec::new(),
        entry,
    };
    let mut notes = Vec::new();
    let result = (|| -> Result<(), String> {
        for c in &changes {
            for f in &c.files {
                let step = format!("{}: write {}", c.id, f.path);
                progress(Progress::Started { step: step.clone() });
                run.inject(&step)?;
                let before = read_file(&env.root, &f.path).map_err(|e| e.to_string())?;
                write_file(
                    &env.root,
                    &f.path,
                    f.after.as_deref().map(str::as_bytes),
                    None,
                )
                .map_err(|e| format!("{step}: {e}"))?;
                run.done.push(Done::File {
                    path: f.path.clone(),
                    before,
                });
                progress(Progress::Done { step });
            }
            for v in &c.values {
                let step = format!("{}: {} = {}", c.id, v.path, v.after);
                progress(Progress::Started { step: step.clone() });
                run.inject(&step)?;
                match write_value(&env.root, &v.path, &value_text(&v.after)) {
                    Ok(()) => {
                        if !v.action {
                            run.done.push(Done::Value {
                                path: v.path.clone(),
                                before: v.before.clone(),
                            });
                        }
                        progress(Progress::Done { step });
                    }
                    Err(e) if v.may_fail => progress(Progress::Refused {
                        step,
                        why: e.to_string(),
                    }),
                    Err(e) => return Err(format!("{step}: {e}")),
                }
            }
            if !c.undo_values.is_empty() {
                run.done.push(Done::UndoValues(c.undo_values.clone()));
            }
            for cmd in &c.commands {
                let step = format!("{}: {}", c.id, cmd.argv.join(" "));
                progress(Progress::Started { step: step.clone() });
                run.inject(&step)?;
                run.command(cmd).map_err(|e| format!("{step}: {e}"))?;
                progress(Progress::Done { step });
            }
            if !c.undo_commands.is_empty() {
                run.done.push(Done::Commands(c.undo_commands.clone()));
            }
        }
        for c in &changes {
            for v in &c.verify {
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
    let mut entry = match result {
        Ok(()) => {
            run.entry.state = EntryState::Applied;
            run.entry
        }
        Err(why) => {
            progress(Progress::Failed {
                step: format!("step {}", run.step.saturating_sub(1)),
                why: why.clone(),
            });
            let mut e = rollback(env, run, progress);
            e.state = EntryState::RolledBack;
            e.failure = Some(why);
            e
        }
    };
    env.journal.write(&entry)?;
    entry.plan.notes.extend(notes.iter().cloned());
    Ok(Outcome {
        id,
        state: entry.state,
        failure: entry.failure.clone(),
        notes,
        needs_reboot: entry.state == EntryState::Applied && plan.needs_reboot(),
    })
}

/// Undo what `run` did, newest first.
fn rollback(env: &Env, mut run: Run<'_>, progress: &mut dyn FnMut(Progress)) -> Entry {
    while let Some(d) = run.done.pop() {
        match d {
            Done::File { path, before } => {
                let r = match &before {
                    Some((bytes, meta)) => write_file(&env.root, &path, Some(bytes), Some(*meta)),
                    None => write_file(&env.root, &path, None, None),
                };
                report(
                    progress,
                    format!("restore {path}"),
                    r.map_err(|e| e.to_string()),
                );
            }
            Done::Value { path, before } => {
                let r =
                    write_value(&env.root, &path, &value_text(&before)).map_err(|e| e.to_string());
                report(progress, format!("{path} = {before}"), r);
            }
            Done::UndoValues(vs) => {
                for v in vs {
                    let r = write_value(&env.root, &v.path, &value_text(&v.after))
                        .map_err(|e| e.to_string());
                    report(progress, format!("{} = {}", v.path, v.after), r);
                }
            }
            Done::Commands(cs) => {
                for c in cs {
                    let r = run.command(&c);
                    report(progress, c.argv.join(" "), r);
                }
            }
        }
    }
    run.entry
}

fn report(progress: &mut dyn FnMut(Progress), step: String, r: Result<(), String>) {
    match r {
        Ok(()) => progress(Progress::RolledBack { step }),
        Err(why) => progress(Progress::Failed {
            step: format!("undo {step}"),
            why,
        }),
    }
}

fn verify_name(v: &Verify) -> String {
    match v {
        Verify::ValueIs { path, value } => format!("{path} reads {value}"),
        Verify::PagesAtLeast { path, pages } => format!("{path} >= {pages}"),
        Verify::InitramfsHas { .. } => {
            "the initramfs holds vfio_pci and the modprobe.d file".into()
        }
        Verify::BootEntriesHave { tokens, .. } => {
            format!("the boot entries hold {}", tokens.join(" "))
        }
        Verify::CmdlineHas { tokens } => {
            format!("/proc/cmdline holds {} after the reboot", tokens.join(" "))
        }
        Verify::DriverIs { device, driver } => format!("{device} is on {driver}"),
        Verify::Executable { path } => format!("{path} is executable"),
    }
}

/// (ok, what was seen, whether a failure undoes the transaction).
fn verify(env: &Env, v: &Verify) -> (bool, String, bool) {
    let root = &env.root;
    match v {
        Verify::ValueIs { path, value } => {
            let got = read_value(root, path).unwrap_or_default();
            let ok = got == *value || got.contains(&format!("[{value}]"));
            (ok, format!("{path} = {got}"), true)
        }
        Verify::PagesAtLeast { path, pages } => {
            let got: u64 = read_value(root, path)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let ok = got >= *pages;
            let detail = if ok {
                format!("the kernel gave {got} pages")
            } else {
                format!(
                    "the kernel gave {got} of {pages} pages (memory too fragmented): reserve them at boot instead (hugepages=N on the kernel command line), or free memory and apply again"
                )
            };
            (ok, detail, false)
        }
        Verify::InitramfsHas {
            images,
            modules,
            files,
        } => {
            if !env.run_commands {
                return (
                    true,
                    "not checked: the rebuild did not run (--root or --dry-run)".into(),
                    false,
                );
            }
            let mut bad = Vec::new();
            for img in images {
                let Some(hp) = HostPath::from_absolute(img) else {
                    continue;
                };
                if !root.exists(&hp) {
                    continue;
                }
                let name = img.rsplit('/').next().unwrap_or("");
                let release = name
                    .strip_prefix("initrd.img-")
                    .or_else(|| {
                        name.strip_prefix("initramfs-")
                            .and_then(|r| r.strip_suffix(".img"))
                    })
                    .unwrap_or("");
                match crate::host::initramfs::read_initramfs(root, &hp, release) {
                    Ok(info) => {
                        let has_mod = info.vfio_pci_builtin
                            || modules.iter().all(|m| {
                                info.vfio_modules.iter().any(|p| {
                                    p.contains(&m.replace('_', "-")) || p.contains(m.as_str())
                                })
                            });
                        let has_files = files.iter().all(|f| {
                            info.modprobe_lines
                                .iter()
                                .any(|(p, _)| p.trim_start_matches('/') == f.as_str())
                        });
                        if !has_mod || !has_files {
                            bad.push(format!(
                                "{img} lacks {}",
                                if has_mod {
                                    "the modprobe.d file"
                                } else {
                                    "vfio_pci"
                                }
                            ));
                        }
                    }
                    Err(e) => bad.push(format!("{img}: {e}")),
                }
            }
            (
                bad.is_empty(),
                if bad.is_empty() {
                    format!(
                        "{} image(s) hold vfio_pci and the modprobe.d file",
                        images.len()
                    )
                } else {
                    bad.join("; ")
                },
                true,
            )
        }
        Verify::BootEntriesHave { files, tokens } => {
            if tokens.is_empty() {
                return (true, "nothing to add".into(), false);
            }
            if !env.run_commands
                && files
                    .iter()
                    .all(|f| !f.contains("/loader/entries/vfio-assistant.conf"))
            {
                return (
                    true,
                    "not checked: the boot configuration was not regenerated (--root or --dry-run)"
                        .into(),
                    false,
                );
            }
            let mut lacking = Vec::new();
            for f in files {
                let Some(hp) = HostPath::from_absolute(f) else {
                    continue;
                };
                let Ok(text) = root.read_text(&hp) else {
                    continue;
                };
                // A BLS entry keeps the parameters on its `options` line (its
                // `linux` line is the kernel's path); grub.cfg on `linux`.
                let bls = f.contains("/loader/entries/");
                let lines: Vec<&str> = text
                    .lines()
                    .map(str::trim_start)
                    .filter(|l| {
                        if bls {
                            l.starts_with("options")
                        } else {
                            l.starts_with("linux")
                        }
                    })
                    .collect();
                if lines.is_empty() {
                    continue;
                }
                // Every kernel line must hold every token as a whole token.
                for l in lines.iter().filter(|l| !l.contains("recovery")) {
                    let m = missing(l, tokens);
                    if !m.is_empty() {
                        lacking.push(format!(
                            "{f}: `{}` lacks {}",
                            l.chars().take(80).collect::<String>(),
                            m.join(" ")
                        ));
                        break;
                    }
                }
            }
            (
                lacking.is_empty(),
                if lacking.is_empty() {
                    "every boot entry holds them".into()
                } else {
                    lacking.join("; ")
                },
                true,
            )
        }
        Verify::CmdlineHas { tokens } => {
            let line = read_value(root, "/proc/cmdline").unwrap_or_default();
            let m = missing(&line, tokens);
            (
                true,
                if m.is_empty() {
                    "already in /proc/cmdline".into()
                } else {
                    "after the reboot".into()
                },
                false,
            )
        }
        Verify::Executable { path } => {
            let ok = HostPath::from_absolute(path).is_some_and(|p| root.is_executable(&p));
            (
                ok,
                format!(
                    "{path}: {}",
                    if ok {
                        "executable"
                    } else {
                        "missing or not executable"
                    }
                ),
                true,
            )
        }
        Verify::DriverIs { device, driver } => {
            let link = root
                .link_name(&HostPath::sys(&format!("bus/pci/devices/{device}/driver")))
                .ok()
                .flatten();
            let ok = link.as_deref() == Some(driver.as_str()) || !root.is_live();
            (
                ok,
                format!("{device} driver: {}", link.unwrap_or_else(|| "none".into())),
                root.is_live(),
            )
        }
    }
}

/// Undo a transaction: files back byte-identical (with mode and owner),
/// values back, the rebuild commands run again. Refused when a journaled
/// file changed since (drift) unless `force`.
pub fn undo(
    env: &Env,
    id: &str,
    force: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome, ApplyError> {
    let mut entry = env.journal.load(id)?;
    if entry.state != EntryState::Applied {
        return Err(ApplyError::Preflight(
            format!("{id} is {:?}, not applied: nothing to undo", entry.state).to_lowercase(),
        ));
    }
    if !force {
        let drifted = drift(env, &entry);
        if !drifted.is_empty() {
            return Err(ApplyError::Preflight(format!(
                "changed since it was applied: {} (undo --force puts the old files back anyway)",
                drifted.join(", ")
            )));
        }
    }
    let mut failures = Vec::new();
    for fb in entry.files.iter().rev() {
        let step = format!("restore {}", fb.path);
        progress(Progress::Started { step: step.clone() });
        let r = match &fb.saved_as {
            Some(name) => env
                .journal
                .read_before(id, name)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    let meta = (
                        fb.mode.unwrap_or(0o644),
                        fb.uid.unwrap_or(u32::MAX),
                        fb.gid.unwrap_or(u32::MAX),
                    );
                    write_file(&env.root, &fb.path, Some(&bytes), Some(meta))
                        .map_err(|e| e.to_string())
                }),
            None => write_file(&env.root, &fb.path, None, None).map_err(|e| e.to_string()),
        };
        done_or(progress, step, r, &mut failures);
    }
    for (path, before) in entry.values.iter().rev() {
        let step = format!("{path} = {before}");
        progress(Progress::Started { step: step.clone() });
        let r = write_value(&env.root, path, &value_text(before)).map_err(|e| e.to_string());
        done_or(progress, step, r, &mut failures);
    }
    let changes: Vec<Change> = entry
        .plan
        .changes
        .iter()
        .filter(|c| entry.applied.contains(&c.id))
        .cloned()
        .collect();
    for c in changes.iter().rev() {
        for v in &c.undo_values {
            let step = format!("{}: {} = {}", c.id, v.path, v.after);
            progress(Progress::Started { step: step.clone() });
            let r =
                write_value(&env.root, &v.path, &value_text(&v.after)).map_err(|e| e.to_string());
            done_or(progress, step, r, &mut failures);
        }
        for cmd in &c.undo_commands {
            let step = format!("{}: {}", c.id, cmd.argv.join(" "));
            progress(Progress::Started { step: step.clone() });
            let r = if env.run_commands && cmd.run {
                run_command(&cmd.argv, &mut entry.commands)
            } else {
                entry.commands.push(CommandRecord {
                    argv: cmd.argv.clone(),
                    status: None,
                    output: "not run".into(),
                });
                Ok(())
            };
            done_or(progress, step, r, &mut failures);
        }
    }
    entry.state = EntryState::Undone;
    if !failures.is_empty() {
        entry.failure = Some(failures.join("; "));
    }
    env.journal.write(&entry)?;
    let needs_reboot = entry.plan.needs_reboot();
    Ok(Outcome {
        id: id.to_string(),
        state: entry.state,
        failure: entry.failure,
        notes: Vec::new(),
        needs_reboot,
    })
}

fn done_or(
    progress: &mut dyn FnMut(Progress),
    step: String,
    r: Result<(), String>,
    failures: &mut Vec<String>,
) {
    match r {
        Ok(()) => progress(Progress::Done { step }),
        Err(why) => {
            failures.push(format!("{step}: {why}"));
            progress(Progress::Failed { step, why });
        }
    }
}

/// Journaled files whose content is no longer what the transaction wrote.
pub fn drift(env: &Env, e: &Entry) -> Vec<String> {
    e.files
        .iter()
        .filter(|f| {
            let now = read_file(&env.root, &f.path)
                .ok()
                .flatten()
                .map(|(b, _)| String::from_utf8_lossy(&b).into_owned());
            now != f.written
        })
        .map(|f| f.path.clone())
        .collect()
}
