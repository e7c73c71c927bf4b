//! What runs as root starts from a clean environment (issue 41, STYLE rule
//! 14). The helper and the scan were run with a hostile environment — a
//! PATH whose first folder holds a `zstd`, `xz`, `lz4`, `systemctl`,
//! `modprobe` and `update-initramfs` of the caller's (each leaves a mark
//! when run), `GCONV_PATH`, `IFS`, `TMPDIR` and a locale of theirs — and
//! nothing of the caller's ran: the initramfs was read all the same, with
//! the system's `zstd`. The dynamic loader's own variables (`LD_PRELOAD`,
//! `LD_LIBRARY_PATH`) act before the helper's first line, so the helper
//! refuses to change anything when it finds them (pkexec and a default
//! sudo remove them).
//!
//! Through sudo, as the second real user `vfio-remote`, with a sudoers
//! drop-in as hostile as one can be (no `secure_path`, `env_keep` of all of
//! the above): nothing of theirs runs, and the line gives neither `undo
//! --force` nor QEMU running as that user. (The loader's variables,
//! `GCONV_PATH` and `TMPDIR` never get that far: glibc drops them from the
//! setuid sudo's own environment; only PATH, IFS and the locale go
//! through, and the helper clears them.) Needs root and the
//! user (CI has both); the drop-in is removed whatever happens.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::initramfs::{VFIO_CONF, have, host_with, image};
use crate::support::devnodes::{open_dir, other_user};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A folder of the caller's programs, each leaving `marks/NAME` when run.
fn hostile_bin(marks: &Path) -> tempfile::TempDir {
    let bin = open_dir();
    for name in [
        "zstd",
        "xz",
        "lz4",
        "gzip",
        "systemctl",
        "modprobe",
        "update-initramfs",
        "udevadm",
        "sudo",
        "pkexec",
    ] {
        let p = bin.path().join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$0 $*\" >> '{}/{name}'\nexit 0\n",
                marks.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// The caller's environment at its worst (without the loader's variables).
fn hostile_env(bin: &Path) -> Vec<(String, String)> {
    let evil = bin.display().to_string();
    vec![
        (
            "PATH".into(),
            format!("{evil}:{}", std::env::var("PATH").unwrap_or_default()),
        ),
        ("GCONV_PATH".into(), evil.clone()),
        ("IFS".into(), "/ x".into()),
        ("TMPDIR".into(), evil.clone()),
        ("LANG".into(), "xx_EVIL.UTF-8".into()),
        ("LC_ALL".into(), "xx_EVIL.UTF-8".into()),
        ("LOCPATH".into(), evil.clone()),
        ("NLSPATH".into(), format!("{evil}/%N")),
        ("BASH_ENV".into(), format!("{evil}/zstd")),
        ("ENV".into(), format!("{evil}/zstd")),
    ]
}

fn marks_left(marks: &Path) -> Vec<String> {
    std::fs::read_dir(marks)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            format!(
                "{}: {}",
                e.file_name().to_string_lossy(),
                std::fs::read_to_string(e.path()).unwrap_or_default()
            )
        })
        .collect()
}

fn with_stdin(mut c: Command, input: &[u8]) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

fn said(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A host whose initramfs is zstd-compressed: reading it runs `zstd`.
fn zstd_host() -> Option<tempfile::TempDir> {
    if !have("cpio") || !have("zstd") {
        return None;
    }
    let img = image(Some(VFIO_CONF), true, &["zstd", "-q", "-c"]);
    Some(host_with(Some(&img), Some(VFIO_CONF)))
}

#[test]
fn the_scan_runs_no_program_of_the_callers_path() {
    let Some(host) = zstd_host() else {
        return;
    };
    let marks = open_dir();
    let bin = hostile_bin(marks.path());
    let o = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["scan", "--json", "--root"])
        .arg(host.path())
        .envs(hostile_env(bin.path()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", said(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let initramfs = &v["system"]["initramfs"];
    assert_eq!(
        (&initramfs["state"], &initramfs["compression"]),
        (&serde_json::json!("read"), &serde_json::json!("zstd")),
        "the image was read, with the system's zstd: {initramfs}"
    );
    assert_eq!(marks_left(marks.path()), Vec::<String>::new());
}

#[test]
fn the_helper_runs_no_program_of_the_callers_path() {
    let Some(host) = zstd_host() else {
        return;
    };
    let marks = open_dir();
    let bin = hostile_bin(marks.path());
    let mut c = Command::new(crate::support::helper_bin());
    c.arg("--root")
        .arg(host.path())
        .env_clear()
        .envs(hostile_env(bin.path()));
    let o = with_stdin(
        c,
        br#"{"kind":"apply","request":{"gpus":["0000:0b:00.0"],"only":["vfio-boot"]}}"#,
    );
    // Planned and applied or refused: either way after a scan that read
    // the image, and with nothing of the caller's run.
    assert!(matches!(o.status.code(), Some(0..=2)), "{}", said(&o));
    assert_eq!(
        marks_left(marks.path()),
        Vec::<String>::new(),
        "{}",
        said(&o)
    );
}

/// As sudo starts it for another user (SUDO_UID; a status request, so the
/// live host is only read): the caller's loader variables are refused
/// before anything else. (Run by root itself, they are root's own.)
#[test]
fn the_helper_refuses_what_the_loader_was_told() {
    for (k, v) in [
        ("LD_PRELOAD", "/nonexistent/libevil.so"),
        ("LD_LIBRARY_PATH", "/nonexistent"),
        ("GLIBC_TUNABLES", "glibc.malloc.check=3"),
    ] {
        let mut c = Command::new(crate::support::helper_bin());
        c.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("SUDO_UID", "1001")
            .env(k, v);
        let o = with_stdin(c, br#"{"kind":"status"}"#);
        assert_eq!(o.status.code(), Some(2), "{k}: {}", said(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains(&format!("{k} is set")) && out.contains("Nothing was changed"),
            "{out}"
        );
    }
}

/// A sudoers drop-in, removed when dropped.
struct Dropin(PathBuf);

impl Drop for Dropin {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The helper where sudo may run it (a root-owned 0755 folder), and a
/// drop-in giving it to `vfio-remote` as the printed line does, with every
/// protection of sudo's own switched off: no `secure_path`, and `env_keep`
/// of the caller's PATH, loader variables, `GCONV_PATH`, `IFS`, `TMPDIR`
/// and locale.
fn hostile_sudoers() -> Option<(tempfile::TempDir, PathBuf, Dropin)> {
    if !other_user() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let helper = dir.path().join("vfio-assistant-helper");
    std::fs::copy(crate::support::helper_bin(), &helper).unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let drop = Dropin(PathBuf::from(format!(
        "/etc/sudoers.d/vfio-assistant-it-{}",
        std::process::id()
    )));
    let text = format!(
        "Defaults:vfio-remote !secure_path, env_keep += \"PATH LD_PRELOAD LD_LIBRARY_PATH GLIBC_TUNABLES GCONV_PATH IFS TMPDIR LANG LC_ALL LOCPATH\"\nvfio-remote ALL=(root) NOPASSWD: {} \"\"\n",
        helper.display()
    );
    std::fs::write(&drop.0, text).unwrap();
    std::fs::set_permissions(&drop.0, std::fs::Permissions::from_mode(0o440)).unwrap();
    let ok = Command::new("visudo")
        .args(["-cf"])
        .arg(&drop.0)
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", said(&ok));
    Some((dir, helper, drop))
}

/// `sudo -n HELPER` as vfio-remote with `envs`, `input` on stdin.
fn as_other_through_sudo(helper: &Path, envs: &[(String, String)], input: &[u8]) -> Output {
    let mut c = Command::new("runuser");
    c.args(["-u", "vfio-remote", "--", "env"])
        .args(envs.iter().map(|(k, v)| format!("{k}={v}")))
        // sudo itself by its path: the hostile PATH has a `sudo` too.
        .args(["/usr/bin/sudo", "-n"])
        .arg(helper)
        .current_dir("/");
    with_stdin(c, input)
}

#[test]
fn through_the_sudoers_line_as_another_user_nothing_reaches_past_it() {
    let Some((_dir, helper, _drop)) = hostile_sudoers() else {
        return;
    };
    let marks = open_dir();
    let bin = hostile_bin(marks.path());
    let env = hostile_env(bin.path());
    // The line works: status, in the hostile environment.
    let o = as_other_through_sudo(&helper, &env, br#"{"kind":"status"}"#);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    // Neither --force nor QEMU as the caller goes through it.
    let o = as_other_through_sudo(
        &helper,
        &env,
        br#"{"kind":"undo","id":"1700000000000","force":true}"#,
    );
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        said(&o).contains("undo --force is not given through sudo"),
        "{}",
        said(&o)
    );
    let o = as_other_through_sudo(
        &helper,
        &env,
        br#"{"kind":"apply","request":{"qemu_as_user":true,"desktop_user":"vfio-remote"}}"#,
    );
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        said(&o).contains("QEMU running as you is not given through sudo"),
        "{}",
        said(&o)
    );
    // The loader's variables, though this sudoers keeps them, never reach
    // the helper: glibc drops them (and GCONV_PATH, TMPDIR, LOCPATH,
    // NLSPATH) from the setuid sudo's own environment; were they to arrive,
    // the helper would refuse (the_helper_refuses_what_the_loader_was_told).
    let mut with_preload = env.clone();
    with_preload.push(("LD_PRELOAD".into(), "/nonexistent/libevil.so".into()));
    let o = as_other_through_sudo(&helper, &with_preload, br#"{"kind":"status"}"#);
    assert!(
        o.status.code() == Some(0) || said(&o).contains("LD_PRELOAD is set"),
        "{}",
        said(&o)
    );
    assert_eq!(marks_left(marks.path()), Vec::<String>::new());
}
