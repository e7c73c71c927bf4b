//! `tune`'s words for people: the plan as a preview (a unified diff per
//! file, before → after per value, the commands and whether they run), the
//! progress lines, the outcome with what to do next, and the status.

use crate::tuning::apply::{Outcome, Progress};
use crate::tuning::journal::EntryState;
use crate::tuning::model::Plan;
use crate::tuning::status::{EntryStatus, Standing};
use std::fmt::Write;

pub fn plan_text(p: &Plan) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Boot path: {} (initramfs: {})",
        p.boot.loader, p.boot.initramfs
    );
    for e in &p.boot.evidence {
        let _ = writeln!(o, "  seen: {} = {}", e.source, e.value);
    }
    for n in &p.notes {
        let _ = writeln!(o, "note: {n}");
    }
    for c in &p.changes {
        let _ = writeln!(o, "\n[{}] {} — {}", c.id, c.title, c.effect.label());
        let _ = writeln!(o, "  why: {}", c.why);
        for e in &c.evidence {
            let _ = writeln!(o, "  seen: {} = {}", e.source, e.value);
        }
        for f in &c.files {
            o.push_str(&f.diff());
        }
        for v in &c.values {
            if v.action {
                let _ = writeln!(o, "  write {} <- {}", v.path, v.after);
            } else {
                let _ = writeln!(o, "  {}: {} -> {}", v.path, v.before, v.after);
            }
        }
        for cmd in &c.commands {
            let _ = writeln!(
                o,
                "  run: {}{}  ({})",
                cmd.argv().join(" "),
                if cmd.run { "" } else { "   [not run here]" },
                cmd.why
            );
        }
        for n in &c.notes {
            let _ = writeln!(o, "  note: {n}");
        }
    }
    for m in &p.manual {
        let _ = writeln!(o, "\n[{}] {} — by hand", m.id, m.title);
        let _ = writeln!(o, "  why: {}", m.why);
        for s in &m.steps {
            let _ = writeln!(o, "  - {s}");
        }
    }
    if p.changes.is_empty() && p.manual.is_empty() {
        let _ = writeln!(o, "\nNothing to change.");
    }
    o
}

pub fn progress_line(p: &Progress) -> String {
    match p {
        Progress::Started { step } => format!("  … {step}"),
        Progress::Done { step } => format!("  ok {step}"),
        Progress::Refused { step, why } => {
            format!("  -- {step}: refused by the kernel ({why}); recorded")
        }
        Progress::Failed { step, why } => format!("  FAILED {step}: {why}"),
        Progress::RolledBack { step } => format!("  undone {step}"),
        Progress::Verified { what, ok, detail } => format!(
            "  {} {what}: {detail}",
            if *ok { "verified" } else { "NOT VERIFIED" }
        ),
    }
}

pub fn outcome_text(o: &Outcome, p: &Plan) -> String {
    let mut s = String::new();
    match o.state {
        EntryState::Applied => {
            let _ = writeln!(
                s,
                "Applied: {} (undo with `vfio-assistant tune undo {}`).",
                o.id, o.id
            );
            if o.needs_reboot {
                let _ = writeln!(
                    s,
                    "Reboot for the boot changes to take effect. {}",
                    p.boot.recovery
                );
            }
        }
        _ => {
            let _ = writeln!(
                s,
                "Nothing applied: {}. Everything before it was restored.",
                o.failure.as_deref().unwrap_or("a step failed")
            );
        }
    }
    for n in &o.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

pub fn status_text(list: &[EntryStatus]) -> String {
    let mut s = String::new();
    if list.is_empty() {
        return "Nothing applied by vfio-assistant on this host.\n".into();
    }
    for e in list {
        let word = match e.standing {
            Standing::Applied => "applied",
            Standing::WaitingForReboot => "waiting for a reboot",
            Standing::TookEffect => "took effect",
            Standing::DidNotTake => "DID NOT TAKE after the reboot",
            Standing::RolledBack => "rolled back",
            Standing::Undone => "undone",
            Standing::Interrupted => "INTERRUPTED (tune undo --last restores the host)",
            Standing::Running => "STILL RUNNING (its helper goes on to its end; wait for it)",
        };
        let _ = writeln!(
            s,
            "{}  {word}: {}",
            e.id,
            crate::tuning::kinds::ChangeId::joined(&e.changes)
        );
        if !e.pending_tokens.is_empty() {
            let _ = writeln!(
                s,
                "  not yet in /proc/cmdline: {}",
                e.pending_tokens.join(" ")
            );
        }
        for u in &e.unbound {
            let _ = writeln!(s, "  not bound after the reboot: {u}");
        }
        for d in e.detail.iter().chain(&e.tried_once) {
            let _ = writeln!(s, "  {d}");
        }
        if !e.drifted.is_empty() {
            let _ = writeln!(s, "  changed since: {}", e.drifted.join(", "));
        }
        if !e.leftovers.is_empty() {
            let _ = writeln!(s, "  still in the boot files: {}", e.leftovers.join("; "));
        }
        if let Some(f) = &e.failure {
            let _ = writeln!(s, "  failure: {f}");
        }
    }
    s
}
