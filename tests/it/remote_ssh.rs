//! Another machine over SSH (`--host ssh://…`), against a real OpenSSH
//! server: our own sshd on 127.0.0.1 on a port of its own, with a throwaway
//! host key and client key, logging in as this user; the "remote"
//! vfio-assistant is this build (VFIO_ASSISTANT_REMOTE_PROGRAM) and the
//! client is ssh with the test's keys (VFIO_ASSISTANT_SSH). Scan and check of
//! a captured root read over SSH agree with the same root read here, byte
//! for byte (but the root's own name); each failure a user meets says what
//! to do: key refused, host key changed, nothing listening, not installed,
//! another version.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::json::without_root;
use crate::support::sshd::{Sshd, free_port, script, sshd};

fn ours() -> &'static str {
    env!("CARGO_BIN_EXE_vfio-assistant")
}

fn run(args: &[&str], ssh: &str, program: &str) -> Output {
    Command::new(ours())
        .args(args)
        .env("VFIO_ASSISTANT_SSH", ssh)
        .env("VFIO_ASSISTANT_REMOTE_PROGRAM", program)
        .output()
        .unwrap()
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/e2e-debian12-grub")
}

#[test]
fn scan_and_check_over_ssh_agree_with_the_same_root_read_here() {
    let s = sshd();
    let ssh = s.ssh("client", &s.known_hosts());
    let target = s.target(Some(&fixture()));
    let root = fixture().display().to_string();
    for cmd in [["scan", "--json"], ["check", "--json"]] {
        let there = run(&[cmd[0], cmd[1], "--host", &target], &ssh, ours());
        assert!(
            there.status.code().is_some_and(|c| c <= 1),
            "{}",
            String::from_utf8_lossy(&there.stderr)
        );
        let here = run(&[cmd[0], cmd[1], "--root", &root], &ssh, ours());
        assert_eq!(there.status.code(), here.status.code());
        assert_eq!(
            without_root(&there.stdout),
            without_root(&here.stdout),
            "{}",
            cmd[0]
        );
    }
}

/// A wrapper that is the test's ssh (one word, so libvirt runs it too).
fn ssh_wrapper(s: &Sshd) -> PathBuf {
    let w = s.dir.path().join("ssh-wrapper");
    let ssh = s.ssh("client", &s.known_hosts());
    script(&w, &format!("#!/bin/sh\nexec {ssh} \"$@\"\n"));
    w
}

/// Tuning a captured root on the other machine: plan, apply, status and
/// undo run there, the journal is that root's, and undo gives back every
/// file byte for byte.
#[test]
fn tuning_runs_there_and_is_undone_from_here() {
    use crate::support::tuning::{differ, tree, tuning_host};
    let s = sshd();
    let ssh = s.ssh("client", &s.known_hosts());
    let host = tuning_host();
    let target = s.target(Some(host.path()));
    let before = tree(host.path());
    let plan = run(
        &[
            "tune", "plan", "--gpu", "0b:00.0", "--json", "--host", &target,
        ],
        &ssh,
        ours(),
    );
    assert_eq!(plan.status.code(), Some(0), "{}", error_of_any(&plan));
    let v: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert!(!v["changes"].as_array().unwrap().is_empty(), "{v}");
    let apply = run(
        &[
            "tune", "apply", "--gpu", "0b:00.0", "--yes", "--host", &target,
        ],
        &ssh,
        ours(),
    );
    assert_eq!(apply.status.code(), Some(0), "{}", error_of_any(&apply));
    assert!(
        String::from_utf8_lossy(&apply.stdout).contains("Reboot for the boot changes"),
        "{}",
        String::from_utf8_lossy(&apply.stdout)
    );
    assert!(
        host.path()
            .join("etc/default/grub.d/99-vfio-assistant.cfg")
            .exists(),
        "the apply wrote the remote root"
    );
    let status = run(&["tune", "status", "--host", &target], &ssh, ours());
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("waiting for a reboot"),
        "{}",
        error_of_any(&status)
    );
    // The snapshot taken there carries the journal and the tuning facts:
    // the app's Tuning page on that machine reads them from it.
    let snap = s.dir.path().join("after-apply.tar.gz");
    let taken = run(
        &["snapshot", snap.to_str().unwrap(), "--host", &target],
        &ssh,
        ours(),
    );
    assert_eq!(taken.status.code(), Some(0), "{}", error_of_any(&taken));
    let seen = run(
        &["tune", "status", "--root", snap.to_str().unwrap()],
        &ssh,
        ours(),
    );
    assert!(
        String::from_utf8_lossy(&seen.stdout).contains("waiting for a reboot"),
        "{}",
        error_of_any(&seen)
    );
    let undo = run(
        &["tune", "undo", "--last", "--yes", "--host", &target],
        &ssh,
        ours(),
    );
    assert_eq!(undo.status.code(), Some(0), "{}", error_of_any(&undo));
    let after = tree(host.path());
    let changed: Vec<String> = differ(&before, &after)
        .into_iter()
        .filter(|p| !p.contains("var/lib/vfio-assistant"))
        .collect();
    assert_eq!(changed, Vec::<String>::new());
}

/// A domain defined, started and destroyed on the other machine's libvirt
/// (`qemu+ssh://`, the connection `--host` gives domain commands).
#[test]
fn a_domain_runs_on_the_other_machines_libvirt() {
    use crate::support::vm;
    use vfio_assistant::libvirt::Hypervisor;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: qemu+ssh to root's libvirt needs root here (CI runs as root)");
        return;
    }
    let Some(hv) = vm::system() else { return };
    if !vm::kvm_guest_possible(1) {
        return;
    }
    let s = sshd();
    let wrapper = ssh_wrapper(&s);
    let w = wrapper.to_str().unwrap();
    let target = format!("ssh://root@127.0.0.1:{}", s.port);
    let name = vm::test_name("over-ssh");
    let _cleanup = vm::Cleanup(&hv, name.clone());
    let xml = vm::bootable_domain(&hv, &name, 1, &[]);
    let file = s.dir.path().join("guest.xml");
    std::fs::write(&file, xml).unwrap();
    let define = run(
        &[
            "domain",
            "define",
            file.to_str().unwrap(),
            "--yes",
            "--no-trial",
            "--host",
            &target,
        ],
        w,
        ours(),
    );
    assert_eq!(define.status.code(), Some(0), "{}", error_of_any(&define));
    let list = run(&["domain", "list", "--json", "--host", &target], w, ours());
    assert!(
        String::from_utf8_lossy(&list.stdout).contains(&name),
        "{}",
        error_of_any(&list)
    );
    let start = run(&["domain", "start", &name, "--host", &target], w, ours());
    assert_eq!(start.status.code(), Some(0), "{}", error_of_any(&start));
    let said = String::from_utf8_lossy(&start.stdout);
    assert!(
        said.contains("is running on qemu+ssh://root@127.0.0.1"),
        "{said}"
    );
    assert_eq!(hv.state(&name).unwrap().label(), "running");
    let off = run(&["domain", "destroy", &name, "--host", &target], w, ours());
    assert_eq!(off.status.code(), Some(0), "{}", error_of_any(&off));
}

fn error_of_any(out: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn error_of(out: &Output) -> String {
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn each_failure_says_what_to_do() {
    let s = sshd();
    let target = s.target(None);
    let good = s.ssh("client", &s.known_hosts());
    // Learn the host key once.
    let ok = run(&["scan", "--json", "--host", &target], &good, ours());
    assert_eq!(ok.status.code(), Some(0), "{}", error_of(&ok));

    let stranger = run(
        &["scan", "--host", &target],
        &s.ssh("stranger", &s.known_hosts()),
        ours(),
    );
    let e = error_of(&stranger);
    assert!(
        e.contains("refused your key") && e.contains("ssh-copy-id"),
        "{e}"
    );

    // The host's key is not the one known before.
    let wrong = s.dir.path().join("known_hosts_wrong");
    let other = std::fs::read_to_string(s.dir.path().join("stranger.pub")).unwrap();
    let key: Vec<&str> = other.split_whitespace().take(2).collect();
    std::fs::write(
        &wrong,
        format!("[127.0.0.1]:{} {} {}\n", s.port, key[0], key[1]),
    )
    .unwrap();
    let changed = run(
        &["scan", "--host", &target],
        &s.ssh("client", &wrong),
        ours(),
    );
    let e = error_of(&changed);
    assert!(
        e.contains("not the one known before")
            && e.contains(&format!("ssh-keygen -R '[127.0.0.1]:{}'", s.port)),
        "{e}"
    );

    // The host's key is not known yet, and ssh is told to ask first.
    let strict = format!(
        "ssh -F none -i {} -o IdentitiesOnly=yes -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes",
        s.dir.path().join("client").display(),
        s.dir.path().join("known_hosts_empty").display()
    );
    let e = error_of(&run(&["scan", "--host", &target], &strict, ours()));
    assert!(
        e.contains("host key is not known yet")
            && e.contains(&format!("ssh -p {} ", s.port))
            && e.contains("check the fingerprint"),
        "{e}"
    );

    let closed = format!("ssh://127.0.0.1:{}", free_port());
    let e = error_of(&run(&["scan", "--host", &closed], &good, ours()));
    assert!(e.contains("cannot be reached"), "{e}");

    let e = error_of(&run(
        &["scan", "--host", &target],
        &good,
        "/nonexistent/vfio-assistant",
    ));
    assert!(
        e.contains("has no vfio-assistant") && e.contains("Install the same package"),
        "{e}"
    );

    let old = s.dir.path().join("old-vfio-assistant");
    script(&old, "#!/bin/sh\necho 'vfio-assistant 0.0.9'\n");
    let e = error_of(&run(
        &["scan", "--host", &target],
        &good,
        old.to_str().unwrap(),
    ));
    assert!(
        e.contains("runs vfio-assistant 0.0.9") && e.contains(env!("CARGO_PKG_VERSION")),
        "{e}"
    );

    let e = error_of(&run(
        &["scan", "--host", "ssh://-oProxyCommand=touch"],
        &good,
        ours(),
    ));
    assert!(e.contains("give ssh://"), "{e}");
}
