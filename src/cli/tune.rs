//! `vfio-assistant tune plan|apply|status|undo|list`: host tuning as one
//! transaction (`crate::tuning`). `plan` previews (a unified diff per file,
//! each value before → after, the commands); `apply` asks, then applies,
//! verifies and journals; `status` says what is applied, waiting for a
//! reboot, took effect or drifted; `undo` restores a transaction. With
//! `--root DIR` nothing outside DIR is read or written and commands are
//! listed, not run. Exit codes: 0 done or nothing to do, 1 a change failed
//! and was rolled back, 2 bad input or a refusal before anything changed.

use super::out::{errln, out, outln};
pub use super::tune_args::*;
use crate::host::HostSnapshot;
use crate::sysroot::HostRoot;
use crate::tuning::apply::{ApplyError, Env, Progress, apply, undo};
use crate::tuning::journal::{EntryState, JournalError};
use crate::tuning::kinds::ChangeId;
use crate::tuning::model::{Plan, Request};
use crate::tuning::prepare::{Prepared, prepare};
use crate::tuning::status::status;
use std::path::PathBuf;

pub(super) fn env(root: &HostRoot, journal: &Option<PathBuf>, run_commands: bool) -> Env {
    Env::new(root.clone(), journal.clone(), run_commands)
}

pub fn run(root: &HostRoot, args: &TuneArgs) -> anyhow::Result<i32> {
    match &args.command {
        TuneCommand::Plan(p) => run_plan(root, &p.req, &p.only),
        TuneCommand::Apply(a) => run_apply(root, a),
        TuneCommand::Status(j) => run_status(root, j),
        TuneCommand::List(j) => run_list(root, j),
        TuneCommand::Undo(u) => run_undo(root, u),
        TuneCommand::Keep(k) => super::tune_keep::run(root, k),
        TuneCommand::Sudoers => {
            let user = std::env::var("SUDO_USER")
                .or_else(|_| std::env::var("USER"))
                .unwrap_or_else(|_| "you".into());
            outln!("{}", crate::remote::sudoers_line(&user))?;
            errln!(
                "Put it in /etc/sudoers.d/vfio-assistant with `sudo visudo -f /etc/sudoers.d/vfio-assistant`. {}",
                crate::helper::SUDOERS_ALLOWS
            );
            Ok(0)
        }
    }
}

/// The plan (commands marked `run: false` where they will not run) and
/// what it was made from.
fn make_plan(
    root: &HostRoot,
    req: &Request,
    run_commands: bool,
) -> Result<Prepared, (i32, String)> {
    prepare(root, req, run_commands).map_err(|e| (2, format!("{e:#}")))
}

fn run_plan(root: &HostRoot, a: &RequestArgs, only: &[ChangeId]) -> anyhow::Result<i32> {
    let req = request(a, only);
    let (snap, p) = match make_plan(root, &req, root.is_live()) {
        Ok(Prepared { snap, plan, .. }) => (snap, plan),
        Err((code, why)) => return fail(a.json, code, &why),
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&p)?)?;
    } else {
        out!("{}", super::tune_text::plan_text(&p))?;
        out!("{}", single_gpu_text(root, &snap, &req))?;
    }
    Ok(0)
}

/// With --single-gpu, the checks before it (report::single_gpu), as `check`
/// shows findings; empty otherwise.
fn single_gpu_text(root: &HostRoot, snap: &HostSnapshot, req: &Request) -> String {
    if !req.single_gpu {
        return String::new();
    }
    let f = crate::report::single_gpu::for_gpus(
        root,
        snap,
        req.gpus.first().map(ToString::to_string).as_deref(),
    );
    let c = crate::checks::counts(&f);
    let body = super::check::render(&snap.root, &f, &c, true);
    let body = body.split_once('\n').map_or("", |(_, rest)| rest);
    format!("\nBefore single-GPU passthrough:{body}")
}

/// An error in the mode asked for: `{"error": …}` with --json.
pub(super) fn fail(json: bool, code: i32, why: &str) -> anyhow::Result<i32> {
    if json {
        outln!("{}", serde_json::json!({ "error": why }))?;
    } else {
        errln!("vfio-assistant tune: {why}");
    }
    Ok(code)
}

/// Progress as it comes. A reader that went away (`| head`, the SSH
/// connection dropped) does not stop a transaction halfway: the lines are
/// lost, the apply or undo runs to its end, and the journal says how it
/// ended (`tune status` on the next connection).
fn printer(json: bool) -> impl FnMut(Progress) {
    move |p: Progress| {
        if json {
            if let Ok(line) = serde_json::to_string(&p) {
                let _ = outln!("{line}");
            }
        } else {
            let _ = outln!("{}", super::tune_text::progress_line(&p));
        }
    }
}

fn run_apply(root: &HostRoot, a: &ApplyArgs) -> anyhow::Result<i32> {
    let how = How {
        json: a.req.json,
        dry_run: a.dry_run,
        yes: a.yes,
        journal: a.req.journal.clone(),
    };
    apply_request(root, request(&a.req, &a.only), &how)
}

/// How a request is applied: as `tune apply` and `tune keep` were told.
pub(super) struct How {
    pub json: bool,
    pub dry_run: bool,
    pub yes: bool,
    pub journal: Option<PathBuf>,
}

/// Plan `req`, show it, ask, and apply it (through the helper for a user
/// on the live host).
pub(super) fn apply_request(root: &HostRoot, req: Request, a: &How) -> anyhow::Result<i32> {
    let run_commands = root.is_live() && !a.dry_run;
    let json = a.json;
    let Prepared {
        snap,
        facts,
        plan: p,
    } = match make_plan(root, &req, run_commands) {
        Ok(prepared) => prepared,
        Err((code, why)) => return fail(json, code, &why),
    };
    if p.changes.is_empty() {
        if json {
            outln!(
                "{}",
                serde_json::json!({ "result": "nothing to do", "manual": p.manual })
            )?;
        } else {
            out!("{}", super::tune_text::plan_text(&p))?;
            outln!("Nothing to do: this host already has all of it.")?;
        }
        return Ok(0);
    }
    if a.dry_run {
        if json {
            outln!("{}", serde_json::to_string_pretty(&p)?)?;
        } else {
            out!("{}", super::tune_text::plan_text(&p))?;
            out!("{}", single_gpu_text(root, &snap, &req))?;
            outln!("Dry run: nothing was changed.")?;
        }
        return Ok(0);
    }
    if !json {
        out!("{}", super::tune_text::plan_text(&p))?;
        out!("{}", single_gpu_text(root, &snap, &req))?;
    }
    if !a.yes && !super::confirm(&apply_prompt(&p, &req))? {
        errln!("Nothing changed.");
        return Ok(2);
    }
    // A user on the live host: root's part is the helper's, through sudo.
    if run_commands && !super::tune_helper::is_root() {
        let request = crate::helper::HelperRequest::Apply {
            request: Box::new(req),
        };
        return super::tune_helper::run(&request, json);
    }
    let e = env(root, &a.journal, run_commands);
    crate::tuning::apply::keep_on_hangup();
    let mut out = printer(json);
    match apply(&e, &facts, &p, &req, &mut out) {
        Ok(o) => {
            // The transaction's code stands, whoever still reads.
            let _ = if json {
                outln!("{}", serde_json::json!({ "result": o }))
            } else {
                out!("{}", super::tune_text::outcome_text(&o, &p))
            };
            Ok(if o.state == EntryState::Applied { 0 } else { 1 })
        }
        Err(ApplyError::Preflight(why)) => {
            fail(json, 2, &format!("refused before changing anything: {why}"))
        }
        Err(err) => fail(json, 2, &err.to_string()),
    }
}

/// The question before an apply; QEMU running as the user is named in it
/// (its own choice: the plan's title says it too).
fn apply_prompt(p: &Plan, req: &Request) -> String {
    let qemu = p
        .changes
        .iter()
        .any(|c| c.id.kind == crate::tuning::model::Kind::QemuConf);
    match req.desktop_user.as_deref() {
        Some(user) if req.qemu_as_user && qemu => format!(
            "Apply these changes? {}.",
            crate::tuning::play::qemu_as_user_words(user)
        ),
        _ => "Apply these changes?".to_string(),
    }
}

fn run_status(root: &HostRoot, j: &JournalArgs) -> anyhow::Result<i32> {
    let e = env(root, &j.journal, false);
    // Root's journal read by a user: its public records answer.
    if let Err(err) = e.journal.readable()
        && !matches!(err, JournalError::RootOnly { .. })
    {
        return fail(j.json, 2, &err.to_string());
    }
    let s = status(&e);
    if j.json {
        outln!("{}", serde_json::to_string_pretty(&s)?)?;
    } else {
        out!("{}", super::tune_text::status_text(&s))?;
    }
    Ok(0)
}

fn run_list(root: &HostRoot, j: &JournalArgs) -> anyhow::Result<i32> {
    let e = env(root, &j.journal, false);
    // Root's journal read by a user: its public records answer.
    if let Err(err) = e.journal.readable()
        && !matches!(err, JournalError::RootOnly { .. })
    {
        return fail(j.json, 2, &err.to_string());
    }
    let list = e.journal.list();
    if j.json {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|x| serde_json::json!({"id": x.id, "created": x.created, "state": x.state, "changes": x.applied}))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
    } else if list.is_empty() {
        outln!("No transactions in {}.", e.journal.dir.display())?;
    } else {
        for x in &list {
            outln!(
                "{}  {}  {}",
                x.id,
                x.state.label(),
                ChangeId::joined(&x.applied)
            )?;
        }
    }
    Ok(0)
}

fn run_undo(root: &HostRoot, u: &UndoArgs) -> anyhow::Result<i32> {
    let e = env(root, &u.journal, root.is_live());
    let by_helper = root.is_live() && !super::tune_helper::is_root();
    // A user reads root's journal's public records to find the id; the
    // helper undoes it.
    if let Err(err) = e.journal.readable()
        && !(by_helper && matches!(err, JournalError::RootOnly { .. }))
    {
        return fail(u.json, 2, &err.to_string());
    }
    let id = match (&u.id, u.last) {
        (Some(id), _) => id.clone(),
        // The newest transaction undo can act on: applied, or interrupted
        // (a power cut while applying or undoing).
        (None, _) => match e.journal.last_undoable() {
            Some(x) => x.id,
            None => return fail(u.json, 2, "no applied or interrupted transaction to undo"),
        },
    };
    if !u.yes && !super::confirm(&format!("Undo {id}?"))? {
        errln!("Nothing changed.");
        return Ok(2);
    }
    if by_helper {
        let request = crate::helper::HelperRequest::Undo { id, force: u.force };
        return super::tune_helper::run(&request, u.json);
    }
    crate::tuning::apply::keep_on_hangup();
    let mut out = printer(u.json);
    match undo(&e, &id, u.force, &mut out) {
        Ok(o) => {
            // The transaction's code stands, whoever still reads.
            let _ = if u.json {
                outln!("{}", serde_json::json!({ "result": o }))
            } else if let Some(f) = &o.failure {
                outln!("Undone, except: {f}")
            } else {
                outln!(
                    "Undone: {id}.{}",
                    if o.needs_reboot {
                        " Reboot for the boot changes to go too."
                    } else {
                        ""
                    }
                )
            };
            Ok(if o.failure.is_some() { 1 } else { 0 })
        }
        Err(err) => fail(u.json, 2, &err.to_string()),
    }
}
