//! `vfio-assistant-helper`: the only code that runs as root (started by
//! pkexec for the app's one-click tuning). One request on stdin, one JSON
//! line per step on stdout, the exit code last: 0 done, 1 rolled back, 2
//! refused with nothing changed. See docs/helper-protocol.md.

use std::process::ExitCode;
use vfio_assistant_core::helper::{HelperEnv, read_request, serve};
use vfio_assistant_core::sysroot::HostRoot;

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

/// What the tests may tell the helper; nothing else can be told to it.
#[derive(Default)]
struct TestHooks {
    root: Option<String>,
    journal: Option<std::path::PathBuf>,
    fail_at: Option<usize>,
    pause_at: Option<usize>,
}

/// Whether someone else's privilege runs us: pkexec, sudo, a setuid bit.
/// The test hooks are refused then even in a test build.
#[cfg(feature = "test-hooks")]
fn lent_privilege() -> bool {
    std::env::var_os("PKEXEC_UID").is_some()
        || std::env::var_os("SUDO_UID").is_some()
        || rustix::process::getuid() != rustix::process::geteuid()
}

/// The arguments. A build for users (without the `test-hooks` feature)
/// takes none at all: the request on stdin is everything the helper is
/// told, so the sudoers line and the polkit action allow exactly that.
/// (A compile-time switch, not a runtime check: a check can be forgotten
/// or talked around, code that is not there cannot run.)
#[cfg(not(feature = "test-hooks"))]
fn test_hooks() -> Result<TestHooks, String> {
    match std::env::args().nth(1) {
        None => Ok(TestHooks::default()),
        Some(a) => Err(format!(
            "unknown argument {a:?}: the helper takes no arguments, only one request on its standard input (docs/helper-protocol.md)"
        )),
    }
}

#[cfg(feature = "test-hooks")]
fn test_hooks() -> Result<TestHooks, String> {
    let mut h = TestHooks::default();
    let mut args = std::env::args().skip(1);
    let number = |flag: &str, n: String| {
        n.parse::<usize>()
            .map_err(|_| format!("{flag} takes a step number, not {n:?}"))
    };
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--root", Some(d)) => h.root = Some(d),
            ("--journal", Some(d)) => h.journal = Some(std::path::PathBuf::from(d)),
            ("--fail-at", Some(n)) => h.fail_at = Some(number("--fail-at", n)?),
            ("--pause-at", Some(n)) => h.pause_at = Some(number("--pause-at", n)?),
            _ => {
                return Err(format!(
                    "unknown argument {a:?}: this test build takes --root DIR, --journal DIR, --fail-at N and --pause-at N"
                ));
            }
        }
    }
    let any =
        h.root.is_some() || h.journal.is_some() || h.fail_at.is_some() || h.pause_at.is_some();
    if any && lent_privilege() {
        return Err(vfio_assistant_core::helper::Refusal::RootUnderPkexec.to_string());
    }
    // A failure on purpose (to show the rollback) only ever on a test tree.
    if (h.fail_at.is_some() || h.pause_at.is_some()) && h.root.is_none() {
        return Err(
            "--fail-at and --pause-at are for tests on a --root tree, never the live host".into(),
        );
    }
    Ok(h)
}

/// The user who asked for root: pkexec's PKEXEC_UID, or sudo's SUDO_UID
/// (both set by the program that gave us root, not by the caller).
fn asking_uid() -> Option<u32> {
    ["PKEXEC_UID", "SUDO_UID"]
        .iter()
        .find_map(|k| std::env::var(k).ok())
        .and_then(|u| u.trim().parse().ok())
}

fn main() -> ExitCode {
    let hooks = match test_hooks() {
        Ok(h) => h,
        Err(why) => return refuse(&why),
    };
    let req = match read_request(&mut std::io::stdin().lock()) {
        Ok(r) => r,
        Err(e) => return refuse(&e.to_string()),
    };
    let env = HelperEnv {
        root: hooks.root.map_or_else(HostRoot::live, HostRoot::at),
        journal: hooks.journal,
        fail_at: hooks.fail_at,
        pause_at: hooks.pause_at,
        asking_uid: asking_uid(),
    };
    vfio_assistant_core::tuning::apply::keep_on_hangup();
    let code = serve(&env, &req, &mut |line| say(&line));
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}
