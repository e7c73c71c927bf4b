//! The review step: the one preflight, then define, start, stop.

use super::StepSpec;
use crate::domain::install_needs::NeedStep;
use crate::domain::template::NewDomain;
use crate::ui::app::{Command, VmPage};
use crate::ui::pages::WizardRuntime;
use crate::ui::theme::{self};
use crate::ui::views::findings::finding_list_with;
use crate::ui::vm_model::VmModel;
use crate::ui::widgets::vm_control::vm_control_ui;
use crate::ui::wizard_state::{Step, WizardState};
use egui::RichText;

pub const STEP: StepSpec = StepSpec {
    step: Step::Review,
    title: "Review",
    draw: |ui, cx| {
        if blockers_ui(ui, cx.w, cx.vm, super::vcpus_of(cx.board)) {
            return;
        }
        let sizes = (super::vcpus_of(cx.board), cx.snap.kernel.mem_total_kib);
        review_step(ui, (cx.w, cx.vm, sizes), cx.rt, cx.built, cx.out)
    },
};

/// What stops the VM from installing or passing through, each with the
/// step that gives it: nothing is validated or defined until none is left
/// (libvirt would accept the domain; its first boot would not install).
/// Returns whether anything blocks.
fn blockers_ui(ui: &mut egui::Ui, w: &mut WizardState, vm: &VmModel, vcpus: u32) -> bool {
    let mut blockers: Vec<(String, String, Step)> = Vec::new();
    if !w.has_disk() {
        blockers.push((
            "The VM has no disk.".into(),
            "Windows has nothing to install to. Go back to Storage and name or create one.".into(),
            Step::Storage,
        ));
    }
    for n in w.needs(vm, vcpus) {
        let step = match n.step {
            NeedStep::Gpu => Step::Gpu,
            NeedStep::Storage => Step::Storage,
        };
        blockers.push((n.what.into(), n.why.into(), step));
    }
    if blockers.is_empty() {
        return false;
    }
    ui.heading("Review");
    ui.colored_label(
        theme::BAD,
        "This VM cannot be defined yet: it would not install or would not get its GPU.",
    );
    for (i, (what, why, step)) in blockers.into_iter().enumerate() {
        ui.add_space(4.0);
        ui.colored_label(theme::BAD, RichText::new(what).strong());
        ui.label(theme::detail(why));
        let title = step.spec().title;
        if ui
            .push_id(i, |ui| ui.button(format!("Go to {title}")))
            .inner
            .clicked()
        {
            w.step = step;
        }
    }
    true
}

fn review_step(
    ui: &mut egui::Ui,
    (w, vm, (vcpus, total_kib)): (&mut WizardState, &VmModel, (u32, Option<u64>)),
    rt: &WizardRuntime,
    built: Option<&(NewDomain, Vec<String>)>,
    out: &mut Vec<Command>,
) {
    ui.heading(format!("Review '{}'", vm.name.trim()));
    let Some((d, notes)) = built else { return };
    for n in notes {
        ui.label(format!("Note: {n}"));
    }
    if ui
        .button("Prepare the host for this VM…")
        .on_hover_text("Opens the Tuning page with this VM's GPU bound to vfio-pci at boot and hugepages for its memory: each change shown before it is applied, and undoable.")
        .clicked()
    {
        out.push(Command::OpenTuning {
            focus: vec!["vfio-boot".into(), "hugepages".into()],
            gpus: vm.gpu.iter().cloned().collect(),
            memory_gib: Some(vm.memory_for(None).max(1)),
        });
    }
    let busy = rt.validate_job.is_busy() || rt.define_job.is_busy();
    ui.horizontal(|ui| {
        let l = ui.label("libvirt");
        ui.add(
            egui::TextEdit::singleline(&mut w.uri)
                .hint_text(&rt.default_uri)
                .desired_width(220.0),
        )
        .labelled_by(l.id);
        if ui
            .add_enabled(!busy, egui::Button::new("Validate"))
            .on_hover_text("Will this host start it? libvirt's schema, what this QEMU/KVM gives (a short trial start), the files, memory, network and devices.")
            .clicked()
        {
            out.push(Command::Validate { xml: d.xml.clone() });
        }
        if ui
            .add_enabled(!busy, egui::Button::new("Define in libvirt"))
            .on_hover_text("Adds it to libvirt as this host accepts it (the same checks first); a domain of that name is updated, keeping its UUID, MAC addresses and NVRAM.")
            .clicked()
        {
            out.push(Command::Define {
                xml: d.xml.clone(),
                install: w.install_choices(vm).map(|install| {
                    Box::new(crate::ui::install_jobs::UnattendedDefine {
                        choices: w.choices(vm, vcpus, total_kib),
                        install,
                        caps: rt.caps.clone(),
                    })
                }),
            });
        }
        if busy {
            ui.spinner();
            ui.weak("checking on this host…");
        }
    });
    match &rt.preflight {
        Some((_, Ok(p))) => {
            if p.passes() {
                ui.colored_label(
                    theme::GOOD,
                    "Nothing found that stops it from starting on this host.",
                );
            } else {
                ui.colored_label(theme::BAD, "It will not start on this host as it is:");
            }
            for e in &p.adapted {
                ui.label(RichText::new(format!("Adapted to this host: {}", e.what)).strong());
                ui.label(theme::detail(&e.why));
            }
            finding_list_with(ui, &p.findings, Some(&mut *out));
        }
        Some((_, Err(e))) => {
            ui.colored_label(theme::BAD, format!("Validate failed: {e}"));
        }
        None => {}
    }
    match &rt.defined {
        Some(Ok(plan)) => {
            ui.colored_label(
                theme::GOOD,
                format!(
                    "{} '{}'.",
                    if plan.existing.is_some() {
                        "Updated"
                    } else {
                        "Defined"
                    },
                    plan.name
                ),
            );
            for e in &plan.preflight.adapted {
                ui.label(theme::detail(format!("Adapted to this host: {}", e.what)));
            }
            for k in &plan.kept {
                ui.label(theme::detail(format!(
                    "Kept from the existing domain: {}",
                    k.what
                )));
            }
            vm_control_ui(ui, VmPage::Wizard, &rt.vm, &plan.name, vm.unattended, out);
        }
        Some(Err(e)) => {
            ui.colored_label(theme::BAD, format!("Define failed: {e}"));
        }
        None => {}
    }
    ui.horizontal(|ui| {
        let l = ui.label("File");
        ui.add(
            egui::TextEdit::singleline(&mut w.save_path)
                .hint_text(theme::hint("win11.xml"))
                .desired_width(220.0),
        )
        .labelled_by(l.id);
        if ui
            .add_enabled(
                !w.save_path.trim().is_empty(),
                egui::Button::new("Save XML"),
            )
            .clicked()
        {
            out.push(Command::SaveXml {
                xml: d.xml.clone(),
                path: w.save_path.trim().into(),
            });
        }
        if ui.button("Copy XML").clicked() {
            ui.ctx().copy_text(d.xml.clone());
        }
    });
    match &rt.saved {
        Some(Ok(m)) => {
            ui.label(m);
        }
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().error_fg_color, format!("Save failed: {e}"));
        }
        None => {}
    }
    ui.separator();
    ui.label(theme::mono(&d.xml));
}
