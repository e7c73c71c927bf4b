//! The helper's arguments as built: a build for users takes none (the
//! request on stdin is all it is told, so the sudoers line and the polkit
//! action allow exactly that); the tests' build (`--features test-hooks`)
//! knows --root, --journal, --fail-at and --pause-at and nothing else. This
//! crate's own test, so that `cargo test` at the workspace root builds the
//! helper's binary with the features asked for (the app's integration tests
//! in tests/it drive that binary).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::io::Write;
use std::process::{Command, Stdio};

fn helper(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vfio-assistant-helper"))
        .args(args)
        .env_remove("PKEXEC_UID")
        .env_remove("SUDO_UID")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Nothing on stdin: a refused argument must be said before any request.
    drop(child.stdin.take().map(|mut s| s.write_all(b"")));
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn an_unknown_argument_is_refused_with_nothing_done() {
    let (code, out) = helper(&["--config", "/tmp/x"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("unknown argument \\\"--config\\\""), "{out}");
}

#[cfg(not(feature = "test-hooks"))]
#[test]
fn a_build_for_users_takes_no_test_hook() {
    for flag in ["--root", "--journal", "--fail-at", "--pause-at"] {
        let (code, out) = helper(&[flag, "1"]);
        assert_eq!(code, Some(2), "{flag}: {out}");
        assert!(
            out.contains("the helper takes no arguments"),
            "{flag}: {out}"
        );
    }
}

#[cfg(feature = "test-hooks")]
#[test]
fn the_tests_build_knows_its_hooks() {
    let (code, out) = helper(&["--fail-at", "many"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("--fail-at takes a step number"), "{out}");
}
