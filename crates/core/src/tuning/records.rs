//! The journal's public records: where each transaction stands, for the
//! user who is not root. The journal itself is root's alone (0700; it keeps
//! copies of root-only files), so beside it each entry is also written,
//! 0644 in a 0755 folder `records/`, with the text of every file that was
//! not readable by everyone before (qemu.conf) left out — nothing a user
//! could not already read on the host. `tune status`, the Tuning page and a
//! snapshot taken as a user read these; undo never does (it is root's, and
//! reads the journal).

use super::journal::{Entry, Journal, JournalError, parse_entry, valid_id};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// What stands where a root-only file's text was.
pub const LEFT_OUT: &str = "(root-only file: its text is kept in the journal, for root)\n";

/// The records' folder: beside the journal (inside a journal a test names).
pub fn dir(j: &Journal) -> PathBuf {
    match j.dir.parent() {
        Some(p) if j.base != j.dir => p.join("records"),
        _ => j.dir.join("records"),
    }
}

/// Where the record of `id` is.
pub fn file(j: &Journal, id: &str) -> Option<PathBuf> {
    valid_id(id).then(|| dir(j).join(format!("{id}.json")))
}

/// `e` with the text of every file nobody but root could read left out.
pub fn public(e: &Entry) -> Entry {
    let mut e = e.clone();
    let hidden: Vec<String> = e
        .files
        .iter()
        .filter(|f| f.mode.is_some_and(|m| m & 0o004 == 0))
        .map(|f| f.path.clone())
        .collect();
    for f in e.files.iter_mut().filter(|f| hidden.contains(&f.path)) {
        f.written = f.written.as_ref().map(|_| LEFT_OUT.to_string());
    }
    for c in &mut e.plan.changes {
        for f in c.files.iter_mut().filter(|f| hidden.contains(&f.path)) {
            f.before = f.before.as_ref().map(|_| LEFT_OUT.to_string());
            f.after = f.after.as_ref().map(|_| LEFT_OUT.to_string());
        }
    }
    e
}

/// Write the public record of `e` (atomically: a temporary file renamed).
pub fn write(j: &Journal, e: &Entry) -> Result<(), JournalError> {
    let d = dir(j);
    super::trust::make_dirs(&j.base, &d, &d)?;
    super::trust::check_dir(&j.base, &d)?;
    let Some(fin) = file(j, &e.id) else {
        return Err(JournalError::NoEntry(e.id.clone()));
    };
    let io = |p: &std::path::Path| {
        let p = p.display().to_string();
        move |source| JournalError::Io { path: p, source }
    };
    let text = serde_json::to_vec_pretty(&public(e)).map_err(|err| JournalError::Bad {
        path: fin.display().to_string(),
        message: err.to_string(),
    })?;
    let tmp = d.join(format!(".{}.json.tmp", e.id));
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(&text)?;
            f.sync_all()
        });
    written.map_err(io(&tmp))?;
    std::fs::rename(&tmp, &fin).map_err(io(&fin))
}

/// Every record, oldest first (those that cannot be believed or read are
/// skipped).
pub fn list(j: &Journal) -> Vec<Entry> {
    let d = dir(j);
    if super::trust::check_dir(&j.base, &d).is_err() {
        return Vec::new();
    }
    let Ok(rd) = std::fs::read_dir(&d) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = rd
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .map(str::to_string)
        })
        .filter(|n| valid_id(n))
        .collect();
    super::journal::sort_ids(&mut ids);
    ids.iter()
        .filter_map(|id| {
            let p = file(j, id)?;
            super::trust::check_file(&p).ok()?;
            let bytes = crate::userfile::read_bytes(&p, 64 * 1024 * 1024).ok()?;
            parse_entry(&bytes).ok().filter(|e| &e.id == id)
        })
        .collect()
}
