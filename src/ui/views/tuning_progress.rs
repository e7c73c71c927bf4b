//! The Tuning page's run: the helper's replies (`HelperReply`, typed) as
//! they arrive — a progress bar over the steps, a line per step done,
//! refused, failed or undone, what was verified, and how it ended.

use crate::helper::client::Heard;
use crate::helper::{HelperReply, ReplyResult};
use crate::tuning::apply::Progress;
use crate::tuning::journal::EntryState;
use crate::ui::pages::TuningRuntime;
use crate::ui::theme;

pub(super) fn progress_ui(ui: &mut egui::Ui, rt: &TuningRuntime, recovery: &str) {
    if rt.lines.is_empty() && rt.ended.is_none() {
        return;
    }
    let done = rt
        .lines
        .iter()
        .filter(|l| {
            matches!(
                l,
                Heard::Reply(HelperReply::Progress(
                    Progress::Done { .. } | Progress::Refused { .. }
                ))
            )
        })
        .count();
    if rt.steps > 0 {
        ui.add(
            egui::ProgressBar::new(done as f32 / rt.steps.max(1) as f32)
                .text(format!("{done} of {} steps", rt.steps)),
        );
    }
    for l in &rt.lines {
        let Some((text, color)) = line_words(ui, l, recovery) else {
            continue;
        };
        ui.colored_label(color, theme::detail(text));
    }
    if let Some((_, Some(words))) = &rt.ended {
        ui.colored_label(theme::WARN, theme::detail(words));
    }
}

/// One of the helper's lines in words and its colour (none for a step that
/// started: its end says it).
fn line_words(ui: &egui::Ui, l: &Heard, recovery: &str) -> Option<(String, egui::Color32)> {
    let reply = match l {
        Heard::Reply(r) => r,
        // As it came (a JSON value, or quoted).
        Heard::Unreadable(raw) => {
            let v = serde_json::from_str(raw)
                .unwrap_or_else(|_| serde_json::Value::String(raw.clone()));
            return Some((v.to_string(), theme::muted(ui)));
        }
    };
    Some(match reply {
        HelperReply::Progress(p) => match p {
            Progress::Started { .. } => return None,
            Progress::Done { step } => (format!("ok {step}"), theme::GOOD),
            Progress::Refused { step, why } => (
                format!("– {step}: refused by the kernel ({why}), recorded"),
                theme::WARN,
            ),
            Progress::Failed { step, why } => (format!("FAILED {step}: {why}"), theme::BAD),
            Progress::RolledBack { step } => (format!("undone: {step}"), theme::WARN),
            Progress::Verified { what, ok, detail } => {
                // Not looked at yet (no rebuild ran, or only a boot can
                // tell): neither green nor red.
                let waits = detail.starts_with("not checked") || detail == "after the reboot";
                let (word, color) = match (ok, waits) {
                    (false, _) => ("NOT verified", theme::BAD),
                    (true, true) => ("to verify", theme::muted(ui)),
                    (true, false) => ("verified", theme::GOOD),
                };
                (format!("{word} {what}: {detail}"), color)
            }
        },
        HelperReply::Error { error } => (format!("Refused, nothing changed: {error}"), theme::BAD),
        HelperReply::Result {
            result: ReplyResult::Nothing(_),
            ..
        } => (
            "Nothing to do: this host already has all of it.".into(),
            theme::GOOD,
        ),
        HelperReply::Result {
            result: ReplyResult::Outcome(o),
            recovery: said,
        } => match o.state {
            EntryState::Applied if o.needs_reboot => (
                format!(
                    "Applied ({}). Reboot for the boot changes. {}",
                    o.id,
                    // The helper's words for the plan it applied (a keep's
                    // are not the page's plan's), else the page's.
                    said.as_deref().unwrap_or(recovery)
                ),
                theme::GOOD,
            ),
            EntryState::Applied => (format!("Applied ({}).", o.id), theme::GOOD),
            EntryState::Undone => ("Undone: every file and value is back.".into(), theme::GOOD),
            EntryState::RolledBack => (
                format!(
                    "Nothing applied: {}. Everything before it was put back.",
                    o.failure.as_deref().unwrap_or("a step failed")
                ),
                theme::BAD,
            ),
            EntryState::Applying | EntryState::Undoing => (reply.to_line(), theme::muted(ui)),
        },
        HelperReply::Result {
            result: ReplyResult::Status { .. },
            ..
        } => (reply.to_line(), theme::muted(ui)),
    })
}
