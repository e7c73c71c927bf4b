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

pub use crate::ui::theme::verdict_color;

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
    use crate::ui::theme;
    if text == "GPU" {
        theme::GPU
    } else if text == "boot VGA" || text == "used by host" || text == "no reset" {
        theme::HOST_USE
    } else if text.starts_with("SR-IOV") {
        theme::SRIOV
    } else if text == "ready for VM" {
        theme::GOOD
    } else {
        theme::NEUTRAL
    }
}
