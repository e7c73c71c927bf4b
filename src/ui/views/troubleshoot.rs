//! Troubleshoot: a short wizard. 1) pick what happens; 2) see what was read;
//! 3) the verdict, the fixes, and what to check where the host cannot look.

use super::findings::finding_list_ui;
use crate::checks::model::Finding;
use crate::doctor::{Outcome, SYMPTOMS, diagnose, find_symptom};
use crate::ui::state::State;
use crate::ui::widgets::badges::badge_ui;
use egui::{Color32, RichText};

pub fn troubleshoot_ui(ui: &mut egui::Ui, findings: &[Finding], state: &mut State) {
    ui.label(RichText::new("1. What happens?").heading());
    ui.horizontal_wrapped(|ui| {
        for s in SYMPTOMS {
            let selected = state.symptom.as_deref() == Some(s.id);
            if ui
                .selectable_label(selected, s.title)
                .on_hover_text(format!("\"{}\"", s.says))
                .clicked()
            {
                state.symptom = Some(s.id.to_string());
            }
        }
    });
    ui.separator();
    let Some(symptom) = state.symptom.as_deref().and_then(find_symptom) else {
        ui.label("Pick the symptom closest to what you see; the relevant checks run on this host.");
        return;
    };
    let d = diagnose(symptom, findings);
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            ui.label(
                RichText::new(format!("\"{}\"", symptom.says))
                    .italics()
                    .weak(),
            );
            ui.add_space(6.0);
            ui.label(RichText::new("2. What we read").heading());
            if d.findings.is_empty() {
                ui.label("No check on the host covers this symptom.");
            }
            finding_list_ui(ui, &d.findings);
            ui.add_space(6.0);
            ui.label(RichText::new("3. Verdict").heading());
            let (word, color) = match d.outcome {
                Outcome::CauseFound => ("Likely cause found", Color32::from_rgb(210, 60, 60)),
                Outcome::NothingFound => ("The host looks right", Color32::from_rgb(40, 170, 90)),
                Outcome::CannotTell => ("Cannot tell from here", Color32::from_rgb(150, 150, 150)),
            };
            ui.horizontal_wrapped(|ui| {
                badge_ui(ui, word, color);
                ui.label(&d.summary);
            });
            ui.add_space(4.0);
            ui.label(RichText::new("Next, where the host scan cannot look:").strong());
            for step in &d.next_steps {
                ui.label(format!("- {step}"));
            }
        });
}
