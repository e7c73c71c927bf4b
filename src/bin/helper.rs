//! `vfio-assistant-helper`: the only code that runs as root (started by
//! pkexec for the app's one-click tuning). One request on stdin, one JSON
//! line per step on stdout, the exit code last: 0 done, 1 rolled back, 2
//! refused with nothing changed. See docs/helper-protocol.md.

use std::process::ExitCode;
use vfio_assistant::helper::{HelperEnv, Refusal, read_request, serve};
use vfio_assistant::sysroot::HostRoot;

fn refuse(why: &str) -> ExitCode {
    println!("{}", serde_json::json!({ "error": why }));
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut root = None;
    let mut journal = None;
    let mut fail_at = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--root", Some(d)) => root = Some(d),
            ("--journal", Some(d)) => journal = Some(std::path::PathBuf::from(d)),
            ("--fail-at", Some(n)) => match n.parse::<usize>() {
                Ok(n) => fail_at = Some(n),
                Err(_) => return refuse(&format!("--fail-at takes a step number, not {n:?}")),
            },
            _ => {
                return refuse(&format!(
                    "unknown argument {a:?}: the helper takes --root DIR, --journal DIR and --fail-at N (tests only)"
                ));
            }
        }
    }
    let pkexec = std::env::var_os("PKEXEC_UID").is_some();
    if pkexec && (root.is_some() || journal.is_some() || fail_at.is_some()) {
        return refuse(&Refusal::RootUnderPkexec.to_string());
    }
    // A failure on purpose (to show the rollback) only ever on a test tree.
    if fail_at.is_some() && root.is_none() {
        return refuse("--fail-at is for tests on a --root tree, never the live host");
    }
    let req = match read_request(&mut std::io::stdin().lock()) {
        Ok(r) => r,
        Err(e) => return refuse(&e.to_string()),
    };
    let env = HelperEnv {
        root: root.map_or_else(HostRoot::live, HostRoot::at),
        journal,
        fail_at,
        asking_uid: std::env::var("PKEXEC_UID")
            .ok()
            .and_then(|u| u.trim().parse().ok()),
    };
    let code = serve(&env, &req, &mut |line| println!("{line}"));
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}
