//! The prerequisite findings as a traffic-light list: failures first, each
//! expandable to what was read, why it matters and the fix.

use crate::checks::counts;
use crate::checks::model::{Finding, Status};
use crate::tuning::plan::change_for_finding;
use crate::ui::app::Command;
use crate::ui::theme;
use crate::ui::widgets::badges::badge_ui;
use egui::RichText;

pub use crate::ui::theme::status_color;

fn finding_ui(ui: &mut egui::Ui, i: usize, f: &Finding, out: &mut Option<&mut Vec<Command>>) {
    let header = egui::CollapsingHeader::new(RichText::new(&f.title))
        .id_salt(("finding", i, &f.id, &f.device))
        .default_open(f.status == Status::Fail);
    ui.horizontal_top(|ui| {
        // A fixed-width column keeps the titles aligned.
        ui.allocate_ui_with_layout(
            egui::vec2(70.0, 18.0),
            egui::Layout::left_to_right(egui::Align::Center),
            |ui| {
                ui.set_min_width(70.0);
                badge_ui(ui, f.status.word(), status_color(f.status))
            },
        );
        ui.vertical(|ui| {
            header.show(ui, |ui| {
                for e in &f.evidence {
                    ui.label(theme::mono(format!("{} = {}", e.source, e.value)));
                }
                if !f.why.is_empty() {
                    ui.label(theme::detail(format!("Why: {}", f.why)));
                }
                if let Some(out) = out.as_deref_mut()
                    && matches!(f.status, Status::Fail | Status::Warn)
                    && let Some(change) = change_for_finding(&f.id)
                    && ui
                        .button("Fix on the Tuning page")
                        .on_hover_text("Opens the Tuning page with this change selected: you see exactly what it writes before you apply it, and can undo it.")
                        .clicked()
                {
                    out.push(Command::OpenTuning {
                        focus: vec![change.to_string()],
                        gpus: f.device.iter().filter(|_| change == "vfio-boot").cloned().collect(),
                        use_board: false,
                        memory_gib: None,
                    });
                }
                if let Some(fix) = &f.fix {
                    ui.horizontal_wrapped(|ui| {
                        ui.label(theme::detail(format!("Fix: {fix}")).strong());
                        if ui
                            .small_button("Copy")
                            .on_hover_text("Copy the fix")
                            .clicked()
                        {
                            ui.ctx().copy_text(fix.clone());
                        }
                    });
                }
                ui.label(RichText::new(&f.id).small().weak());
            });
        });
    });
}

pub fn findings_ui(ui: &mut egui::Ui, findings: &[Finding], out: Option<&mut Vec<Command>>) {
    let c = counts(findings);
    ui.label(format!(
        "{} failed · {} warnings · {} unknown · {} info · {} passed",
        c.fail, c.warn, c.unknown, c.info, c.pass
    ));
    ui.add_space(4.0);
    // What could not look (a capture without the file, not root) is said
    // once, folded, not as a row each among the answers.
    let (unknown, known): (Vec<Finding>, Vec<Finding>) = findings
        .iter()
        .cloned()
        .partition(|f| f.status == Status::Unknown);
    let mut out = out;
    for (i, f) in known.iter().enumerate() {
        finding_ui(ui, i, f, &mut out);
    }
    if !unknown.is_empty() {
        let titles: Vec<&str> = unknown.iter().map(|f| f.id.as_str()).collect();
        egui::CollapsingHeader::new(format!(
            "{} check(s) could not look: what they read is not in this capture, or needs root",
            unknown.len()
        ))
        .id_salt("unknown_findings")
        .default_open(false)
        .show(ui, |ui| {
            ui.label(theme::detail(format!(
                "Not an answer either way: {}.",
                titles.join(", ")
            )));
            for (i, f) in unknown.iter().enumerate() {
                finding_ui(ui, known.len() + i, f, &mut out);
            }
        });
    }
}

/// The findings alone, one expandable row each.
pub fn finding_list_ui(ui: &mut egui::Ui, findings: &[Finding]) {
    finding_list_with(ui, findings, None);
}

/// The same, with a Fix button where the tuning engine can apply the fix.
pub fn finding_list_with(
    ui: &mut egui::Ui,
    findings: &[Finding],
    mut out: Option<&mut Vec<Command>>,
) {
    for (i, f) in findings.iter().enumerate() {
        finding_ui(ui, i, f, &mut out);
    }
}
