//! Commands that act on the other machine itself — tuning it, watching it
//! live, measuring its timers, its keyboards — run there: our own program,
//! with the user's words (`--host` taken out), its output streamed back as it
//! comes and its exit code kept. The journal, the helper and the boot files
//! are the remote's own, so an apply started from here is undone from
//! either side, and a connection dropped mid-apply is the power cut the
//! journal already survives (the next `tune status` says where it stopped).
//!
//! What needs root there gets it the way the login has it: the login is
//! root; `sudo -n` where no password is asked; plain `sudo` on a terminal
//! there (`ssh -t`) when this side has one to type it in; otherwise refused
//! with the sudoers line that allows it.

use super::{RemoteError, SshTarget, quote};
use std::io::{IsTerminal, Read, Write};
use std::process::Stdio;

/// Whether the command changes the machine (root there) or only reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privilege {
    User,
    Root,
    /// As the login, with a terminal there when this side has one: the
    /// program there hands root's part to its helper through sudo, which
    /// may ask on that terminal (or not, with the helper's sudoers line).
    Helper,
}

/// How this login has root there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    /// It is root.
    Is,
    /// sudo without a password.
    SudoNoPassword,
    /// sudo asks a password.
    SudoAsks,
    /// No sudo at all.
    NoSudo,
}

const HOW_ROOT: &str = "if [ \"$(id -u)\" = 0 ]; then echo root; \
elif ! command -v sudo >/dev/null 2>&1; then echo nosudo; \
elif sudo -n true >/dev/null 2>&1; then echo nopassword; else echo asks; fi; id -un";

/// The words the user gave, without `--host X` (the program's name too).
pub fn forwarded_args(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args.into_iter().skip(1) {
        let a = a.into_string().map_err(|a| {
            anyhow::anyhow!("{a:?} is not UTF-8: it cannot be sent to the other machine")
        })?;
        if skip {
            skip = false;
            continue;
        }
        if a == "--host" {
            skip = true;
            continue;
        }
        if a.starts_with("--host=") {
            continue;
        }
        out.push(a);
    }
    Ok(out)
}

impl SshTarget {
    fn how_root(&self) -> Result<(Root, String), RemoteError> {
        let out = self.run("asking how root is had", HOW_ROOT, 4096)?;
        let text = String::from_utf8_lossy(&out);
        let mut lines = text.lines().map(str::trim);
        let how = match lines.next() {
            Some("root") => Root::Is,
            Some("nopassword") => Root::SudoNoPassword,
            Some("asks") => Root::SudoAsks,
            _ => Root::NoSudo,
        };
        Ok((how, lines.next().unwrap_or("you").to_string()))
    }

    /// The shell command that runs our program there with `args`, after
    /// `sudo` (the way to root, or nothing).
    pub(super) fn remote_line(&self, args: &[String], sudo: &str) -> String {
        let mut line = String::from(sudo);
        line.push_str(&quote(&self.program()));
        if let Some(r) = &self.root {
            line.push_str(" --root ");
            line.push_str(&quote(r));
        }
        for a in args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        line
    }

    /// Our program there with `args` after `sudo`, run only when it is
    /// this version (one session: see `same_version_then`).
    pub(super) fn ours_there(&self, args: &[String], sudo: &str) -> String {
        self.same_version_then(&self.remote_line(args, sudo))
    }

    /// How to get root there for this run: the prefix and whether a
    /// terminal is needed. A captured root there needs none.
    pub(super) fn sudo_prefix(
        &self,
        privilege: Privilege,
        interactive: bool,
    ) -> Result<(&'static str, bool), RemoteError> {
        if privilege == Privilege::User || self.root.is_some() {
            return Ok(("", false));
        }
        if privilege == Privilege::Helper {
            // Root there is the helper's, through sudo: said at once when
            // there is none (a user login and no sudo cannot change it).
            let (how, user) = self.how_root()?;
            return match how {
                Root::NoSudo => self.prefix_for(how, user, interactive),
                _ => Ok(("", interactive)),
            };
        }
        let (how, user) = self.how_root()?;
        self.prefix_for(how, user, interactive)
    }

    fn prefix_for(
        &self,
        how: Root,
        user: String,
        interactive: bool,
    ) -> Result<(&'static str, bool), RemoteError> {
        match how {
            Root::Is => Ok(("", false)),
            Root::SudoNoPassword => Ok(("sudo -n ", false)),
            Root::SudoAsks if interactive => Ok(("sudo ", true)),
            Root::SudoAsks => Err(RemoteError::SudoPassword {
                host: self.shown(),
                user,
                helper: false,
            }),
            Root::NoSudo => Err(RemoteError::NoSudo {
                host: self.shown(),
                name: self.host.clone(),
            }),
        }
    }

    /// The end of a domain's QEMU log there (root's to read: the login's
    /// own when it is root, else sudo without a password), None when it
    /// cannot be read.
    pub fn qemu_log(&self, domain: &str) -> Option<String> {
        let file = quote(&format!("/var/log/libvirt/qemu/{domain}.log"));
        let line = format!(
            "if [ \"$(id -u)\" = 0 ]; then tail -c 262144 {file}; else sudo -n tail -c 262144 {file}; fi"
        );
        let out = self.run("reading the QEMU log", &line, 512 * 1024).ok()?;
        Some(String::from_utf8_lossy(&out).into_owned())
    }

    /// The privileged helper there, as the app runs it: the request on its
    /// standard input, its progress lines on its output, exactly as
    /// locally. Root as the login has it without a terminal (root, or
    /// `sudo -n`: a password asked ends it with sudo's words, which
    /// `helper_words` turns into what to do). A captured root there is
    /// written as the login. `VFIO_ASSISTANT_REMOTE_HELPER` names another
    /// helper (tests).
    pub fn helper_command(&self) -> Result<std::process::Command, RemoteError> {
        let named = self
            .via
            .helper
            .clone()
            .or_else(|| std::env::var("VFIO_ASSISTANT_REMOTE_HELPER").ok());
        let helper = match named {
            Some(h) => format!("h={}; ", quote(&h)),
            None => "h=/usr/libexec/vfio-assistant/vfio-assistant-helper; \
[ -x \"$h\" ] || h=/usr/lib/vfio-assistant/vfio-assistant-helper; "
                .to_string(),
        };
        let line = match &self.root {
            Some(r) => format!("{helper}exec \"$h\" --root {}", quote(r)),
            None => format!(
                "{helper}if [ \"$(id -u)\" = 0 ]; then exec \"$h\"; else exec sudo -n \"$h\"; fi"
            ),
        };
        let mut c = self.command(&line)?;
        c.stdin(Stdio::piped());
        Ok(c)
    }

    /// How a helper run there ended, in words, when it was not the
    /// helper's own ending: ssh failed (255), sudo wanted a password, no
    /// helper there.
    pub fn helper_words(&self, code: Option<i32>, stderr: &str) -> Option<String> {
        if stderr.contains("a password is required") || stderr.contains("a terminal is required") {
            let user = self.user.clone().unwrap_or_else(|| "you".into());
            return Some(
                RemoteError::SudoPassword {
                    host: self.shown(),
                    user,
                    helper: true,
                }
                .to_string(),
            );
        }
        match code {
            Some(255) | Some(127) => Some(self.classify("the helper", code, stderr).to_string()),
            _ => None,
        }
    }

    /// Run our program there with `args`: its output here as it comes, its
    /// exit code returned. ssh's own failures (exit 255) come back in words.
    pub fn forward(&self, args: &[String], privilege: Privilege) -> Result<i32, RemoteError> {
        let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        let (sudo, tty) = self.sudo_prefix(privilege, interactive)?;
        if tty {
            // On a terminal there, the program's words come back on this
            // side's terminal, not to us: the version is checked apart.
            self.run(
                "vfio-assistant --version",
                &self.same_version_then("true"),
                4096,
            )?;
        }
        let line = self.ours_there(args, sudo);
        let mut child = self
            .command_tty(&line, tty)?
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| RemoteError::NoSsh(e.to_string()))?;
        // Its errors are shown as they come, and the last of them kept to
        // say what went wrong when ssh itself failed.
        let mut kept = Vec::new();
        if let Some(mut err) = child.stderr.take() {
            let mut buf = [0u8; 8192];
            let mut shown = std::io::stderr();
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let _ = shown.write_all(&buf[..n]);
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 64 * 1024 {
                    kept.drain(..kept.len() - 32 * 1024);
                }
            }
        }
        let status = child
            .wait()
            .map_err(|e| RemoteError::NoSsh(e.to_string()))?;
        match status.code() {
            Some(c @ (255 | 127 | super::OTHER_VERSION)) => {
                let kept = String::from_utf8_lossy(&kept);
                match self.classify("the command", Some(c), &kept) {
                    // The program there ran and ended so (its own words shown).
                    RemoteError::Failed { .. } if c != 255 => Ok(c),
                    e => Err(e),
                }
            }
            Some(c) => Ok(c),
            // Killed by a signal (the connection's end): like a cut.
            None => Err(RemoteError::Failed {
                host: self.shown(),
                what: "the command".into(),
                detail: "the connection ended before the command did; what it changed is in that machine's journal (vfio-assistant --host … tune status)".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_taken_out_of_the_words_sent() {
        let a = forwarded_args(
            [
                "vfio-assistant",
                "--host",
                "ssh://x",
                "tune",
                "apply",
                "--host=ssh://y",
                "--yes",
            ]
            .map(std::ffi::OsString::from),
        )
        .unwrap();
        assert_eq!(a, ["tune", "apply", "--yes"]);
    }

    #[test]
    fn the_line_sent_quotes_every_word_and_names_a_captured_root() {
        let t = SshTarget::parse("ssh://anna@server/srv/captured host").unwrap();
        let line = t.remote_line(
            &["tune".into(), "plan".into(), "--gpu".into(), "$(x)".into()],
            "",
        );
        assert!(
            line.ends_with("--root '/srv/captured host' 'tune' 'plan' '--gpu' '$(x)'"),
            "{line}"
        );
        assert_eq!(t.libvirt_uri(), "qemu+ssh://anna@server/system");
        // A captured root there is written as the login, never through sudo.
        assert_eq!(t.sudo_prefix(Privilege::Root, false).unwrap(), ("", false));
    }

    #[test]
    fn root_is_had_the_way_the_login_has_it() {
        let t = SshTarget::parse("ssh://anna@server").unwrap();
        let who = || "anna".to_string();
        assert_eq!(t.prefix_for(Root::Is, who(), false).unwrap(), ("", false));
        assert_eq!(
            t.prefix_for(Root::SudoNoPassword, who(), false).unwrap(),
            ("sudo -n ", false)
        );
        assert_eq!(
            t.prefix_for(Root::SudoAsks, who(), true).unwrap(),
            ("sudo ", true)
        );
        let e = t.prefix_for(Root::SudoAsks, who(), false).unwrap_err();
        let said = e.to_string();
        // The main program is never offered to sudo without a password.
        assert!(
            said.contains("asks for a password") && !said.contains("NOPASSWD"),
            "{said}"
        );
        let h = t
            .helper_words(Some(1), "sudo: a password is required")
            .unwrap();
        assert!(
            h.contains(
                r#"anna ALL=(root) NOPASSWD: /usr/libexec/vfio-assistant/vfio-assistant-helper """#
            ),
            "{h}"
        );
        let e = t.prefix_for(Root::NoSudo, who(), false).unwrap_err();
        assert!(e.to_string().contains("ssh://root@server"), "{e}");
    }
}
