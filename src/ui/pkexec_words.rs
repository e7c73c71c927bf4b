//! How the helper ended, in words for the Tuning page: its own exit codes
//! (0 done, 1 rolled back, 2 refused: its lines say the rest) and pkexec's,
//! which come before the helper ever ran, so nothing was changed.
//!
//! pkexec's codes, from its manual page (RETURN VALUE) and its source
//! (polkit's src/programs/pkexec.c), and tried on a Debian host with
//! polkitd and no agent, and with a wrong password typed to its own
//! terminal agent:
//! * 126: the password dialog was dismissed ("Request dismissed");
//! * 127 with "No authentication agent found." (no agent, and pkexec's own
//!   terminal agent turned off) or "Error creating textual authentication
//!   agent: … controlling terminal …" (no agent, and the app has no terminal
//!   for pkexec's own): nobody could be asked for the password;
//! * 127 with "Not authorized": asked, and refused (a wrong password, or a
//!   user who may not administer the machine) — "This incident has been
//!   reported." follows it;
//! * 127 otherwise: polkit could not be asked, or the helper could not be
//!   started after all.

/// The polkit agents a desktop without its own can start: package names as
/// Debian and Fedora ship them.
pub const AGENTS: &str = "lxpolkit, mate-polkit, or polkit-gnome (Debian's policykit-1-gnome)";

/// The request the helper was given, as a command to run in a terminal
/// instead (where sudo asks): an undo is said as an undo, not as the
/// page's apply.
pub fn terminal_for(req: &crate::helper::HelperRequest) -> String {
    use crate::helper::HelperRequest;
    match req {
        HelperRequest::Apply { request } => crate::ui::views::tuning::terminal_command(request),
        HelperRequest::Undo { id, force } => format!(
            "sudo vfio-assistant tune undo {id}{}",
            if *force { " --force" } else { "" }
        ),
        HelperRequest::Status {} => "vfio-assistant tune status".to_string(),
    }
}

/// The words for how the helper ended, or none when its own lines say it.
/// `terminal` is the same request as a command to run in a terminal.
pub fn helper_exit_words(code: Option<i32>, stderr: &str, terminal: &str) -> Option<String> {
    let unchanged = "Nothing was changed on this host.";
    let last = stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("This incident has been reported"))
        .unwrap_or("no reason given");
    match code {
        Some(0..=2) => None,
        Some(126) => Some(format!(
            "Cancelled: the password dialog was closed without a password. {unchanged} Press Apply again when you want it."
        )),
        Some(127)
            if stderr.contains("No authentication agent found")
                || stderr.contains("authentication agent:") =>
        {
            Some(format!(
                "No polkit authentication agent is running in this desktop session, so nothing could ask for your password. {unchanged} Start your desktop's own agent, or install one — {AGENTS} — and start it with your session (its autostart entry does this at the next login), then press Apply again. Or run this in a terminal, where sudo asks:\n{terminal}"
            ))
        }
        Some(127) if stderr.contains("Not authorized") => Some(format!(
            "Not authorised: polkit refused (a wrong password, or this user may not administer this machine). {unchanged} Press Apply to try again, or run this in a terminal:\n{terminal}"
        )),
        Some(127) => Some(format!(
            "pkexec did not run the helper: {last}. {unchanged} Or run this in a terminal:\n{terminal}"
        )),
        other => Some(format!(
            "The helper ended unexpectedly ({}): {}",
            other.map_or("killed".to_string(), |c| format!("exit {c}")),
            stderr.trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helpers_own_codes_are_left_to_its_lines() {
        for code in 0..=2 {
            assert_eq!(helper_exit_words(Some(code), "", "sudo …"), None);
        }
    }

    #[test]
    fn another_pkexec_failure_is_said_with_its_reason() {
        let w = helper_exit_words(
            Some(127),
            "Error checking for authorization org.freedesktop.policykit.exec: GDBus.Error:org.freedesktop.DBus.Error.ServiceUnknown\n",
            "sudo vfio-assistant tune apply",
        )
        .unwrap_or_default();
        assert!(
            w.starts_with("pkexec did not run the helper: Error checking for authorization")
                && w.contains("Nothing was changed on this host.")
                && w.ends_with("sudo vfio-assistant tune apply"),
            "{w}"
        );
        let killed = helper_exit_words(None, "", "").unwrap_or_default();
        assert!(killed.contains("(killed)"), "{killed}");
    }
}
