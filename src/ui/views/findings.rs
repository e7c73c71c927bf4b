//! The prerequisite findings as a traffic-light list: failures first, each
//! expandable to what was read, why it matters and the fix.

use crate::checks::counts;
use crate::checks::model::{Action, Finding, Status};
use crate::tuning::plan::change_fixing;
use crate::ui::app::Command;
use crate::ui::state::Page;
use crate::ui::theme;
use crate::ui::widgets::a11y::name_expander;
use crate::ui::widgets::badges::badge_ui;
use egui::RichText;
use egui::collapsing_header::{CollapsingState, paint_default_icon};

pub use crate::ui::theme::status_color;

fn finding_ui(ui: &mut egui::Ui, i: usize, f: &Finding, out: &mut Option<&mut Vec<Command>>) {
    let id = ui.make_persistent_id(("finding", i, &f.id, &f.device));
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
            // A title that wraps (a long device name and group must not
            // widen the page); it and the arrow open the details.
            let mut state =
                CollapsingState::load_with_default_open(ui.ctx(), id, f.status == Status::Fail);
            let header = ui.horizontal(|ui| {
                let arrow = state.show_toggle_button(ui, paint_default_icon);
                name_expander(&arrow, "Details", &f.title, state.is_open());
                let title = ui.add(
                    egui::Label::new(RichText::new(&f.title))
                        .wrap()
                        .sense(egui::Sense::click()),
                );
                if title.clicked() {
                    state.toggle(ui);
                }
            });
            state.show_body_indented(&header.response, ui, |ui| {
                for e in &f.evidence {
                    ui.label(theme::mono(format!("{} = {}", e.source, e.value)));
                }
                if !f.why.is_empty() {
                    ui.label(theme::detail(format!("Why: {}", f.why)));
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
                if let Some(out) = out.as_deref_mut()
                    && !matches!(f.status, Status::Pass)
                    && let Some((label, hover, command)) = action_of(f)
                    && ui.button(label).on_hover_text(hover).clicked()
                {
                    out.push(command);
                }
                if let Some(cmd) = &f.command {
                    ui.horizontal_wrapped(|ui| {
                        ui.label(theme::detail("or in a terminal:").weak());
                        ui.label(theme::mono(cmd));
                        if ui
                            .small_button("Copy")
                            .on_hover_text("Copy the command")
                            .clicked()
                        {
                            ui.ctx().copy_text(cmd.clone());
                        }
                    });
                }
                ui.label(RichText::new(&f.id).small().weak());
            });
        });
    });
}

/// The button that carries a finding's fix out: its label, what it does,
/// and the command it sends. The finding's own action first, else the
/// tuning change that fixes its id.
fn action_of(f: &Finding) -> Option<(&'static str, &'static str, Command)> {
    const TUNING: &str = "Opens the Tuning page with this change selected: you see exactly what it writes before you apply it, and can undo it.";
    let tune = |change: &str| Command::OpenTuning {
        focus: vec![change.to_string()],
        gpus: f
            .device
            .iter()
            .filter(|_| change == "vfio-boot")
            .cloned()
            .collect(),
        // The VM's CPUs come from the CPU page's board.
        memory_gib: None,
    };
    Some(match &f.action {
        Some(Action::Tune { change }) => ("Fix on the Tuning page", TUNING, tune(change)),
        Some(Action::PinDomain) => (
            "Plan the pinning on the CPU page",
            "Opens the CPU page: its board plans the vCPUs for this host's topology, and Apply writes them into the domain.",
            Command::OpenCpuApply { tune_rest: false },
        ),
        Some(Action::TuneDomain) => (
            "Tune the domain on the CPU page",
            "Opens the CPU page with \"also turn on the Hyper-V enlightenments\" ticked: Apply writes them and the board's pinning into the domain.",
            Command::OpenCpuApply { tune_rest: true },
        ),
        Some(Action::NewVm) => (
            "Open New VM",
            "Writes a domain for this host step by step.",
            Command::ShowPage(Page::NewVm),
        ),
        Some(Action::ReadRom) => (
            "Read the card's ROM",
            "Opens the card on the Devices page, where \"Check its ROM\" reads and checks it.",
            Command::ShowDevice(f.device.clone()?),
        ),
        Some(Action::MeasureLatency) => (
            "Measure on the Monitor page",
            "Opens the Monitor page: its latency probe runs on the CPUs you give, also with shallow idle states only.",
            Command::ShowPage(Page::Monitor),
        ),
        Some(Action::RestoreHost { transaction }) => (
            "Restore the host",
            "Puts every file, value and boot file back as it was before the interrupted tuning (through the privileged helper; the Tuning page shows each step).",
            Command::TuningUndo {
                id: transaction.clone(),
            },
        ),
        None => {
            if !matches!(f.status, Status::Fail | Status::Warn) {
                return None;
            }
            (
                "Fix on the Tuning page",
                TUNING,
                tune(change_fixing(f)?.name()),
            )
        }
    })
}

pub fn findings_ui(ui: &mut egui::Ui, findings: &[Finding], out: Option<&mut Vec<Command>>) {
    let c = counts(findings);
    ui.label(format!(
        "{} failed · {} · {} unknown · {} info · {} passed",
        c.fail,
        crate::units::count(c.warn, "warning"),
        c.unknown,
        c.info,
        c.pass
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_is_a_button_that_opens_the_page_doing_it() {
        let f = |a: Option<Action>| {
            let mut f = Finding::new("x.y", "t", Status::Warn).device("0000:01:00.0");
            f.action = a;
            action_of(&f).map(|(_, _, c)| c)
        };
        assert!(matches!(
            f(Some(Action::Tune {
                change: "irq-affinity".into()
            })),
            Some(Command::OpenTuning { .. })
        ));
        assert!(matches!(
            f(Some(Action::PinDomain)),
            Some(Command::OpenCpuApply { tune_rest: false })
        ));
        assert!(matches!(
            f(Some(Action::TuneDomain)),
            Some(Command::OpenCpuApply { tune_rest: true })
        ));
        assert!(matches!(
            f(Some(Action::ReadRom)),
            Some(Command::ShowDevice(a)) if a == "0000:01:00.0"
        ));
        assert!(matches!(
            f(Some(Action::MeasureLatency)),
            Some(Command::ShowPage(Page::Monitor))
        ));
        assert!(matches!(
            f(Some(Action::NewVm)),
            Some(Command::ShowPage(Page::NewVm))
        ));
        // Without an action: the tuning change for the id, if one exists.
        assert!(f(None).is_none());
        let mut thp = Finding::new("mem.thp", "t", Status::Warn);
        assert!(matches!(
            action_of(&thp),
            Some((_, _, Command::OpenTuning { .. }))
        ));
        thp.status = Status::Info;
        assert!(action_of(&thp).is_none());
        // A kernel parameter cannot help while the firmware has no IOMMU
        // table: no Tuning button where the fix says what comes first.
        let iommu = Finding::new("iommu.enabled", "t", Status::Fail)
            .fix("First give this VM a virtual IOMMU (see iommu.firmware).");
        assert!(action_of(&iommu).is_none());
        let iommu = Finding::new("iommu.enabled", "t", Status::Fail).fix("Add intel_iommu=on.");
        assert!(action_of(&iommu).is_some());
    }
}
