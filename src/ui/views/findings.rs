//! The prerequisite findings as a traffic-light list: failures first, each
//! expandable to what was read, why it matters and the fix.

use crate::checks::counts;
use crate::checks::model::{Finding, Status};
use crate::ui::widgets::badges::badge_ui;
use egui::{Color32, RichText};

pub fn status_color(s: Status) -> Color32 {
    match s {
        Status::Fail => Color32::from_rgb(210, 60, 60),
        Status::Warn => Color32::from_rgb(220, 150, 30),
        Status::Unknown => Color32::from_rgb(150, 150, 150),
        Status::Info => Color32::from_rgb(90, 150, 220),
        Status::Pass => Color32::from_rgb(40, 170, 90),
    }
}

fn finding_ui(ui: &mut egui::Ui, i: usize, f: &Finding) {
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
                    ui.label(
                        RichText::new(format!("{} = {}", e.source, e.value))
                            .monospace()
                            .small(),
                    );
                }
                if !f.why.is_empty() {
                    ui.label(RichText::new(format!("Why: {}", f.why)).small());
                }
                if let Some(fix) = &f.fix {
                    ui.horizontal_wrapped(|ui| {
                        ui.label(RichText::new(format!("Fix: {fix}")).small().strong());
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

pub fn findings_ui(ui: &mut egui::Ui, findings: &[Finding]) {
    let c = counts(findings);
    ui.label(format!(
        "{} failed · {} warnings · {} unknown · {} info · {} passed",
        c.fail, c.warn, c.unknown, c.info, c.pass
    ));
    ui.add_space(4.0);
    finding_list_ui(ui, findings);
}

/// The findings alone, one expandable row each.
pub fn finding_list_ui(ui: &mut egui::Ui, findings: &[Finding]) {
    for (i, f) in findings.iter().enumerate() {
        finding_ui(ui, i, f);
    }
}
