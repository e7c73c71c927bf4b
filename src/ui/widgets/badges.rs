//! Small coloured labels: device badges and verdict chips.

use crate::host::iommu::VerdictKind;
use egui::{Color32, RichText};

/// A rounded coloured tag.
pub fn badge_ui(ui: &mut egui::Ui, text: &str, color: Color32) -> egui::Response {
    egui::Frame::new()
        .fill(color.linear_multiply(0.18))
        .stroke(egui::Stroke::new(1.0, color))
        .corner_radius(6.0)
        .inner_margin(egui::Margin::symmetric(5, 1))
        .show(ui, |ui| ui.label(RichText::new(text).small().color(color)))
        .response
}

pub fn verdict_color(v: VerdictKind) -> Color32 {
    match v {
        VerdictKind::ViableAlone => Color32::from_rgb(40, 170, 90),
        VerdictKind::ViableWith => Color32::from_rgb(200, 150, 20),
        VerdictKind::NotViable => Color32::from_rgb(210, 60, 60),
        VerdictKind::NoIommu => Color32::from_rgb(130, 130, 130),
    }
}

/// A short verdict tag.
pub fn verdict_label(v: VerdictKind) -> &'static str {
    match v {
        VerdictKind::ViableAlone => "passthrough: alone",
        VerdictKind::ViableWith => "passthrough: with companions",
        VerdictKind::NotViable => "passthrough: blocked",
        VerdictKind::NoIommu => "no IOMMU",
    }
}

/// Colour for a text badge from `cli::text::badges`.
pub fn badge_color(text: &str) -> Color32 {
    if text == "GPU" {
        Color32::from_rgb(80, 140, 230)
    } else if text == "boot VGA" || text == "used by host" || text == "no reset" {
        Color32::from_rgb(220, 120, 40)
    } else if text.starts_with("SR-IOV") {
        Color32::from_rgb(150, 100, 210)
    } else if text == "ready for VM" {
        Color32::from_rgb(40, 170, 90)
    } else {
        Color32::from_rgb(120, 120, 120)
    }
}
