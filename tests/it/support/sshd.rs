//! A real OpenSSH server for the tests: our own sshd on 127.0.0.1 on a
//! port of its own, a throwaway host key and client keys, logging in as
//! this user (keys only, no PAM).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

pub struct Sshd {
    child: Child,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn keygen(path: &Path) {
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

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn sshd() -> Sshd {
    sshd_with(None)
}

/// With the sessions' PATH set to `path` (a stand-in sudo, or none).
pub fn sshd_with(path: Option<&str>) -> Sshd {
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
    // sshd reads the keys as the user logging in: the second user too.
    std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    keygen(&d.join("hostkey"));
    keygen(&d.join("client"));
    keygen(&d.join("stranger"));
    std::fs::copy(d.join("client.pub"), d.join("authorized_keys")).unwrap();
    std::fs::set_permissions(
        d.join("authorized_keys"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let port = free_port();
    let mut config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nMaxAuthTries 3\n",
        d = d.display()
    );
    if let Some(p) = path {
        config.push_str(&format!("SetEnv PATH={p}\n"));
    }
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
    pub fn target(&self, root: Option<&Path>) -> String {
        let user = rustix::process::getuid().as_raw();
        self.target_as(&users_name(user), root)
    }

    /// Logging in as `name`.
    pub fn target_as(&self, name: &str, root: Option<&Path>) -> String {
        let mut t = format!("ssh://{name}@127.0.0.1:{}", self.port);
        if let Some(r) = root {
            t.push_str(&r.display().to_string());
        }
        t
    }

    pub fn ssh(&self, key: &str, known_hosts: &Path) -> String {
        format!(
            "ssh -F none -i {} -o IdentitiesOnly=yes -o UserKnownHostsFile={} -o StrictHostKeyChecking=accept-new",
            self.dir.path().join(key).display(),
            known_hosts.display()
        )
    }

    pub fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }
}

pub fn users_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.get(2) == Some(&uid.to_string().as_str())).then(|| f[0].to_string())
        })
        .unwrap()
}

/// An executable script at `path` (a wrapper, a stand-in program).
pub fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
