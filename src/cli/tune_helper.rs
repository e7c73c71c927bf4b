//! `tune apply` and `tune undo` by a user on the live host: the change is
//! root's, so the request goes to the privileged helper through sudo —
//! `sudo` on a terminal (it asks there, or not at all with the sudoers
//! line), `sudo -n` without one (over SSH from another machine) — exactly
//! as the app sends it through pkexec. The helper takes nothing but that
//! closed request on its standard input; its progress lines are printed as
//! the CLI's own. A sudo that wants a password and has no terminal to ask
//! on is said with the one sudoers line that allows the helper.

use super::out::{errln, outln};
use crate::helper::HelperRequest;
use crate::tuning::apply::Progress;
use std::io::{BufRead, IsTerminal, Write};
use std::process::{Command, Stdio};

/// Whether this process is root (then it applies itself).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Send `req` to the helper through sudo; the helper's exit code.
pub fn run(req: &HelperRequest, json: bool) -> anyhow::Result<i32> {
    let helper = crate::helper::helper_path();
    let terminal = std::io::stdin().is_terminal();
    // sudo from the system's folders, never one of the caller's PATH.
    let mut c = Command::new(crate::syspath::program("sudo"));
    if !terminal {
        c.arg("-n");
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "you".into());
    let spawned = c
        .arg(&helper)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(ch) => ch,
        Err(e) => {
            anyhow::bail!(
                "changing the host needs root, and sudo could not be run ({e}): run this as root"
            )
        }
    };
    let input = serde_json::to_vec(req)?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&input);
    }
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            print_line(&line, json);
        }
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.by_ref().take(64 * 1024).read_to_string(&mut err);
    }
    let code = child.wait()?.code();
    if err.contains("a password is required") || err.contains("a terminal is required") {
        anyhow::bail!(
            "sudo asks for a password, and there is no terminal to type it in. Run the same command in a terminal (sudo asks there), or let your user run the helper without a password: the sudoers line `{}` in /etc/sudoers.d/vfio-assistant (visudo -f). {}",
            crate::remote::sudoers_line(&user),
            crate::helper::SUDOERS_ALLOWS
        );
    }
    match code {
        Some(c @ 0..=2) => Ok(c),
        _ => {
            let last = err.lines().last().unwrap_or("").trim();
            anyhow::bail!(
                "the helper ({}) did not run through sudo: {}",
                helper.display(),
                if last.is_empty() {
                    "no reason given"
                } else {
                    last
                }
            )
        }
    }
}

/// One of the helper's lines, as `tune` prints its own.
fn print_line(line: &str, json: bool) {
    if json {
        let _ = outln!("{line}");
        return;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        let _ = outln!("{line}");
        return;
    };
    if let Ok(p) = serde_json::from_value::<Progress>(v.clone()) {
        let _ = outln!("{}", super::tune_text::progress_line(&p));
    } else if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        errln!("vfio-assistant tune: {e}");
    } else if let Some(r) = v.get("result") {
        let state = r.get("state").and_then(|s| s.as_str()).unwrap_or("done");
        let id = r.get("id").and_then(|s| s.as_str()).unwrap_or("");
        let _ = outln!("{} {id}", state.replace('_', " "));
        if let Some(f) = r.get("failure").and_then(|f| f.as_str()) {
            let _ = outln!("  because: {f}");
        }
        if r.get("needs_reboot").and_then(|b| b.as_bool()) == Some(true) {
            let _ = outln!("Reboot for the boot changes to take effect.");
        }
    }
}
