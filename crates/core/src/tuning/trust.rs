//! Whether the journal may be believed, and making its folders so that it
//! can be. What undo restores comes from the journal, so a journal that
//! someone else could have written (a folder of theirs named with
//! `--journal`, a link planted on the way, a folder left writable) would let
//! them choose what root writes. Every folder from the host root down to
//! the journal, and every file read from it, must be a real folder or file
//! (no link), owned by root or by whoever runs us, and writable by nobody
//! else; root trusts only root's. New folders are made one by one with mode
//! 0700, never through a link (the same rule as `fsops::confined`, the
//! jail every tuning write goes through).

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("journal entry {path} is not readable: {message}")]
    Bad { path: String, message: String },
    #[error("no journal entry {0}")]
    NoEntry(String),
    #[error(
        "journal {path} is not trusted: {why}. A journal must be root's (or, on a test tree, yours), writable by nobody else, with no link on the way; nothing was done with it"
    )]
    Untrusted { path: String, why: String },
    #[error(
        "the journal {path} is root's to read (it keeps copies of root-only files): run this as root (sudo), or use the app's Tuning page, which asks for it"
    )]
    RootOnly { path: String },
}

fn untrusted(path: &Path, why: impl Into<String>) -> JournalError {
    JournalError::Untrusted {
        path: path.display().to_string(),
        why: why.into(),
    }
}

/// Whoever runs us: root trusts root's files only, a user their own and
/// root's.
fn owner_ok(uid: u32) -> bool {
    let me = rustix::process::geteuid().as_raw();
    uid == 0 || uid == me
}

fn check_meta(path: &Path, m: &std::fs::Metadata, want_dir: bool) -> Result<(), JournalError> {
    let ft = m.file_type();
    if ft.is_symlink() {
        return Err(untrusted(path, "it is a link"));
    }
    if want_dir && !ft.is_dir() {
        return Err(untrusted(path, "it is not a folder"));
    }
    if !want_dir && !ft.is_file() {
        return Err(untrusted(path, "it is not a regular file"));
    }
    if !owner_ok(m.uid()) {
        return Err(untrusted(
            path,
            format!("it belongs to user {}, not to root or you", m.uid()),
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(untrusted(
            path,
            format!("others may write to it (mode {:o})", m.mode() & 0o7777),
        ));
    }
    Ok(())
}

/// The folders from `base` down to `dir`, `base` first.
fn walk(base: &Path, dir: &Path) -> Result<Vec<PathBuf>, JournalError> {
    let rel = dir
        .strip_prefix(base)
        .map_err(|_| untrusted(dir, format!("it is not under {}", base.display())))?;
    let mut out = vec![base.to_path_buf()];
    let mut cur = base.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(n) => {
                cur.push(n);
                out.push(cur.clone());
            }
            _ => return Err(untrusted(dir, "its path has `..` or `.` in it")),
        }
    }
    Ok(out)
}

/// Check every folder from `base` to `dir` that is there (the first one
/// missing ends the walk: nothing below it can be believed or doubted).
pub fn check_dir(base: &Path, dir: &Path) -> Result<(), JournalError> {
    for p in walk(base, dir)? {
        match std::fs::symlink_metadata(&p) {
            Ok(m) => check_meta(&p, &m, true)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(JournalError::Io {
                    path: p.display().to_string(),
                    source: e,
                });
            }
        }
    }
    Ok(())
}

/// Check a file read from the journal (absent: the read says so).
pub fn check_file(p: &Path) -> Result<(), JournalError> {
    match std::fs::symlink_metadata(p) {
        Ok(m) => check_meta(p, &m, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(JournalError::Io {
            path: p.display().to_string(),
            source: e,
        }),
    }
}

/// Make the folders from `base` down to `dir` that are missing, each 0700
/// from its creation; those there are checked first.
pub fn make_private_dirs(base: &Path, dir: &Path) -> Result<(), JournalError> {
    make_dirs(base, base, dir)
}

/// Make the folders from `base` down to `dir` that are missing, those down
/// to `public` 0755 (anyone may pass: the journal's public records are
/// below), those below it 0700, each with its mode from its creation.
pub fn make_dirs(base: &Path, public: &Path, dir: &Path) -> Result<(), JournalError> {
    for p in walk(base, dir)? {
        match std::fs::symlink_metadata(&p) {
            Ok(m) => check_meta(&p, &m, true)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mode = if public.starts_with(&p) { 0o755 } else { 0o700 };
                std::fs::DirBuilder::new()
                    .mode(mode)
                    .create(&p)
                    .map_err(|source| JournalError::Io {
                        path: p.display().to_string(),
                        source,
                    })?;
            }
            Err(source) => {
                return Err(JournalError::Io {
                    path: p.display().to_string(),
                    source,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_private_and_refused_when_not_ours_alone() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path();
        let j = base.join("var/lib/vfio-assistant/journal");
        make_private_dirs(base, &j).unwrap();
        for p in [
            "var",
            "var/lib",
            "var/lib/vfio-assistant",
            "var/lib/vfio-assistant/journal",
        ] {
            let m = std::fs::metadata(base.join(p)).unwrap();
            assert_eq!(m.mode() & 0o777, 0o700, "{p}");
        }
        check_dir(base, &j).unwrap();
        // Writable by others on the way: refused.
        std::fs::set_permissions(base.join("var/lib"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        let e = check_dir(base, &j).unwrap_err().to_string();
        assert!(e.contains("others may write"), "{e}");
        std::fs::set_permissions(base.join("var/lib"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        // A link on the way (`var -> elsewhere`): refused, nothing made there.
        let t2 = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), t2.path().join("var")).unwrap();
        let j2 = t2.path().join("var/lib/vfio-assistant/journal");
        assert!(
            make_private_dirs(t2.path(), &j2)
                .unwrap_err()
                .to_string()
                .contains("link")
        );
        assert!(
            std::fs::read_dir(elsewhere.path())
                .unwrap()
                .next()
                .is_none()
        );
        assert!(check_dir(t2.path(), &j2).is_err());
        // `..` in the path: refused.
        assert!(check_dir(base, &base.join("var/../x")).is_err());
    }
}
