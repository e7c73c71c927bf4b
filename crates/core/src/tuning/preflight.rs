//! Everything checked before a transaction touches anything: every file and
//! value is still what the plan saw; every value it writes — triggers like
//! `drivers_probe` too — is there to be written; every tool a command needs
//! is installed; every target is an allowlisted place reached without a
//! symlink; nothing it writes sits on a read-only file system. A problem is
//! a clear refusal with all the reasons, and nothing changed.

use super::artifacts::artifact_allowed;
use super::facts::TuneFacts;
use super::fsops::{confined, read_file, read_only};
use super::model::Change;
use super::txn::steps::{read_value, unbind_applies};
use super::txn::{ApplyError, Env};
use std::path::Path;

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

fn writable(env: &Env, path: &str, problems: &mut Vec<String>) {
    if let Ok(t) = confined(&env.root, path, false)
        && let Some(dir) = existing_parent(&t)
        && read_only(dir)
    {
        problems.push(format!("{path} is on a read-only file system"));
    }
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
            writable(env, &f.path, &mut problems);
        }
        for a in &c.artifacts {
            for p in std::iter::once(&a.path).chain(&a.staging) {
                if !artifact_allowed(p) {
                    problems.push(format!("{p} is not a boot file this tool regenerates"));
                } else if let Err(e) = confined(&env.root, p, false) {
                    problems.push(e.to_string());
                } else {
                    writable(env, p, &mut problems);
                }
            }
        }
        for v in &c.values {
            if !super::fsops::value_allowed(&v.path) {
                problems.push(format!("{} is not a value this tool writes", v.path));
                continue;
            }
            // A value written to trigger something (drivers_probe,
            // compact_memory) or to hand a device over must be there: a
            // missing one would fail half-way, after other changes.
            // An unbind is written only while the device is on that driver
            // (see unbind_applies): then it must be there too.
            let needed = unbind_applies(&env.root, &v.path, &v.after);
            let there = confined(&env.root, &v.path, true).is_ok_and(|p| p.exists());
            if !there && !v.may_fail && needed {
                problems.push(format!(
                    "{}: not there to be written (a kernel feature or driver missing{})",
                    v.path,
                    if env.root.is_live() {
                        ""
                    } else {
                        ", or a capture without it"
                    }
                ));
                continue;
            }
            if v.action {
                continue;
            }
            let now = read_value(&env.root, &v.path);
            let bracketed = v.path.ends_with("/enabled")
                && now
                    .as_deref()
                    .is_some_and(|n| n.contains(&format!("[{}]", v.before)));
            if now.as_deref() != Some(v.before.as_str()) && !bracketed {
                problems.push(format!(
                    "{} is not '{}' any more: plan again",
                    v.path, v.before
                ));
            }
        }
        if env.run_commands {
            for cmd in c.prepare.iter().chain(&c.commands).chain(&c.undo_commands) {
                // Where it will be run from: the system's folders, only
                // root's (syspath), never the caller's PATH.
                let have = |tool: &str| match &env.tool_dir {
                    Some(d) => d.join(tool).exists(),
                    None => facts.has_tool(tool) && crate::syspath::find(tool).is_some(),
                };
                let tool = cmd.cmd.program();
                if !have(tool) {
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
