//! Troubleshoot: a short wizard. 1) pick what happens; 2) see what was read;
//! 3) the verdict, the fixes, and what to check where the host cannot look.

use crate::checks::model::Finding;
use crate::doctor::{SYMPTOMS, diagnose, find_symptom};
use crate::ui::app::{Command, VmPage};
use crate::ui::pages::TroubleshootRuntime;
use crate::ui::state::State;
use crate::ui::theme;
use crate::ui::widgets::badges::badge_ui;
use crate::ui::widgets::vm_control::vm_control_ui;
use egui::RichText;

pub fn troubleshoot_ui(
    ui: &mut egui::Ui,
    host_findings: &[Finding],
    rt: &TroubleshootRuntime,
    pending_restart: &[String],
    state: &mut State,
    out: &mut Vec<Command>,
) {
    let vm = rt.vm_findings.as_ref();
    let busy = rt.probe_job.is_busy();
    // The domain, when one is named: its findings join the host's.
    ui.horizontal(|ui| {
        let l = ui.label("VM (optional)");
        ui.add(
            egui::TextEdit::singleline(&mut state.doctor_domain)
                .hint_text("libvirt domain name")
                .desired_width(180.0),
        )
        .labelled_by(l.id);
        let ok = !state.doctor_domain.trim().is_empty() && !busy;
        if ui
            .add_enabled(ok, egui::Button::new("Read the VM"))
            .on_hover_text("Its state and QEMU's, pinning, Hyper-V, Code 43 suspects, and one second of live data while it runs.")
            .clicked()
        {
            out.push(Command::ProbeVm(state.doctor_domain.trim().to_string()));
        }
        match vm {
            _ if busy => {
                ui.weak("reading…");
            }
            Some(Ok(f)) => {
                ui.weak(format!(
                    "{} about the VM included",
                    crate::units::count(f.len(), "finding")
                ));
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, e);
            }
            None => {}
        }
    });
    if let Some(name) = rt.vm.name.as_deref() {
        vm_control_ui(ui, VmPage::Troubleshoot, &rt.vm, name, false, out);
        if pending_restart.iter().any(|d| d == name) {
            ui.colored_label(
                theme::WARN,
                "Pinning was applied to it from the CPU page: it takes effect at its next start.",
            );
        }
    }
    let mut all: Vec<Finding> = host_findings.to_vec();
    if let Some(Ok(f)) = vm {
        all.extend(f.iter().cloned());
    }
    let findings = all.as_slice();
    ui.label(RichText::new("1. What happens?").heading());
    ui.horizontal_wrapped(|ui| {
        for s in SYMPTOMS {
            let selected = state.symptom.as_deref() == Some(s.id);
            // Framed buttons (a selectable label looks like plain text).
            if ui
                .add(egui::Button::new(s.title).selected(selected).frame(true))
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
    let d = diagnose(symptom, findings, matches!(vm, Some(Ok(_))));
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
            super::findings::finding_list_with(ui, &d.findings, Some(&mut *out));
            ui.add_space(6.0);
            ui.label(RichText::new("3. Verdict").heading());
            let (word, color) = (d.outcome.label(), theme::outcome_color(d.outcome));
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
