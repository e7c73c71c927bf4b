//! pkexec's refusals on the Tuning page. Apply runs a stand-in for "pkexec
//! and the helper" (the page's helper program, run by the real job that
//! reads its output and exit status) that ends as pkexec does when nobody
//! can ask for the password, when the dialog is dismissed, and when a wrong
//! password is refused: its exact words and codes, from pkexec's source and
//! tried against polkitd (src/ui/pkexec_words.rs). Each time the page says
//! what happened, that nothing was changed, and what to do; the tree and
//! the journal are as they were.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::wait_for;
use crate::support::tuning::{differ, runtime_host, tree, tuning_app};
use egui_kittest::kittest::Queryable;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use vfio_assistant::ui::jobs::HelperProgram;

/// A program that reads the request like the helper, prints `stderr` and
/// exits with `code`, as pkexec does before it ever starts the helper.
fn pkexec_that_ends(dir: &Path, stderr: &str, code: i32) -> PathBuf {
    let path = dir.join("pkexec-stand-in");
    let body = format!(
        "#!/bin/sh\ncat >/dev/null\nprintf '%s' '{}' >&2\nexit {code}\n",
        stderr.replace('\'', r"'\''")
    );
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Apply on the X570 tuning host through a stand-in that ends with `code`
/// and `stderr`; every sentence of `said` must be on the page afterwards,
/// and the host unchanged.
fn apply_ending(stderr: &str, code: i32, said: &[&str]) {
    let dir = runtime_host();
    let bin = tempfile::tempdir().unwrap();
    let before = tree(dir.path());
    let mut app = tuning_app(dir.path(), &[]);
    app.tuning.helper = Some(HelperProgram {
        path: pkexec_that_ends(bin.path(), stderr, code),
        args: Vec::new(),
    });
    let mut h = crate::support::gui::harness(app, [1280.0, 2400.0]);
    wait_for(&mut h, 30, |a| {
        a.snapshot.is_some() && a.tuning.facts.is_some()
    });
    h.get_by_label("Apply to this captured host's files")
        .click();
    wait_for(&mut h, 60, |a| {
        !a.tuning.is_running()
            && a.tuning.ended.is_some()
            && !a.is_busy()
            && a.tuning.facts.is_some()
    });
    assert_eq!(h.state().tuning.ended.as_ref().unwrap().0, Some(code));
    for s in said {
        assert!(
            h.query_all_by_label_contains(s).next().is_some(),
            "exit {code}: the page does not say {s:?}; it says {:?}",
            h.state().tuning.ended
        );
    }
    h.get_by_label_contains("Nothing applied by VFIO Assistant on this host yet.");
    assert_eq!(differ(&before, &tree(dir.path())), Vec::<String>::new());
}

#[test]
fn no_polkit_agent_says_what_to_start_and_that_nothing_changed() {
    // The app started from the desktop's menu: no terminal, so pkexec
    // cannot fall back to asking on one.
    apply_ending(
        "Error creating textual authentication agent: Error opening current controlling terminal for the process (`/dev/tty'): No such device or address\n",
        127,
        &[
            "No polkit authentication agent is running",
            "Nothing was changed on this host.",
            "lxpolkit, mate-polkit, or polkit-gnome",
            "sudo vfio-assistant tune apply --gpu 0000:0b:00.0",
        ],
    );
    // pkexec --disable-internal-agent, or a polkit that has no terminal
    // agent: the same, said the same.
    apply_ending(
        "Error executing command as another user: No authentication agent found.\n",
        127,
        &[
            "No polkit authentication agent is running",
            "Nothing was changed on this host.",
        ],
    );
}

#[test]
fn a_dismissed_dialog_says_nothing_changed() {
    apply_ending(
        "Error executing command as another user: Request dismissed\n",
        126,
        &[
            "Cancelled: the password dialog was closed",
            "Nothing was changed on this host.",
        ],
    );
}

#[test]
fn a_refused_password_says_nothing_changed() {
    apply_ending(
        "Error executing command as another user: Not authorized\n\nThis incident has been reported.\n",
        127,
        &[
            "Not authorised: polkit refused (a wrong password",
            "Nothing was changed on this host.",
        ],
    );
}

/// An Undo refused the same way is said as an undo: the command for a
/// terminal is the undo of that transaction, not the page's apply; the
/// transaction stays applied.
#[test]
fn a_refused_undo_names_the_undo_to_run_instead() {
    let dir = runtime_host();
    let bin = tempfile::tempdir().unwrap();
    let mut app = tuning_app(dir.path(), &[]);
    // Applied first by the same code the helper runs, in this process.
    app.tuning.helper = None;
    let mut h = crate::support::gui::harness(app, [1280.0, 2400.0]);
    let settled = |h: &mut egui_kittest::Harness<'static, vfio_assistant::ui::app::App>| {
        wait_for(h, 60, |a| {
            a.snapshot.is_some()
                && a.tuning.facts.is_some()
                && !a.tuning.is_running()
                && !a.is_busy()
        });
    };
    settled(&mut h);
    h.get_by_label("Apply to this captured host's files")
        .click();
    settled(&mut h);
    let id = h.state().tuning.status.last().unwrap().id.clone();
    let after_apply = tree(dir.path());
    h.state_mut().tuning.helper = Some(HelperProgram {
        path: pkexec_that_ends(
            bin.path(),
            "Error executing command as another user: Not authorized\n\nThis incident has been reported.\n",
            127,
        ),
        args: Vec::new(),
    });
    h.get_by_label("Undo").click();
    settled(&mut h);
    let words = h.state().tuning.ended.clone().unwrap().1.unwrap();
    assert!(
        words.starts_with("Not authorised")
            && words.ends_with(&format!("sudo vfio-assistant tune undo {id}")),
        "{words}"
    );
    h.get_by_label_contains(&format!("sudo vfio-assistant tune undo {id}"));
    assert_eq!(
        differ(&after_apply, &tree(dir.path())),
        Vec::<String>::new()
    );
}
