//! The features step: Hyper-V enlightenments, TPM, Secure Boot and the rest.

use super::StepSpec;
use crate::domain::template::NewDomain;
use crate::ui::theme::{self};
use crate::ui::wizard_state::{Step, WizardState};
use egui::RichText;

pub const STEP: StepSpec = StepSpec {
    step: Step::Features,
    title: "Features",
    draw: |ui, cx| features_step(ui, (cx.w, &mut cx.vm.name), cx.built),
};

fn features_step(
    ui: &mut egui::Ui,
    (w, name): (&mut WizardState, &mut String),
    built: Option<&(NewDomain, Vec<String>)>,
) {
    ui.heading("Name, Windows and features");
    ui.horizontal(|ui| {
        let l = ui.label("Name");
        ui.text_edit_singleline(name).labelled_by(l.id);
    });
    ui.horizontal(|ui| {
        ui.radio_value(&mut w.windows11, true, "Windows 11 (Secure Boot, TPM 2.0)");
        ui.radio_value(&mut w.windows11, false, "Windows 10");
    });
    ui.checkbox(
        &mut w.hide_kvm,
        "Hide KVM from the guest (only for NVIDIA drivers before 465: Code 43)",
    );
    ui.checkbox(
        &mut w.io_uring,
        "Disk I/O through io_uring instead of native AIO",
    );
    ui.checkbox(
        &mut w.spice,
        "A SPICE window for the install (remove it once the GPU drives a monitor)",
    );
    egui::CollapsingHeader::new("Windows 11, anti-cheat and Code 43, plainly")
        .id_salt("realities")
        .show(ui, |ui| {
            for (topic, text) in crate::domain::realities::REALITIES {
                ui.label(RichText::new(*topic).strong());
                ui.label(theme::detail(*text));
            }
        });
    ui.separator();
    ui.label(RichText::new("What the VM gets").strong());
    if let Some((d, _)) = built {
        for (i, e) in d.edits.iter().enumerate() {
            egui::CollapsingHeader::new(&e.what)
                .id_salt(("feature", i))
                .show(ui, |ui| {
                    ui.label(theme::detail(&e.why));
                });
        }
    }
}
