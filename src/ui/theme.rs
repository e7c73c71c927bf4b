//! The app's colours and text styles, in one place: each outcome (a check's
//! status, a passthrough verdict, the doctor's verdict) has one colour on
//! every page, and the labels come from the library so the CLI says the
//! same words.

use crate::checks::model::Status;
use crate::doctor::Outcome;
use crate::host::iommu::VerdictKind;
use egui::Color32;

pub const GOOD: Color32 = Color32::from_rgb(40, 170, 90);
pub const BAD: Color32 = Color32::from_rgb(210, 60, 60);
pub const WARN: Color32 = Color32::from_rgb(220, 150, 30);
pub const MUTED: Color32 = Color32::from_rgb(150, 150, 150);
pub const INFO: Color32 = Color32::from_rgb(90, 150, 220);
/// Topology: performance and efficiency cores, isolated CPUs, a VM's vCPUs.
pub const P_CORE: Color32 = Color32::from_rgb(70, 130, 220);
pub const E_CORE: Color32 = Color32::from_rgb(60, 170, 150);
pub const ISOLATED: Color32 = Color32::from_rgb(220, 140, 40);
pub const VCPU: Color32 = Color32::from_rgb(60, 180, 90);
/// The emulator's and I/O threads' CPUs: their own mark, not the isolated one.
pub const EMULATOR: Color32 = Color32::from_rgb(170, 110, 220);
/// Device badges.
pub const GPU: Color32 = Color32::from_rgb(80, 140, 230);
pub const HOST_USE: Color32 = Color32::from_rgb(220, 120, 40);
pub const SRIOV: Color32 = Color32::from_rgb(150, 100, 210);
pub const NEUTRAL: Color32 = Color32::from_rgb(120, 120, 120);

pub fn status_color(s: Status) -> Color32 {
    match s {
        Status::Fail => BAD,
        Status::Warn => WARN,
        Status::Unknown => MUTED,
        Status::Info => INFO,
        Status::Pass => GOOD,
    }
}

pub fn verdict_color(v: VerdictKind) -> Color32 {
    match v {
        VerdictKind::ViableAlone => GOOD,
        VerdictKind::ViableWith => Color32::from_rgb(200, 150, 20),
        VerdictKind::NotViable => BAD,
        VerdictKind::NoIommu => Color32::from_rgb(130, 130, 130),
    }
}

pub fn outcome_color(o: Outcome) -> Color32 {
    match o {
        Outcome::CauseFound => BAD,
        Outcome::NothingFound => GOOD,
        Outcome::CannotTell => MUTED,
    }
}

/// Muted text for this theme (the weak text colour set in
/// `ensure_readable`: at least 4.5:1 on the panel, dark or light).
pub fn muted(ui: &egui::Ui) -> Color32 {
    ui.visuals().weak_text_color()
}

/// Body text in details (evidence, why, fix): readable, not `small()`.
pub const DETAIL_SIZE: f32 = 13.0;
/// Monospace for XML, kernel lines and evidence.
pub const MONO_SIZE: f32 = 13.0;

/// Monospace text at a readable size.
pub fn mono(text: impl Into<String>) -> egui::RichText {
    egui::RichText::new(text).monospace().size(MONO_SIZE)
}

/// An empty field's example: "e.g. …", weak and in italics, so that it is
/// never taken for a value the field holds.
pub fn hint(example: impl AsRef<str>) -> egui::RichText {
    egui::RichText::new(format!("e.g. {}", example.as_ref()))
        .italics()
        .weak()
}

/// `text` cut to `max_chars` characters with "…" in the middle (a long
/// host path keeps its start and its end); the whole goes in a tooltip.
pub fn shortened(text: &str, max_chars: usize) -> String {
    let n = text.chars().count();
    if n <= max_chars || max_chars < 5 {
        return text.to_string();
    }
    let head = (max_chars - 1) / 2;
    let tail = max_chars - 1 - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// Detail text at a readable size.
pub fn detail(text: impl Into<String>) -> egui::RichText {
    egui::RichText::new(text).size(DETAIL_SIZE)
}

/// The smallest text the app draws, in points at 100 % scale: egui's
/// default `Small` (9) and `Body` (12.5) are below what a settings page
/// should ask anyone to read.
pub const MIN_TEXT_SIZE: f32 = 12.0;

/// Every text style at a readable size (Small 12, Body and Button 14,
/// Monospace 13, Heading 20), in the dark and the light theme alike. Cheap
/// when already done: called at the top of every frame.
pub fn ensure_readable(ctx: &egui::Context) {
    let small = ctx
        .global_style()
        .text_styles
        .get(&egui::TextStyle::Small)
        .map_or(0.0, |f| f.size);
    if small >= MIN_TEXT_SIZE {
        return;
    }
    ctx.all_styles_mut(|style| {
        use egui::{FontFamily, FontId, TextStyle};
        // Weak text at 4.5:1 or better on the panel: egui's default grey is
        // about 2.9:1 on the light theme's near-white.
        style.visuals.weak_text_color = Some(if style.visuals.dark_mode {
            Color32::from_gray(160)
        } else {
            Color32::from_gray(95)
        });
        style.text_styles = [
            (
                TextStyle::Small,
                FontId::new(MIN_TEXT_SIZE, FontFamily::Proportional),
            ),
            (TextStyle::Body, FontId::new(14.0, FontFamily::Proportional)),
            (
                TextStyle::Button,
                FontId::new(14.0, FontFamily::Proportional),
            ),
            (
                TextStyle::Monospace,
                FontId::new(MONO_SIZE, FontFamily::Monospace),
            ),
            (
                TextStyle::Heading,
                FontId::new(20.0, FontFamily::Proportional),
            ),
        ]
        .into();
    });
}
