//! The Tuning page's journal: what was applied before and where each
//! stands, with its Undo (or Keep); and, at the top of the page, a
//! transaction left unfinished — interrupted (a power cut, a killed helper),
//! with the button that restores the host, or still running because the app
//! that started it was closed while its helper went on, to be waited for.

use crate::tuning::kinds::ChangeId;
use crate::tuning::status::Standing;
use crate::ui::app::Command;
use crate::ui::pages::TuningRuntime;
use crate::ui::theme;
use egui::RichText;

/// Whether a transaction's helper still runs (the app that started it was
/// closed): nothing else is applied or undone until it ends.
pub fn one_still_runs(rt: &TuningRuntime) -> bool {
    rt.status.iter().any(|e| e.standing == Standing::Running)
}

/// A transaction the journal holds unfinished, said first: which changes
/// it got through and where it stopped, and what to do.
pub fn unfinished_ui(ui: &mut egui::Ui, rt: &TuningRuntime, out: &mut Vec<Command>) {
    for e in &rt.status {
        let (title, color) = match e.standing {
            Standing::Interrupted => ("A tuning was interrupted", theme::BAD),
            Standing::Running => ("A tuning is still running", theme::WARN),
            _ => continue,
        };
        egui::Frame::group(ui.style()).show(ui, |ui| {
            ui.colored_label(color, RichText::new(format!("{title} ({})", e.id)).strong());
            let done = e.completed.min(e.changes.len());
            let (before, after) = e.changes.split_at(done);
            if !before.is_empty() {
                ui.label(format!("Changes done: {}", ChangeId::joined(before)));
            }
            if let Some((now, rest)) = after.split_first() {
                let word = if e.standing == Standing::Running {
                    "Now in"
                } else {
                    "Stopped in"
                };
                ui.label(format!("{word}: {now}"));
                if !rest.is_empty() {
                    ui.label(format!("Not started: {}", ChangeId::joined(rest)));
                }
            }
            if let Some(d) = &e.detail {
                ui.label(theme::detail(d));
            }
            if e.standing == Standing::Interrupted {
                ui.label(theme::detail("The journal holds everything as it was before, so the host can be put back in one step: every file, value and boot file (the helper does it, through the same password prompt). Then apply again if you want it."));
                if ui
                    .add_enabled(!rt.is_running(), egui::Button::new("Restore the host"))
                    .clicked()
                {
                    out.push(Command::TuningUndo { id: e.id.clone() });
                }
            }
        });
    }
}

pub fn journal_ui(ui: &mut egui::Ui, rt: &TuningRuntime, out: &mut Vec<Command>) {
    ui.label(RichText::new("Applied before").heading());
    if rt.status.is_empty() {
        ui.weak("Nothing applied by VFIO Assistant on this host yet.");
    }
    for e in rt.status.iter().rev() {
        ui.horizontal_wrapped(|ui| {
            let (word, color) = match e.standing {
                Standing::Applied => ("applied", theme::GOOD),
                Standing::WaitingForReboot => ("waiting for a reboot", theme::WARN),
                Standing::TookEffect => ("took effect", theme::GOOD),
                Standing::DidNotTake => ("did not take", theme::BAD),
                Standing::RolledBack => ("rolled back", theme::muted(ui)),
                Standing::Undone => ("undone", theme::muted(ui)),
                Standing::Interrupted => ("interrupted", theme::BAD),
                Standing::Running => ("still running", theme::WARN),
            };
            crate::ui::widgets::badges::badge_ui(ui, word, color);
            ui.label(format!("{}: {}", e.id, ChangeId::joined(&e.changes)));
            // An interrupted one is restored from the top of the page; a
            // running one is waited for.
            let undoable = matches!(
                e.standing,
                Standing::Applied
                    | Standing::WaitingForReboot
                    | Standing::TookEffect
                    | Standing::DidNotTake
            );
            if undoable
                && ui
                    .add_enabled(!rt.is_running() && !one_still_runs(rt), egui::Button::new("Undo"))
                    .on_hover_text("Puts every file back byte for byte and every value as it was, and the boot files as they were (rebuilt where something else changed them since).")
                    .clicked()
            {
                out.push(Command::TuningUndo { id: e.id.clone() });
            }
        });
        if !e.pending_tokens.is_empty() {
            ui.weak(format!(
                "  not in /proc/cmdline yet: {}",
                e.pending_tokens.join(" ")
            ));
        }
        for u in &e.unbound {
            ui.colored_label(theme::BAD, format!("  not bound after the reboot: {u}"));
        }
        if let Some(d) = &e.detail {
            let color = if e.standing == Standing::Running {
                theme::WARN
            } else {
                theme::BAD
            };
            ui.colored_label(color, format!("  {d}"));
        }
        if let Some(t) = &e.tried_once {
            ui.colored_label(theme::WARN, format!("  {t}"));
        }
        if let Some(req) = &e.keep
            && ui
                .add_enabled(
                    !rt.is_running() && !one_still_runs(rt),
                    egui::Button::new("Keep it as the default"),
                )
                .on_hover_text("Writes the parameters this boot came up with into the default boot entry (or builds the default kernel image with them), as one more transaction you can undo.")
                .clicked()
        {
            out.push(Command::TuningApply {
                request: req.clone(),
                steps: 2,
            });
        }
        if !e.drifted.is_empty() {
            ui.colored_label(
                theme::WARN,
                format!("  changed since: {}", e.drifted.join(", ")),
            );
        }
        if !e.leftovers.is_empty() {
            ui.colored_label(
                theme::WARN,
                format!("  still in the boot files: {}", e.leftovers.join("; ")),
            );
        }
    }
}
