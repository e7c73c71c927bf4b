//! The "remote" as another user: a real sshd on 127.0.0.1 (run as root, so
//! it can log anyone in), logging in as the second local user `vfio-remote`
//! (made by scripts/setup.sh test) with the package's programs put where
//! that user can run them. What is read there agrees with the same root
//! read here; a captured root of that user's is tuned and undone there, the
//! files written as that user; and a user without root there is told what
//! to do: sudo that asks a password (a stand-in sudo that says what sudo
//! says), no sudo at all.
//!
//! Needs root here (sshd switching to another user); skipped otherwise,
//! as the qemu+ssh test is (CI runs as root).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::json::without_root;
use crate::support::sshd::{Sshd, script, sshd, sshd_with};
use crate::support::tuning::{differ, tree, tuning_host};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const USER: &str = "vfio-remote";

/// The second user's uid and gid; None (skipped) when this is not root.
fn second_user() -> Option<(u32, u32)> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: logging in as another user needs sshd run as root (CI runs as root)");
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with(&format!("{USER}:")))
        .unwrap_or_else(|| panic!("no user {USER}: run scripts/setup.sh test (it makes one)"));
    let f: Vec<&str> = line.split(':').collect();
    Some((f[2].parse().unwrap(), f[3].parse().unwrap()))
}

/// The package's programs where the second user can run them (the build's
/// folder may be closed to other users).
fn installed(s: &Sshd) -> (PathBuf, PathBuf) {
    let bin = s.dir.path().join("usr-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let put = |from: &str, name: &str| {
        let to = bin.join(name);
        std::fs::copy(from, &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
        to
    };
    (
        put(env!("CARGO_BIN_EXE_vfio-assistant"), "vfio-assistant"),
        put(crate::support::helper_bin(), "vfio-assistant-helper"),
    )
}

fn run(s: &Sshd, program: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .env("VFIO_ASSISTANT_SSH", s.ssh("client", &s.known_hosts()))
        .env("VFIO_ASSISTANT_REMOTE_PROGRAM", program)
        .output()
        .unwrap()
}

fn said(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn chown_tree(p: &Path, uid: u32, gid: u32) {
    let st = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn another_user_there_reads_and_tunes_a_root_of_theirs() {
    let Some((uid, gid)) = second_user() else {
        return;
    };
    let s = sshd();
    let (program, _) = installed(&s);
    // A captured machine that user owns, in a folder they can reach.
    let host = tuning_host();
    chown_tree(host.path(), uid, gid);
    std::fs::set_permissions(host.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A hook only root may read: that user's snapshot keeps it executable.
    let hook = host.path().join("etc/libvirt/hooks/qemu");
    std::os::unix::fs::chown(&hook, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o700)).unwrap();
    let before = tree(host.path());
    let target = s.target_as(USER, Some(host.path()));
    let root = host.path().display().to_string();
    for cmd in ["scan", "check"] {
        let there = run(&s, &program, &[cmd, "--json", "--host", &target]);
        assert!(
            there.status.code().is_some_and(|c| c <= 1),
            "{}",
            said(&there)
        );
        let here = run(&s, &program, &[cmd, "--json", "--root", &root]);
        assert_eq!(there.status.code(), here.status.code());
        let (a, b) = (without_root(&there.stdout), without_root(&here.stdout));
        if a != b {
            let (a, b) = (
                serde_json::to_string_pretty(&a).unwrap(),
                serde_json::to_string_pretty(&b).unwrap(),
            );
            let diff = similar::TextDiff::from_lines(&a, &b)
                .unified_diff()
                .context_radius(2)
                .to_string();
            let diff: String = diff.lines().take(80).collect::<Vec<_>>().join("\n");
            panic!("{cmd} there and here differ:\n{diff}");
        }
    }
    let apply = run(
        &s,
        &program,
        &[
            "tune", "apply", "--gpu", "0b:00.0", "--yes", "--host", &target,
        ],
    );
    assert_eq!(apply.status.code(), Some(0), "{}", said(&apply));
    // Written there as that user, journal and all.
    let drop_in = host.path().join("etc/default/grub.d/99-vfio-assistant.cfg");
    assert_eq!(std::fs::metadata(&drop_in).unwrap().uid(), uid);
    let journal = host.path().join("var/lib/vfio-assistant/journal");
    assert_eq!(std::fs::metadata(&journal).unwrap().uid(), uid);
    let status = run(&s, &program, &["tune", "status", "--host", &target]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("waiting for a reboot"),
        "{}",
        said(&status)
    );
    let undo = run(
        &s,
        &program,
        &["tune", "undo", "--last", "--yes", "--host", &target],
    );
    assert_eq!(undo.status.code(), Some(0), "{}", said(&undo));
    assert_eq!(differ(&before, &tree(host.path())), Vec::<String>::new());
}

/// A folder for the sessions' PATH holding `tools` (linked from /usr/bin
/// or /bin) and, when given, a stand-in `sudo`.
fn path_with(holder: &tempfile::TempDir, tools: &[&str], sudo: Option<&str>) -> String {
    let dir = holder.path().join("bin");
    std::fs::set_permissions(holder.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    for t in tools {
        let from = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(t))
            .find(|p| p.exists())
            .unwrap();
        std::os::unix::fs::symlink(from, dir.join(t)).unwrap();
    }
    if let Some(body) = sudo {
        script(&dir.join("sudo"), body);
    }
    dir.display().to_string()
}

#[test]
fn sudo_that_asks_a_password_is_said_with_the_sudoers_line() {
    if second_user().is_none() {
        return;
    }
    // Where no terminal is, sudo -n says this and ends with 1.
    let asks = "#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n";
    let holder = tempfile::tempdir().unwrap();
    let path = path_with(&holder, &["id", "head", "cat"], Some(asks));
    let s = sshd_with(Some(&path));
    let (program, helper) = installed(&s);
    let target = s.target_as(USER, None);
    // The CLI: the program there, as the login, hands root's part to its
    // helper through sudo -n; the password sudo asks is said with the
    // helper's sudoers line, the user named in it.
    let apply = run(
        &s,
        &program,
        &[
            "tune",
            "undo",
            "000000000001-1-0",
            "--yes",
            "--host",
            &target,
        ],
    );
    let e = said(&apply);
    assert_ne!(apply.status.code(), Some(0), "{e}");
    assert!(
        e.contains("asks for a password")
            && e.contains(&vfio_assistant::remote::sudoers_line(USER))
            && !e.contains("NOPASSWD: /usr/bin/vfio-assistant"),
        "{e}"
    );
    // The app's way: the helper there under sudo -n, its words turned into
    // what to do.
    let mut t = vfio_assistant::remote::SshTarget::parse(&target).unwrap();
    t.via = vfio_assistant::remote::Via {
        ssh: Some(s.ssh("client", &s.known_hosts())),
        program: Some(program.display().to_string()),
        helper: Some(helper.display().to_string()),
    };
    let out = t
        .helper_command()
        .unwrap()
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let words = t
        .helper_words(out.status.code(), &String::from_utf8_lossy(&out.stderr))
        .unwrap_or_else(|| panic!("{}", said(&out)));
    assert!(
        words.contains("asks for a password") && words.contains("vfio-assistant-helper"),
        "{words}"
    );
}

#[test]
fn no_sudo_there_says_to_log_in_as_root() {
    if second_user().is_none() {
        return;
    }
    let holder = tempfile::tempdir().unwrap();
    let path = path_with(&holder, &["id", "head", "cat"], None);
    let s = sshd_with(Some(&path));
    let (program, _) = installed(&s);
    let apply = run(
        &s,
        &program,
        &[
            "tune",
            "apply",
            "--gpu",
            "0b:00.0",
            "--yes",
            "--host",
            &s.target_as(USER, None),
        ],
    );
    let e = said(&apply);
    assert_ne!(apply.status.code(), Some(0), "{e}");
    assert!(
        e.contains("has no sudo") && e.contains("ssh://root@127.0.0.1"),
        "{e}"
    );
}
