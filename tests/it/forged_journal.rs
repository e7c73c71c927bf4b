//! The journal as an attacker would feed it (issue 30): a journal folder
//! someone else wrote, an entry whose undo names a shell, a file restored
//! setuid or where its change never writes, a link on the way out of the
//! root; and what the journal writes, as another user would read it. Each
//! is refused with a sentence, and nothing outside the allowlist changes.

use super::support::tuning::{kernel_gives_hugepages, tuning_host};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Env, apply};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::model::Request;
use vfio_assistant::tuning::plan::plan;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
}

/// A real applied transaction on a test host: its root and entry id.
fn applied() -> (tempfile::TempDir, String) {
    let dir = tuning_host();
    let root = HostRoot::at(dir.path());
    let req = Request {
        gpus: vec!["0b:00.0".parse().unwrap()],
        vcpus: Some(4),
        memory_mib: Some(1024),
        ..Request::default()
    };
    let p = plan(&scan(&root).unwrap(), &gather(&root), &req).unwrap();
    let e = Env::new(root.clone(), None, false);
    let o = apply(&e, &gather(&root), &p, &req, &mut |_| {}).unwrap();
    assert_eq!(o.state, EntryState::Applied);
    kernel_gives_hugepages(dir.path());
    (dir, o.id)
}

fn entry_path(root: &Path, id: &str) -> std::path::PathBuf {
    root.join("var/lib/vfio-assistant/journal")
        .join(id)
        .join("entry.json")
}

/// Edit the entry as JSON, then run `tune undo ID --force` on the root.
fn forge_and_undo(
    root: &Path,
    id: &str,
    edit: impl Fn(&mut serde_json::Value),
) -> std::process::Output {
    let p = entry_path(root, id);
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    bin()
        .args(["tune", "undo", id, "--force", "--yes", "--root"])
        .arg(root)
        .output()
        .unwrap()
}

fn said(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn an_undo_command_read_back_is_never_an_argv() {
    let (dir, id) = applied();
    let mark = dir.path().join("ran-as-whoever-undid");
    // Today's attack: an argv in undo_commands (the old format) …
    let argv = serde_json::json!([{
        "argv": ["/bin/sh", "-c", format!("id > {}", mark.display())],
        "run": true, "why": "x"
    }]);
    let o = forge_and_undo(dir.path(), &id, |v| {
        for c in v["plan"]["changes"].as_array_mut().unwrap() {
            c["undo_commands"] = argv.clone();
            c["artifacts"] = serde_json::json!([]);
        }
    });
    assert_ne!(o.status.code(), Some(0), "{}", said(&o));
    assert!(!mark.exists(), "the forged command ran: {}", said(&o));
    assert!(said(&o).contains("not readable"), "{}", said(&o));
    // … and a program outside the closed set in the new one.
    let o = forge_and_undo(dir.path(), &id, |v| {
        for c in v["plan"]["changes"].as_array_mut().unwrap() {
            c["undo_commands"] = serde_json::json!([{
                "cmd": {"program": "sh", "argv": ["sh"]}, "run": true, "why": ""
            }]);
        }
    });
    assert_ne!(o.status.code(), Some(0));
    assert!(!mark.exists());
}

#[test]
fn a_restored_file_goes_only_where_its_change_writes_with_a_plain_mode() {
    let (dir, id) = applied();
    let passwd = dir.path().join("etc/passwd");
    std::fs::write(&passwd, "root:x:0:0::/root:/bin/sh\n").unwrap();
    // A saved copy pointed at /etc/passwd.
    let o = forge_and_undo(dir.path(), &id, |v| {
        v["files"][0]["path"] = "/etc/passwd".into();
        v["plan"]["changes"][0]["files"][0]["path"] = "/etc/passwd".into();
    });
    assert_ne!(o.status.code(), Some(0), "{}", said(&o));
    assert!(
        said(&o).contains("may not write /etc/passwd"),
        "{}",
        said(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&passwd).unwrap(),
        "root:x:0:0::/root:/bin/sh\n"
    );
    // A setuid mode on a file its change does write.
    let (dir, id) = applied();
    let o = forge_and_undo(dir.path(), &id, |v| {
        for f in v["files"].as_array_mut().unwrap() {
            f["mode"] = 0o4755.into();
        }
    });
    assert_ne!(o.status.code(), Some(0), "{}", said(&o));
    assert!(said(&o).contains("mode 4755"), "{}", said(&o));
    // A value of another kind (core_pattern runs a program as root).
    let (dir, id) = applied();
    let o = forge_and_undo(dir.path(), &id, |v| {
        for c in v["plan"]["changes"].as_array_mut().unwrap() {
            if c["id"] == "thp" {
                c["values"][0]["path"] = "/proc/sys/kernel/core_pattern".into();
            }
        }
    });
    assert_ne!(o.status.code(), Some(0), "{}", said(&o));
    assert!(said(&o).contains("core_pattern"), "{}", said(&o));
}

#[test]
fn a_journal_others_may_write_or_reached_through_a_link_is_not_believed() {
    let (dir, id) = applied();
    let j = dir.path().join("var/lib/vfio-assistant/journal");
    std::fs::set_permissions(&j, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = bin()
        .args(["tune", "undo", &id, "--yes", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("others may write"), "{}", said(&o));
    std::fs::set_permissions(&j, std::fs::Permissions::from_mode(0o700)).unwrap();
    // `var` a link out of the root: the journal is not looked for (or
    // written) outside it.
    let outside = tempfile::tempdir().unwrap();
    let var = dir.path().join("var");
    std::fs::rename(&var, outside.path().join("var")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("var"), &var).unwrap();
    let was: Vec<_> = super::support::tree::files(outside.path());
    for args in [&["tune", "list"][..], &["tune", "status"]] {
        let o = bin()
            .args(args)
            .arg("--root")
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", said(&o));
        assert!(said(&o).contains("it is a link"), "{}", said(&o));
    }
    assert_eq!(
        super::support::tree::files(outside.path()),
        was,
        "written outside the root"
    );
    // An apply on a host whose `var` leads out: no journal is written there.
    let fresh = tuning_host();
    let outside = tempfile::tempdir().unwrap();
    let var = fresh.path().join("var");
    std::fs::rename(&var, outside.path().join("var")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("var"), &var).unwrap();
    let was = super::support::tree::files(outside.path());
    let o = bin()
        .args(["tune", "apply", "--only", "thp", "--yes", "--root"])
        .arg(fresh.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("it is a link"), "{}", said(&o));
    assert_eq!(super::support::tree::files(outside.path()), was);
}

#[test]
fn the_journal_is_its_owners_alone() {
    let (dir, id) = applied();
    let j = dir.path().join("var/lib/vfio-assistant/journal");
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&j), 0o700);
    assert_eq!(mode(&j.join(&id)), 0o700);
    assert_eq!(mode(&entry_path(dir.path(), &id)), 0o600);
    assert!(j.join(&id).join("files").is_dir());
    for sub in ["files", "artifacts"] {
        let d = j.join(&id).join(sub);
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        assert_eq!(mode(&d), 0o700, "{sub}");
        for f in rd.flatten() {
            assert_eq!(mode(&f.path()), 0o600, "{}", f.path().display());
        }
    }
    // Its public record: readable, without root-only text.
    let rec = dir
        .path()
        .join("var/lib/vfio-assistant/records")
        .join(format!("{id}.json"));
    assert_eq!(mode(&rec), 0o644);
    assert_eq!(mode(rec.parent().unwrap()), 0o755);
    // Read as another user (CI runs as root and has vfio-remote).
    let other = Command::new("id").arg("vfio-remote").output();
    if rustix::process::geteuid().as_raw() != 0 || !other.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI has root and vfio-remote"
        );
        eprintln!("skipped the other user's read: needs root and the user vfio-remote");
        return;
    }
    // The other user may walk to the root (a test tree in /tmp).
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let read = |p: &Path| {
        Command::new("runuser")
            .args(["-u", "vfio-remote", "--", "cat"])
            .arg(p)
            .output()
            .unwrap()
    };
    let o = read(&entry_path(dir.path(), &id));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("Permission denied"));
    let o = read(&rec);
    assert!(o.status.success(), "{}", said(&o));
    // As that user, status reads the records and says where it stands.
    let o = Command::new("runuser")
        .args(["-u", "vfio-remote", "--"])
        .arg(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["tune", "status", "--json", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    assert_eq!(v[0]["id"], id.as_str(), "{}", said(&o));
}

#[test]
fn the_helpers_test_hooks_are_refused_under_lent_privilege() {
    let helper = crate::support::helper_bin();
    let j = tempfile::tempdir().unwrap();
    for (var, val) in [("SUDO_UID", "1000"), ("PKEXEC_UID", "1000")] {
        for args in [
            vec!["--journal", j.path().to_str().unwrap()],
            vec!["--root", j.path().to_str().unwrap()],
        ] {
            let mut c = Command::new(helper);
            // As pkexec and sudo start it: without cargo's loader path.
            c.args(&args)
                .env_remove("LD_LIBRARY_PATH")
                .env(var, val)
                .stdin(std::process::Stdio::piped());
            let o = c
                .stdout(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut ch| {
                    use std::io::Write;
                    let _ = ch.stdin.take().unwrap().write_all(br#"{"kind":"status"}"#);
                    ch.wait_with_output()
                })
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{var} {args:?}");
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("are for tests"),
                "{}",
                String::from_utf8_lossy(&o.stdout)
            );
        }
    }
}
