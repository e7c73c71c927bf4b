//! A reader that goes away (`vfio-assistant … | head -1`): every command
//! ends quietly, exit 0 as ripgrep does, never "failed printing to stdout:
//! Broken pipe" from a panic — with stdout closed before the first line, after
//! the first line, and with stderr closed as well.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

/// Commands with their output, long and short, text and JSON.
const COMMANDS: &[&[&str]] = &[
    &["scan", "--demo"],
    &["scan", "--json", "--demo"],
    &["check", "--demo", "--verbose"],
    &["check", "--json", "--demo"],
    &["doctor", "--list"],
    &["doctor", "--list", "--json"],
    &["doctor", "stutter", "--json", "--demo"],
    &["doctor", "--demo"],
    &["pin", "--vcpus", "4", "--demo"],
    &["pin", "--vcpus", "4", "--json", "--demo"],
    &["domain", "list", "--demo"],
    &["domain", "list", "--json", "--demo"],
    &[
        "monitor",
        "--demo",
        "--interval-ms",
        "50",
        "--duration-s",
        "1",
    ],
    &[
        "monitor",
        "--json",
        "--demo",
        "--interval-ms",
        "50",
        "--duration-s",
        "1",
    ],
    &["latency", "--cpus", "0", "--duration-s", "1"],
    &["--help"],
    // Not written through cli::out yet: main catches println!'s panic.
    &[
        "rom",
        "--file",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/roms/efi-virtio.rom"
        ),
        "--json",
    ],
];

fn spawn(args: &[&str], stderr: Stdio) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Waits for the command; what is wrong with how it ended, if anything:
/// a panic, or an exit code other than 0 or `also` (the command's own, when
/// its output fit in the pipe before the reader left).
fn ended_quietly(
    args: &[&str],
    mut child: std::process::Child,
    also: Option<i32>,
) -> Result<(), String> {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    let status = child.wait().unwrap();
    if err.contains("panicked") || err.contains("Broken pipe") {
        return Err(format!("{args:?}: {err}"));
    }
    if status.code() != Some(0) && status.code() != also {
        return Err(format!("{args:?}: exit {status:?}: {err}"));
    }
    Ok(())
}

#[test]
fn a_pipe_closed_before_the_first_line_ends_each_command_quietly() {
    let wrong: Vec<String> = COMMANDS
        .iter()
        .filter_map(|args| {
            let mut child = spawn(args, Stdio::piped());
            drop(child.stdout.take());
            ended_quietly(args, child, None).err()
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_pipe_closed_after_the_first_line_ends_each_command_quietly() {
    let wrong: Vec<String> = COMMANDS
        .iter()
        .filter_map(|args| {
            let own = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
                .args(*args)
                .output()
                .unwrap()
                .status
                .code();
            let mut child = spawn(args, Stdio::piped());
            // Like `| head -1`.
            let mut first = String::new();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            out.read_line(&mut first).unwrap();
            drop(out);
            ended_quietly(args, child, own).err()
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn with_stderr_closed_too_the_exit_is_still_quiet() {
    // `2>&1 | head -1`: nowhere to say anything, and no panic's exit 101.
    let wrong: Vec<String> = COMMANDS
        .iter()
        .filter_map(|args| {
            let mut child = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
                .args(*args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            drop(child.stdout.take());
            drop(child.stderr.take());
            let status = child.wait().unwrap();
            (status.code() != Some(0)).then(|| format!("{args:?}: {status:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
