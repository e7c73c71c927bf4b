//! The programs we start, found where the system keeps them and never on
//! the caller's PATH (STYLE rule 14). Through sudo without `secure_path`
//! (upstream sudo's default) the helper inherits whatever PATH its caller
//! had, and `PATH=/tmp/evil:$PATH vfio-assistant scan` would otherwise run
//! `/tmp/evil/zstd` while it reads an initramfs: every program the helper
//! or the scan runs is looked up here, in `SYSTEM_PATH` only, and started
//! with a clean environment (`clean`).
//!
//! A folder or a program that anyone but root could have written is passed
//! over, as sudo's `secure_path` is meant to hold only root's folders.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where programs are looked for, in this order (Debian's and Fedora's
/// `secure_path`; `/sbin` and `/bin` for the hosts where they are not
/// links to `/usr`).
pub const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Only root may have written it: owned by root, not writable by its group
/// or by others.
fn roots_alone(meta: &std::fs::Metadata) -> bool {
    meta.uid() == 0 && meta.mode() & 0o022 == 0
}

/// The program `name` (a bare name, no `/`) in `SYSTEM_PATH`: the first
/// regular, executable file there in a folder only root may write, itself
/// only root's. `None` when there is none (not installed).
pub fn find(name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    SYSTEM_PATH
        .split(':')
        .map(Path::new)
        .filter(|d| std::fs::metadata(d).is_ok_and(|m| m.is_dir() && roots_alone(&m)))
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p)
                .is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0 && roots_alone(&m))
        })
}

/// Where `name` is, for a command: found in `SYSTEM_PATH`, or (not
/// installed) the path it would have in `/usr/bin`, so that starting it
/// fails with "No such file or directory" and its name — never a lookup in
/// the caller's PATH.
pub fn program(name: &str) -> PathBuf {
    find(name).unwrap_or_else(|| Path::new("/usr/bin").join(name.replace('/', "_")))
}

/// The environment of a program we start: nothing of the caller's (no
/// `LD_*`, `GCONV_PATH`, `IFS`, `TMPDIR`, locale, `HOME`…), only `PATH` set
/// to `SYSTEM_PATH` for the programs it runs in turn. Without `LANG` and
/// `LC_*` a program speaks the C locale.
pub fn clean(cmd: &mut Command) -> &mut Command {
    cmd.env_clear().env("PATH", SYSTEM_PATH)
}

/// `name` from `SYSTEM_PATH`, to start with a clean environment.
pub fn command(name: &str) -> Command {
    let mut c = Command::new(program(name));
    clean(&mut c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_found_only_where_root_keeps_it() {
        let sh = find("sh").unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        for bad in ["", "../sh", "/bin/sh", "no-such-program-here"] {
            assert_eq!(find(bad), None, "{bad:?}");
        }
        // Not installed: a path in /usr/bin that fails to start, never a
        // lookup on PATH.
        let missing = program("no-such-program-here");
        assert_eq!(missing, Path::new("/usr/bin/no-such-program-here"));
        assert!(command("no-such-program-here").output().is_err());
    }

    #[test]
    fn the_environment_is_the_systems_not_the_callers() {
        let out = command("sh")
            .args(["-c", "env"])
            .env("KEPT_BY_US", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            // sh itself sets these.
            .filter(|k| !["PWD", "SHLVL", "_", "OLDPWD"].contains(k))
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["KEPT_BY_US", "PATH"], "{text}");
        assert!(text.contains(&format!("PATH={SYSTEM_PATH}")), "{text}");
    }
}
