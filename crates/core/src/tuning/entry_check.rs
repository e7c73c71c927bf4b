//! A journal entry checked against the kinds' allowlists before it is
//! believed: its plan (targets.rs), and every saved file and boot file it
//! records owned by one of its changes, with a mode and a saved name this
//! tool writes. Read by the journal (journal.rs) on every entry it loads.

use super::entry::Entry;
use super::targets::{Outside, artifact_allowed, check_plan, mode_ok};

/// A copy in the journal's folder is named by its number (`0003`), as the
/// apply names it: never a path, a hidden name, or the folder itself (an
/// empty name), whatever characters the entry was edited to hold.
fn saved_name_ok(name: Option<&str>) -> bool {
    name.is_none_or(|n| (1..=16).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A journal entry undo may act on: its plan within the allowlist, every
/// saved file and generated file one of its changes writes, every mode
/// closed, every value one of its changes sets.
pub fn check_entry(e: &Entry) -> Result<(), Outside> {
    check_plan(&e.plan)?;
    let changes = &e.plan.changes;
    for f in &e.files {
        let owner = changes
            .iter()
            .any(|c| c.files.iter().any(|x| x.path == f.path));
        if !owner {
            return Err(Outside::NoOwner {
                what: "saved file",
                path: f.path.clone(),
            });
        }
        if f.mode.is_some_and(|m| !mode_ok(m)) {
            return Err(Outside::Mode {
                what: "saved file",
                path: f.path.clone(),
                mode: f.mode.unwrap_or(0),
            });
        }
        if !saved_name_ok(f.saved_as.as_deref()) {
            return Err(Outside::SavedAs {
                what: "saved file",
                path: f.path.clone(),
            });
        }
    }
    for a in &e.artifacts {
        let owner = changes
            .iter()
            .any(|c| c.id == a.change && c.artifacts.iter().any(|x| x.path == a.path));
        if !owner || !artifact_allowed(&a.path) {
            return Err(Outside::NoOwner {
                what: "boot file",
                path: a.path.clone(),
            });
        }
        if a.mode.is_some_and(|m| !mode_ok(m)) {
            return Err(Outside::Mode {
                what: "boot file",
                path: a.path.clone(),
                mode: a.mode.unwrap_or(0),
            });
        }
        if !saved_name_ok(a.saved_as.as_deref()) {
            return Err(Outside::SavedAs {
                what: "boot file",
                path: a.path.clone(),
            });
        }
    }
    for (path, before) in &e.values {
        let owner = changes
            .iter()
            .any(|c| c.values.iter().any(|v| &v.path == path));
        if !owner || before.len() > 4096 || before.contains('\0') {
            return Err(Outside::NoOwner {
                what: "value",
                path: path.clone(),
            });
        }
    }
    Ok(())
}
