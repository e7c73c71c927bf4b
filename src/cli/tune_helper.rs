//! `tune apply` and `tune undo` by a user on the live host: the change is
//! root's, so the request goes to the privileged helper through sudo —
//! `sudo` on a terminal (it asks there, or not at all with the sudoers
//! line), `sudo -n` without one (over SSH from another machine) — exactly
//! as the app sends it through pkexec. The helper takes nothing but that
//! closed request on its standard input; its progress lines are printed as
//! the CLI's own. A sudo that wants a password and has no terminal to ask
//! on is said with the one sudoers line that allows the helper.

use super::out::{errln, outln};
use crate::helper::client::{self, Heard};
use crate::helper::{HelperReply, HelperRequest, ReplyResult};
use std::io::IsTerminal;
use std::process::Command;

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
    c.arg(&helper);
    let user = std::env::var("USER").unwrap_or_else(|_| "you".into());
    let ended = match client::run(c, req, &mut |h| print_heard(&h, json)) {
        Ok(e) => e,
        Err(e) => {
            anyhow::bail!(
                "changing the host needs root, and sudo could not be run ({e}): run this as root"
            )
        }
    };
    // Whether the helper itself spoke: sudo's refusals come before it runs.
    ending(
        ended.code,
        &ended.stderr,
        ended.spoke,
        &user,
        &helper.display().to_string(),
    )
    .map_err(|words| anyhow::anyhow!(words))
}

/// How sudo and the helper ended: the helper's own code (0 done, 1 rolled
/// back, 2 refused: its lines said the rest), or sudo's refusal in words.
/// sudo exits 1 when it refuses, as the helper does when it rolls back: a
/// run where the helper printed nothing and sudo spoke on stderr is sudo's.
/// Its words (sudo 1.9's sudoers plugin): "N incorrect password attempts",
/// "no password was provided" (the prompt answered with nothing), "a
/// password is required" (`-n`), "a terminal is required…", "… is not in the
/// sudoers file", "Sorry, user … is not allowed to execute …".
fn ending(
    code: Option<i32>,
    err: &str,
    helper_spoke: bool,
    user: &str,
    helper: &str,
) -> Result<i32, String> {
    let unchanged = "Nothing was changed.";
    let sudo_said = !helper_spoke && err.lines().any(|l| l.starts_with("sudo:"));
    if sudo_said && err.contains("incorrect password attempt") {
        return Err(format!(
            "sudo did not accept the password ({}). {unchanged} Run the command again to retry.",
            last_sudo_line(err)
        ));
    }
    if sudo_said && err.contains("no password was provided") {
        return Err(format!(
            "Cancelled: no password was given to sudo. {unchanged}"
        ));
    }
    if err.contains("a password is required") || err.contains("a terminal is required") {
        return Err(format!(
            "sudo asks for a password, and there is no terminal to type it in. {unchanged} Run the same command in a terminal (sudo asks there), or let your user run the helper without a password: the sudoers line `{}` in /etc/sudoers.d/vfio-assistant (visudo -f). {}",
            crate::remote::sudoers_line(user),
            crate::helper::SUDOERS_ALLOWS
        ));
    }
    if sudo_said
        && (err.contains("not in the sudoers file") || err.contains("is not allowed to execute"))
    {
        return Err(format!(
            "sudo refused: {}. {unchanged} Changing the host needs an administrator: run it as one, or ask one for the sudoers line `{}` in /etc/sudoers.d/vfio-assistant. {}",
            last_sudo_line(err),
            crate::remote::sudoers_line(user),
            crate::helper::SUDOERS_ALLOWS
        ));
    }
    match code {
        Some(c @ 0..=2) if !sudo_said => Ok(c),
        _ => {
            let last = err
                .lines()
                .map(str::trim)
                .rfind(|l| !l.is_empty())
                .unwrap_or("");
            Err(format!(
                "the helper ({helper}) did not run through sudo: {}{}",
                if last.is_empty() {
                    "no reason given"
                } else {
                    last
                },
                if helper_spoke {
                    String::new()
                } else {
                    format!(". {unchanged}")
                }
            ))
        }
    }
}

/// sudo's last line, without its "sudo: " and the dots it ends with.
fn last_sudo_line(err: &str) -> &str {
    err.lines()
        .rev()
        .find_map(|l| l.strip_prefix("sudo: "))
        .unwrap_or("")
        .trim()
        .trim_end_matches('.')
}

/// One of the helper's lines, as `tune` prints its own (with --json as it
/// came).
fn print_heard(heard: &Heard, json: bool) {
    let reply = match heard {
        Heard::Reply(r) if !json => r,
        Heard::Reply(r) => {
            let _ = outln!("{}", r.to_line());
            return;
        }
        Heard::Unreadable(line) => {
            let _ = outln!("{line}");
            return;
        }
    };
    match reply {
        HelperReply::Progress(p) => {
            let _ = outln!("{}", super::tune_text::progress_line(p));
        }
        HelperReply::Error { error } => errln!("vfio-assistant tune: {error}"),
        HelperReply::Result { result, .. } => {
            let (state, id, failure, needs_reboot) = match result {
                ReplyResult::Outcome(o) => {
                    let state = serde_json::to_value(o.state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| "done".into());
                    (state, o.id.as_str(), o.failure.as_deref(), o.needs_reboot)
                }
                ReplyResult::Nothing(_) => ("nothing_to_do".into(), "", None, false),
                ReplyResult::Status { .. } => ("done".into(), "", None, false),
            };
            let _ = outln!("{} {id}", state.replace('_', " "));
            if let Some(f) = failure {
                let _ = outln!("  because: {f}");
            }
            if needs_reboot {
                let _ = outln!("Reboot for the boot changes to take effect.");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(code: i32, err: &str, spoke: bool) -> Result<i32, String> {
        ending(
            Some(code),
            err,
            spoke,
            "anna",
            "/usr/libexec/vfio-assistant/vfio-assistant-helper",
        )
    }

    #[test]
    fn the_helpers_own_codes_stand() {
        for code in 0..=2 {
            assert_eq!(said(code, "", true), Ok(code));
        }
        // A warning of sudo's before the helper ran and spoke: the helper's.
        assert_eq!(said(1, "sudo: unable to resolve host box\n", true), Ok(1));
    }

    #[test]
    fn three_wrong_passwords_say_nothing_changed() {
        let w = said(1, "sudo: 3 incorrect password attempts\n", false).unwrap_err();
        assert_eq!(
            w,
            "sudo did not accept the password (3 incorrect password attempts). Nothing was changed. Run the command again to retry."
        );
    }

    #[test]
    fn no_password_given_is_a_cancel() {
        let w = said(
            1,
            "sudo: no password was provided\nsudo: a password is required\n",
            false,
        )
        .unwrap_err();
        assert_eq!(
            w,
            "Cancelled: no password was given to sudo. Nothing was changed."
        );
    }

    #[test]
    fn no_terminal_and_not_allowed_say_the_sudoers_line() {
        let w = said(1, "sudo: a password is required\n", false).unwrap_err();
        assert!(
            w.starts_with("sudo asks for a password, and there is no terminal"),
            "{w}"
        );
        assert!(
            w.contains("Nothing was changed.") && w.contains("anna ALL=(root)"),
            "{w}"
        );
        let w = said(1, "sudo: anna is not in the sudoers file.\n", false).unwrap_err();
        assert!(
            w.starts_with("sudo refused: anna is not in the sudoers file. Nothing was changed."),
            "{w}"
        );
    }

    #[test]
    fn anything_else_before_the_helper_ran_is_said_with_sudos_words() {
        let w = said(
            1,
            "sudo: PAM account management error: Permission denied\n",
            false,
        )
        .unwrap_err();
        assert!(
            w.ends_with("did not run through sudo: sudo: PAM account management error: Permission denied. Nothing was changed."),
            "{w}"
        );
    }
}
