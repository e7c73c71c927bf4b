//! Another machine, reached over the user's SSH: `ssh://[user@]host[:port][/root]`.
//!
//! Reading it runs our own binary there (`vfio-assistant snapshot -`) through
//! the OpenSSH client with the user's keys, `~/.ssh/config` and host-key
//! checking as they set them, and opens the streamed snapshot like a snapshot
//! file: every read-only command (scan, check, doctor, pin) then works on it
//! unchanged. A path after the host names a captured root on that machine
//! (`--root` there). A password is never typed into us: `BatchMode=yes`
//! makes a host that wants one say so instead of asking.
//!
//! The other side must run the same version: a different one is refused
//! with both versions named, never guessed around. Every failure is said in
//! words with what to do (unreachable, key refused, host key changed or
//! unknown, not installed).
//!
//! `VFIO_ASSISTANT_SSH` replaces the `ssh` command (words split on spaces,
//! e.g. `ssh -F /path/config`), `VFIO_ASSISTANT_REMOTE_PROGRAM` the program
//! run there (default `vfio-assistant`): the tests reach a local sshd with
//! them. A one-word `VFIO_ASSISTANT_SSH` (a wrapper's path) is given to
//! libvirt's `qemu+ssh://` too, as its `command=`.
//!
//! Commands that act on the machine itself (tune, monitor, latency, input,
//! a card's ROM) run there: `forward.rs`. `domain` talks to its libvirt
//! over `qemu+ssh://` from here and reads a failed start's QEMU log there.

mod error;
mod forward;
mod live;
mod source;

pub use error::RemoteError;
pub use forward::{Privilege, forwarded_args};
pub use live::{LatencyPair, parse_update};
pub use source::{HostSource, OpenedHost, SourceError};

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

/// Where the host is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// A captured root on that machine, read instead of the machine itself.
    pub root: Option<String>,
    /// How it is reached and what runs there, when not the defaults (or
    /// the environment's, see above): the ssh command's words, our program
    /// there, its helper there. Tests and embedders set them.
    pub via: Via,
}

/// The ssh command and the programs run there, when not the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Via {
    pub ssh: Option<String>,
    pub program: Option<String>,
    pub helper: Option<String>,
}

/// The largest snapshot taken from a remote host (a real one is a few MB).
const MAX_SNAPSHOT_BYTES: u64 = 256 << 20;

/// Said on the snapshot session's error output before the snapshot: the
/// machine's id (`/etc/machine-id`), which names it whatever address
/// reaches it (the app keeps its choices per machine). Not in the snapshot
/// itself: a snapshot goes into bug reports, the id stays here.
const MACHINE_MARK: &str = "vfio-assistant-machine-id:";

/// What fetching a snapshot learnt besides the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetched {
    /// That machine's `/etc/machine-id` (32 hex digits), when it has one
    /// and the machine itself was read (not a captured root there).
    pub machine_id: Option<String>,
}

/// How the version guard there (`same_version_then`) ends when the
/// versions differ: this exit status and this mark before theirs.
const OTHER_VERSION: i32 = 86;
const VERSION_MARK: &str = "vfio-assistant-version-there:";

/// Where the packages put the helper.
pub const HELPER: &str = "/usr/libexec/vfio-assistant/vfio-assistant-helper";

/// The sudoers line that lets `user` tune without a password: exactly what
/// the polkit action allows — the helper, with no arguments (`""`: sudo
/// then refuses any), its request on standard input — and nothing else of
/// ours: never the main program, which takes paths and arguments that
/// choose what it does.
pub fn sudoers_line(user: &str) -> String {
    format!("{user} ALL=(root) NOPASSWD: {HELPER} \"\"")
}

pub(crate) fn helper_line(user: &str, helper: bool) -> String {
    if helper {
        format!(
            ", or let your user run the helper without a password there: the sudoers line `{}` in /etc/sudoers.d/vfio-assistant (visudo -f). {}",
            sudoers_line(user),
            vfio_assistant_core::helper::SUDOERS_ALLOWS
        )
    } else {
        ", or log in as root.".to_string()
    }
}

impl SshTarget {
    /// `ssh://[user@]host[:port][/path]`.
    pub fn parse(s: &str) -> Result<SshTarget, RemoteError> {
        let bad = || RemoteError::BadTarget(s.to_string());
        let rest = s.strip_prefix("ssh://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(&rest[i..])),
            None => (rest, None),
        };
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (
                h,
                Some(p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad)?),
            ),
            _ => (hostport, None),
        };
        let word = |w: &str| {
            !w.is_empty()
                && !w.starts_with('-')
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        };
        if !word(host) || user.is_some_and(|u| !word(u)) {
            return Err(bad());
        }
        let root = path.filter(|p| *p != "/").map(str::to_string);
        if root
            .as_deref()
            .is_some_and(|p| p.contains('\0') || p.contains('\n'))
        {
            return Err(bad());
        }
        Ok(SshTarget {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
            root,
            via: Via::default(),
        })
    }

    /// The address as the user writes it, `ssh://[user@]host[:port][/root]`:
    /// what `parse` reads back to the same target (the app's key for the
    /// choices it keeps per address, the text in its host picker).
    pub fn url(&self) -> String {
        format!(
            "ssh://{}{}",
            self.shown(),
            self.root.as_deref().unwrap_or("")
        )
    }

    /// How it is shown: `user@host:port`.
    pub fn shown(&self) -> String {
        let mut s = String::new();
        if let Some(u) = &self.user {
            s.push_str(u);
            s.push('@');
        }
        s.push_str(&self.host);
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        s
    }

    /// The words after `ssh` (or `ssh-copy-id`) that log in there:
    /// `[-p PORT ]user@host`.
    pub fn login(&self) -> String {
        let mut s = String::new();
        if let Some(p) = self.port {
            s.push_str(&format!("-p {p} "));
        }
        if let Some(u) = &self.user {
            s.push_str(u);
            s.push('@');
        }
        s.push_str(&self.host);
        s
    }

    /// The host's name in known_hosts: `[host]:port` off port 22.
    fn known_name(&self) -> String {
        match self.port {
            Some(p) if p != 22 => format!("[{}]:{p}", self.host),
            _ => self.host.clone(),
        }
    }

    /// The libvirt of that machine, reached through the same SSH:
    /// `qemu+ssh://[user@]host[:port]/system`.
    /// When `VFIO_ASSISTANT_SSH` names one program (a wrapper), libvirt
    /// runs it too (`?command=`).
    pub fn libvirt_uri(&self) -> String {
        let mut uri = format!("qemu+ssh://{}/system", self.shown());
        if let Some(ssh) = self.ssh_words()
            && !ssh.trim().contains(char::is_whitespace)
            && ssh.trim().starts_with('/')
            && ssh
                .trim()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
        {
            uri.push_str("?command=");
            uri.push_str(ssh.trim());
        }
        uri
    }

    pub(crate) fn command(&self, remote: &str) -> Result<Command, RemoteError> {
        self.command_tty(remote, false)
    }

    /// With `tty`, a terminal there (`-t`) on this one's, for sudo to ask
    /// its password on.
    pub(crate) fn command_tty(&self, remote: &str, tty: bool) -> Result<Command, RemoteError> {
        let ssh = self.ssh_words().unwrap_or_else(|| "ssh".into());
        let mut words = ssh.split_whitespace();
        let program = words.next().unwrap_or("ssh");
        let mut c = Command::new(program);
        c.args(words);
        // A connection that goes silent (suspend, a Wi-Fi change) is found
        // dead within a minute, not left hanging for hours.
        c.args([
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=15",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=3",
        ]);
        if let Some(p) = self.port {
            c.args(["-p", &p.to_string()]);
        }
        if let Some(u) = &self.user {
            c.args(["-l", u]);
        }
        if tty {
            c.arg("-t");
        }
        c.arg("--").arg(&self.host).arg(remote);
        c.stdin(if tty { Stdio::inherit() } else { Stdio::null() });
        Ok(c)
    }

    fn ssh_words(&self) -> Option<String> {
        self.via
            .ssh
            .clone()
            .or_else(|| std::env::var("VFIO_ASSISTANT_SSH").ok())
    }

    pub(crate) fn program(&self) -> String {
        self.via
            .program
            .clone()
            .or_else(|| std::env::var("VFIO_ASSISTANT_REMOTE_PROGRAM").ok())
            .unwrap_or_else(|| "vfio-assistant".into())
    }

    /// Run `remote` there; its standard output (at most `limit` bytes).
    pub(crate) fn run(&self, what: &str, remote: &str, limit: u64) -> Result<Vec<u8>, RemoteError> {
        self.run_both(what, remote, limit).map(|(out, _)| out)
    }

    /// Run `remote` there; its standard output (at most `limit` bytes) and
    /// the end of its error output (see `drain_tail`).
    fn run_both(
        &self,
        what: &str,
        remote: &str,
        limit: u64,
    ) -> Result<(Vec<u8>, Vec<u8>), RemoteError> {
        let mut child = self
            .command(remote)?
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| RemoteError::NoSsh(e.to_string()))?;
        let mut out = Vec::new();
        let mut err = Vec::new();
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || stderr.map(drain_tail).unwrap_or_default());
        if let Some(o) = child.stdout.take() {
            let _ = o.take(limit + 1).read_to_end(&mut out);
        }
        if out.len() as u64 > limit {
            let _ = child.kill();
        }
        let status = child
            .wait()
            .map_err(|e| RemoteError::NoSsh(e.to_string()))?;
        if let Ok(e) = reader.join() {
            err = e;
        }
        if out.len() as u64 > limit {
            return Err(RemoteError::Failed {
                host: self.shown(),
                what: what.into(),
                detail: format!("it sent more than {} MiB", limit >> 20),
            });
        }
        if status.success() {
            return Ok((out, err));
        }
        Err(self.classify(what, status.code(), &String::from_utf8_lossy(&err)))
    }

    /// ssh's words (exit 255) and the remote command's (127: not there).
    pub fn classify(&self, what: &str, code: Option<i32>, stderr: &str) -> RemoteError {
        let host = self.shown();
        let detail = stderr
            .lines()
            .map(str::trim)
            .rfind(|l| {
                !l.is_empty() && !l.starts_with("@@@") && !l.starts_with("Warning: Permanently")
            })
            .unwrap_or("no message")
            .to_string();
        let has = |s: &str| stderr.contains(s);
        if code == Some(OTHER_VERSION)
            && let Some(theirs) = stderr
                .lines()
                .find_map(|l| l.trim().strip_prefix(VERSION_MARK))
        {
            return RemoteError::Version {
                host,
                ours: env!("CARGO_PKG_VERSION").into(),
                theirs: theirs.trim().to_string(),
            };
        }
        let login = self.login();
        // ssh's own words only when ssh failed (255, or killed): a program
        // there that ends with "Permission denied" on a device is not a
        // refused key.
        let ssh_failed = matches!(code, Some(255) | None);
        if ssh_failed && has("REMOTE HOST IDENTIFICATION HAS CHANGED") {
            return RemoteError::HostKeyChanged {
                host,
                login,
                known: self.known_name(),
                detail,
            };
        }
        if ssh_failed
            && (has("Host key verification failed")
                || has("No ED25519 host key is known")
                || has("host key is known"))
        {
            return RemoteError::HostKeyUnknown {
                host,
                login,
                detail,
            };
        }
        if ssh_failed && (has("Permission denied") || has("Too many authentication failures")) {
            return RemoteError::KeyRefused {
                host,
                login,
                detail,
            };
        }
        if ssh_failed
            && (has("Could not resolve hostname")
                || has("Connection refused")
                || has("timed out")
                || has("No route to host")
                || has("Network is unreachable")
                || has("Connection closed by")
                || has("kex_exchange_identification"))
        {
            return RemoteError::Unreachable {
                host,
                login,
                detail,
            };
        }
        // The shell there: no such program (127), or not runnable (126).
        if matches!(code, Some(127) | Some(126)) {
            return RemoteError::NotInstalled {
                host,
                ours: env!("CARGO_PKG_VERSION").into(),
                detail,
            };
        }
        RemoteError::Failed {
            host,
            what: what.into(),
            detail,
        }
    }

    /// `line` run there only when our program there is this version: the
    /// check and the command in one session (a new SSH session costs a
    /// handshake). Not there: exit 127 with the shell's words; another
    /// version: `OTHER_VERSION` with it named after `VERSION_MARK`, which
    /// `classify` turns into `RemoteError::Version`.
    pub(crate) fn same_version_then(&self, line: &str) -> String {
        format!(
            "v=$({p} --version) || exit 127; set -- $v; if [ \"$2\" != {ours} ]; then echo \"{VERSION_MARK} ${{2:-unknown}}\" >&2; exit {OTHER_VERSION}; fi; {line}",
            p = quote(&self.program()),
            ours = quote(env!("CARGO_PKG_VERSION")),
        )
    }

    /// The host's snapshot, written to `dest` (a `.tar.gz` to open as a
    /// root), and the machine's id, in one session.
    pub fn fetch_snapshot(&self, dest: &Path) -> Result<Fetched, RemoteError> {
        let mut cmd = String::new();
        if self.root.is_none() {
            cmd.push_str(&format!(
                "echo \"{MACHINE_MARK} $(head -c 64 /etc/machine-id 2>/dev/null)\" >&2; "
            ));
        }
        cmd.push_str(&quote(&self.program()));
        if let Some(r) = &self.root {
            cmd.push_str(&format!(" --root {}", quote(r)));
        }
        cmd.push_str(" snapshot -");
        let (bytes, err) = self.run_both(
            "vfio-assistant snapshot",
            &self.same_version_then(&cmd),
            MAX_SNAPSHOT_BYTES,
        )?;
        // The user's alone from its first byte (0600, nothing already
        // there followed or replaced): it holds that machine's files.
        let kept = vfio_assistant_core::userfile::NewFile::create_private(dest, false)
            .map_err(|e| e.to_string())
            .and_then(|mut f| {
                use std::io::Write;
                f.write_all(&bytes).map_err(|e| e.to_string())?;
                f.commit().map_err(|e| e.to_string())
            });
        kept.map_err(|e| RemoteError::Failed {
            host: self.shown(),
            what: "keeping the snapshot".into(),
            detail: format!("{}: {e}", dest.display()),
        })?;
        Ok(Fetched {
            machine_id: machine_id_in(&String::from_utf8_lossy(&err)),
        })
    }
}

/// The machine id said after `MACHINE_MARK`, when it is one (32 hex digits).
fn machine_id_in(stderr: &str) -> Option<String> {
    let id = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix(MACHINE_MARK))?
        .trim();
    (id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit())).then(|| id.to_ascii_lowercase())
}

/// Everything `r` gives, read to its end (a writer is never left blocked on
/// a full pipe), keeping the last 64 KiB: ssh's and the program's last words.
pub(crate) fn drain_tail(mut r: impl Read) -> Vec<u8> {
    const KEEP: usize = 64 * 1024;
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * KEEP {
            kept.drain(..kept.len() - KEEP);
        }
    }
    if kept.len() > KEEP {
        kept.drain(..kept.len() - KEEP);
    }
    kept
}

/// One word for the remote shell.
pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests;
