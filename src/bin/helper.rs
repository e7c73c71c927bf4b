//! `vfio-assistant-helper`: the only code that runs as root (started by
//! pkexec for the app's one-click tuning). One request on stdin, one JSON
//! line per step on stdout, the exit code last: 0 done, 1 rolled back, 2
//! refused with nothing changed. See docs/helper-protocol.md.

use std::process::ExitCode;
use vfio_assistant::helper::{HelperEnv, Refusal, read_request, serve};
use vfio_assistant::sysroot::HostRoot;

use std::io::Write;

/// One line out; a reader that went away (the app closed, the SSH
/// connection dropped) does not stop the helper: what it started runs to
/// its end and the journal says how it ended.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn refuse(why: &str) -> ExitCode {
    say(&serde_json::json!({ "error": why }).to_string());
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut root = None;
    let mut journal = None;
    let mut fail_at = None;
    let mut pause_at = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--root", Some(d)) => root = Some(d),
            ("--journal", Some(d)) => journal = Some(std::path::PathBuf::from(d)),
            ("--fail-at", Some(n)) => match n.parse::<usize>() {
                Ok(n) => fail_at = Some(n),
                Err(_) => return refuse(&format!("--fail-at takes a step number, not {n:?}")),
            },
            ("--pause-at", Some(n)) => match n.parse::<usize>() {
                Ok(n) => pause_at = Some(n),
                Err(_) => return refuse(&format!("--pause-at takes a step number, not {n:?}")),
            },
            _ => {
                return refuse(&format!(
                    "unknown argument {a:?}: the helper takes --root DIR, --journal DIR, and --fail-at N and --pause-at N (tests only)"
                ));
            }
        }
    }
    let pkexec = std::env::var_os("PKEXEC_UID").is_some();
    let testing = fail_at.is_some() || pause_at.is_some();
    if pkexec && (root.is_some() || journal.is_some() || testing) {
        return refuse(&Refusal::RootUnderPkexec.to_string());
    }
    // A failure on purpose (to show the rollback) only ever on a test tree.
    if testing && root.is_none() {
        return refuse(
            "--fail-at and --pause-at are for tests on a --root tree, never the live host",
        );
    }
    let req = match read_request(&mut std::io::stdin().lock()) {
        Ok(r) => r,
        Err(e) => return refuse(&e.to_string()),
    };
    let env = HelperEnv {
        root: root.map_or_else(HostRoot::live, HostRoot::at),
        journal,
        fail_at,
        pause_at,
        asking_uid: std::env::var("PKEXEC_UID")
            .ok()
            .and_then(|u| u.trim().parse().ok()),
    };
    vfio_assistant::tuning::apply::keep_on_hangup();
    let code = serve(&env, &req, &mut |line| say(&line));
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}
