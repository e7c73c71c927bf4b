//! The one client of the helper: start it (each face builds the command —
//! pkexec in the app, sudo in the CLI, ssh for another machine, the test
//! build with `--root`), hand it the request, and read what it says back as
//! `HelperReply`s while it runs, then how it ended. Both faces use this; only
//! what they do with each reply and the words for the ending are theirs.

use super::HelperRequest;
use super::reply::HelperReply;
use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};

/// The most of the helper's (or pkexec's, sudo's, ssh's) stderr kept.
const STDERR_CAP: u64 = 64 * 1024;

/// One line the helper printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    Reply(HelperReply),
    /// A line that is none of the replies (shown as it came).
    Unreadable(String),
}

impl Heard {
    /// Read one line.
    pub fn of(line: String) -> Self {
        HelperReply::parse(&line).map_or(Heard::Unreadable(line), Heard::Reply)
    }

    /// The step's progress, when the line is one.
    pub fn progress(&self) -> Option<&crate::tuning::apply::Progress> {
        match self {
            Heard::Reply(HelperReply::Progress(p)) => Some(p),
            _ => None,
        }
    }
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// Its exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    /// What it (or the program that started it) wrote on stderr, capped.
    pub stderr: String,
    /// Whether anything came on stdout: sudo's and pkexec's refusals come
    /// before the helper runs, with nothing there.
    pub spoke: bool,
}

/// Start `cmd` (the helper, or the program that runs it as root), write
/// `request` to its standard input, pass each line it prints to `heard` as
/// it comes, and wait for its end. `Err`: it could not be started (or the
/// request not written as JSON), so nothing ran.
pub fn run(
    mut cmd: Command,
    request: &HelperRequest,
    heard: &mut dyn FnMut(Heard),
) -> std::io::Result<Ended> {
    let input = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that refused before reading it has said why.
        let _ = stdin.write_all(&input);
    }
    let mut spoke = false;
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            spoke = true;
            heard(Heard::of(line));
        }
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.by_ref().take(STDERR_CAP).read_to_string(&mut stderr);
    }
    let code = child.wait()?.code();
    Ok(Ended {
        code,
        stderr,
        spoke,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in that answers as the helper does: its lines arrive typed,
    /// a line that is no reply as it came, then its code and stderr.
    #[test]
    fn lines_arrive_typed_then_the_ending() {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(concat!(
            "read -r req; case \"$req\" in *status*) ;; *) exit 9;; esac; ",
            r#"echo '{"event":"done","step":"thp"}'; echo 'not json'; "#,
            r#"echo '{"error":"no"}'; echo oops >&2; exit 2"#
        ));
        let mut got = Vec::new();
        let end = run(c, &HelperRequest::Status {}, &mut |h| got.push(h)).unwrap();
        assert_eq!(
            got,
            vec![
                Heard::Reply(HelperReply::Progress(
                    crate::tuning::apply::Progress::Done { step: "thp".into() }
                )),
                Heard::Unreadable("not json".into()),
                Heard::Reply(HelperReply::error("no")),
            ]
        );
        assert_eq!(
            end,
            Ended {
                code: Some(2),
                stderr: "oops\n".into(),
                spoke: true
            }
        );
        let missing = run(
            Command::new("/nonexistent/helper"),
            &HelperRequest::Status {},
            &mut |_| {},
        );
        assert!(missing.is_err());
    }
}
