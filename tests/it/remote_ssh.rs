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
use std::process::{Child, Command, Output};

struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen (Debian openssh-client) must be installed: scripts/setup.sh test");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sshd() -> Sshd {
    let sshd = Path::new("/usr/sbin/sshd");
    assert!(
        sshd.exists(),
        "/usr/sbin/sshd (Debian openssh-server) must be installed: scripts/setup.sh test"
    );
    // sshd started as root wants its privilege separation folder.
    if rustix::process::geteuid().is_root() && !Path::new("/run/sshd").exists() {
        std::fs::create_dir_all("/run/sshd").unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    keygen(&d.join("hostkey"));
    keygen(&d.join("client"));
    keygen(&d.join("stranger"));
    std::fs::copy(d.join("client.pub"), d.join("authorized_keys")).unwrap();
    let port = free_port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nMaxAuthTries 3\n",
        d = d.display()
    );
    std::fs::write(d.join("sshd_config"), config).unwrap();
    let child = Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(d.join("sshd_config"))
        .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
        .spawn()
        .unwrap();
    let s = Sshd { child, dir, port };
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!(
        "sshd did not listen: {}",
        std::fs::read_to_string(s.dir.path().join("sshd.log")).unwrap_or_default()
    );
}

impl Sshd {
    fn target(&self, root: Option<&Path>) -> String {
        let user = rustix::process::getuid().as_raw();
        let name = users_name(user);
        let mut t = format!("ssh://{name}@127.0.0.1:{}", self.port);
        if let Some(r) = root {
            t.push_str(&r.display().to_string());
        }
        t
    }

    fn ssh(&self, key: &str, known_hosts: &Path) -> String {
        format!(
            "ssh -F none -i {} -o IdentitiesOnly=yes -o UserKnownHostsFile={} -o StrictHostKeyChecking=accept-new",
            self.dir.path().join(key).display(),
            known_hosts.display()
        )
    }

    fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }
}

fn users_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.get(2) == Some(&uid.to_string().as_str())).then(|| f[0].to_string())
        })
        .unwrap()
}

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

/// The JSON without the root's own name (a path here, a snapshot there).
fn without_root(out: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)));
    if let Some(o) = v.as_object_mut() {
        o.remove("root");
    }
    v
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
    // A command that changes a host is not taken over SSH (yet): it says so.
    let t = run(&["tune", "status", "--host", &target], &ssh, ours());
    assert_eq!(t.status.code(), Some(2), "{t:?}");
    assert!(
        String::from_utf8_lossy(&t.stderr).contains("run vfio-assistant on it"),
        "{t:?}"
    );
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
    assert!(e.contains("host key") && e.contains("ssh-keygen -R"), "{e}");

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
    std::fs::write(&old, "#!/bin/sh\necho 'vfio-assistant 0.0.9'\n").unwrap();
    std::fs::set_permissions(
        &old,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
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
