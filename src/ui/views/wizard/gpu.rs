//! The GPU step: which card (and its passthrough set) goes to the VM.

use super::StepSpec;
use crate::host::HostSnapshot;
use crate::host::iommu::VerdictKind;
use crate::ui::theme::WARN;
use crate::ui::vm_model::VmModel;
use crate::ui::wizard_state::{Step, WizardState};
use egui::RichText;

pub const STEP: StepSpec = StepSpec {
    step: Step::Gpu,
    title: "GPU",
    draw: |ui, cx| {
        gpu_step(ui, cx.snap, (cx.vm, cx.w));
        mode_line(ui, cx.snap, cx.vm, cx.tuning);
    },
};

/// How the host hands the chosen card over: bound at boot, shared with the
/// desktop (lent at each start), or the desktop's only GPU.
fn mode_line(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    w: &VmModel,
    t: &crate::ui::state::TuningChoices,
) {
    let Some(gpu) = w.gpu.as_deref() else {
        return;
    };
    let Some(e) = snap.device(gpu) else {
        return;
    };
    let full = &e.device.address;
    // The Tuning page's mode is for this VM (by name); its card is the
    // VM's own (`State::vm`), the one shown here.
    let named = |v: &str| v.trim() == w.name.trim();
    let text = if named(&t.single_gpu_vm) {
        "How the host hands it over: single GPU (the Tuning page) — the desktop stops while this VM runs and comes back after.".to_string()
    } else if named(&t.shared_gpu_vm) {
        "How the host hands it over: shared (the Tuning page) — the desktop uses it while this VM is off; it is lent at each start and given back at each stop.".to_string()
    } else if e.device.driver.as_deref() == Some("vfio-pci") {
        "How the host hands it over: it is on vfio-pci already (the VM's from boot).".to_string()
    } else if crate::tuning::shared_gpu::misfit(snap, full).is_none() {
        format!(
            "How the host hands it over: not chosen yet — bind it to vfio-pci at boot, or share it (the desktop keeps {full} while the VM is off): the Tuning page, or the Overview's next step."
        )
    } else {
        "How the host hands it over: not chosen yet — the Tuning page binds it to vfio-pci, or, for the desktop's only GPU, single GPU.".to_string()
    };
    ui.add_space(6.0);
    ui.label(RichText::new(text).strong());
}

fn gpu_step(ui: &mut egui::Ui, snap: &HostSnapshot, (w, ws): (&mut VmModel, &mut WizardState)) {
    ui.heading("Which GPU goes to the VM?");
    ui.label("Its whole passthrough set goes with it: the other functions of the card (HDMI audio, USB-C) and anything sharing its IOMMU group.");
    if snap.gpus().next().is_some() && !snap.iommu.active {
        ui.colored_label(
            WARN,
            "The IOMMU is not active on this host, so no GPU can be handed to a VM yet: turn on VT-d / AMD-Vi (\"IOMMU\", \"SVM Mode\" on AMD boards) in the firmware and, where the kernel needs it, intel_iommu=on on its command line (the Overview's next step says which). The VM can be set up now; its GPU is added once the IOMMU is on.",
        );
    }
    if snap.gpus().next().is_none() {
        ui.colored_label(
            WARN,
            if snap.pci_devices.is_empty() {
                "No PCI devices could be read on this host, so no GPU either (a container or a capture without sysfs)."
            } else {
                "This host has no GPU (no display controller among its PCI devices). The VM can still be set up now; add a GPU later."
            },
        );
    }
    // The same rule as the Overview's next step: discrete cards first, the
    // stronger first, the CPU's graphics after (report::vm_card).
    let order = crate::report::vm_card::candidates(snap);
    let mut gpus: Vec<&crate::host::PciEntry> = order.iter().map(|c| c.entry).collect();
    let rest: Vec<&crate::host::PciEntry> = snap
        .gpus()
        .filter(|g| !gpus.iter().any(|x| x.device.address == g.device.address))
        .collect();
    gpus.extend(rest);
    if let Some(first) = order.first() {
        ui.label(
            RichText::new(format!(
                "First is the one this app proposes, the {}: {}.",
                first.name(),
                first.why()
            ))
            .weak(),
        );
    }
    for g in gpus {
        let v = &g.passthrough;
        let addr = &g.device.address;
        let ok = v.verdict != VerdictKind::NotViable;
        let kind = crate::report::vm_card::class_of(snap, g).kind.word();
        let label = format!("{addr}  {} ({kind})", g.device.display_name());
        let selected = w.gpu.as_deref() == Some(addr.as_str());
        let r = ui.add_enabled(ok, egui::RadioButton::new(selected, label));
        if r.clicked() {
            w.gpu = Some(addr.clone());
            ws.no_passthrough = false;
        }
        ui.indent(addr, |ui| {
            let text = RichText::new(&v.reason).weak();
            if ok {
                ui.label(text)
            } else {
                ui.colored_label(WARN, text)
            };
            if selected && !v.companions.is_empty() {
                ui.label(RichText::new(format!(
                    "Goes with: {}",
                    v.companions.join(", ")
                )));
            }
            if selected {
                for n in &v.notes {
                    ui.label(RichText::new(format!("- {n}")).weak());
                }
            }
        });
    }
    let gpu_set: Vec<String> = w
        .gpu
        .as_ref()
        .and_then(|g| snap.device(g))
        .map(|e| e.passthrough.set.clone())
        .unwrap_or_default();
    let extras: Vec<_> = snap
        .pci_devices
        .iter()
        .filter(|e| e.device.is_usb_controller() || e.device.class_subclass() == 0x0403)
        .filter(|e| e.passthrough.verdict != VerdictKind::NotViable)
        .filter(|e| !gpu_set.contains(&e.device.address))
        // A GPU's own HDMI audio goes with its GPU, not on its own.
        .filter(|e| !is_gpu_function(snap, &e.device.address))
        .collect();
    if !extras.is_empty() {
        ui.label(RichText::new("Also pass through").strong()).on_hover_text(
            "A whole USB controller gives the VM its own ports (keyboard, mouse, headset) with no USB redirection; a sound card gives it its own audio.",
        );
        for e in extras {
            let addr = &e.device.address;
            let mut on = w.devices.contains(addr);
            if ui
                .checkbox(&mut on, format!("{addr}  {}", e.device.display_name()))
                .changed()
            {
                if on {
                    w.devices.push(addr.clone());
                } else {
                    w.devices.retain(|d| d != addr);
                }
            }
        }
    }
    if ui
        .radio(
            w.gpu.is_none() && ws.no_passthrough,
            "No passthrough: this VM gets no GPU of its own (its screen is a SPICE window)",
        )
        .clicked()
    {
        w.gpu = None;
        ws.no_passthrough = true;
    }
    if w.gpu.is_none() && !ws.no_passthrough {
        ui.colored_label(
            WARN,
            "Choose the VM's GPU above, or \"No passthrough\" for a VM without one: the Review will not define a passthrough VM without its card.",
        );
    }
}

/// Whether `addr` is another function of a GPU's card (its HDMI audio).
fn is_gpu_function(snap: &HostSnapshot, addr: &str) -> bool {
    let slot = |a: &str| a.rsplit_once('.').map(|(s, _)| s.to_string());
    snap.gpus()
        .any(|g| g.device.address != addr && slot(&g.device.address) == slot(addr))
}
