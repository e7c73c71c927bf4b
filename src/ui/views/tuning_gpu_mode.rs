//! The Tuning page's choice of how the VM's GPU is had: bound to vfio-pci
//! at boot (no hook: the card is the VM's), **shared** (the desktop uses
//! the second GPU while the VM is off; a hook lends it at the VM's start),
//! or **single GPU** (the desktop's only GPU, the desktop stopped while
//! the VM runs). The two hook modes are one VM's, by name; they exclude
//! each other.

use crate::host::HostSnapshot;
use crate::ui::state::TuningChoices;
use crate::ui::theme;

/// Shared mode asked for (a VM named, single GPU not).
pub fn shared_on(c: &TuningChoices) -> bool {
    !c.shared_gpu_vm.trim().is_empty() && c.single_gpu_vm.trim().is_empty()
}

/// The units the user allowed the hook to stop.
pub fn stop_units(c: &TuningChoices) -> Vec<String> {
    if !shared_on(c) {
        return Vec::new();
    }
    c.shared_stop
        .split(|ch: char| ch.is_whitespace() || ch == ',')
        .filter(|u| !u.is_empty())
        .map(|u| {
            if u.ends_with(".service") {
                u.to_string()
            } else {
                format!("{u}.service")
            }
        })
        .collect()
}

/// Why the chosen card does not fit shared mode (`None`: it fits).
fn shared_misfit(card: Option<&str>, snap: &HostSnapshot) -> Option<String> {
    crate::tuning::shared_gpu::misfit(snap, card?)
}

/// `card`: the VM's first card (`tuning::vm_cards`).
pub fn gpu_mode_ui(
    ui: &mut egui::Ui,
    c: &mut TuningChoices,
    snap: &HostSnapshot,
    card: Option<&str>,
) {
    // Offered where it fits: a second GPU for the desktop.
    if snap.gpus().count() >= 2 || !c.shared_gpu_vm.trim().is_empty() {
        shared_ui(ui, c, snap, card);
    }
    single_ui(ui, c);
}

fn shared_ui(ui: &mut egui::Ui, c: &mut TuningChoices, snap: &HostSnapshot, card: Option<&str>) {
    ui.horizontal(|ui| {
        let l = ui.label("Shared: the desktop uses the GPU while this VM is off");
        ui.add(
            egui::TextEdit::singleline(&mut c.shared_gpu_vm)
                .desired_width(140.0)
                .hint_text("VM name"),
        )
        .labelled_by(l.id)
        .on_hover_text("The card stays on its own driver (games, CUDA, render offload on Linux). A libvirt hook lends it to this VM when it starts — refusing the start, with who holds the card, rather than hang — and gives it back when it stops, without a reboot or a logout. The compositor is told to leave it alone. Empty: the card is the VM's from boot.");
        if !c.shared_gpu_vm.trim().is_empty() {
            let l = ui.label("may stop");
            ui.add(
                egui::TextEdit::singleline(&mut c.shared_stop)
                    .desired_width(160.0)
                    .hint_text("ollama.service …"),
            )
            .labelled_by(l.id)
            .on_hover_text("Services the hook may stop at the VM's start when they hold the card, and starts again when it stops (nvidia-persistenced always). Anything else holding it makes the start fail with its name.");
        }
    });
    if !c.shared_gpu_vm.trim().is_empty()
        && let Some(why) = shared_misfit(card, snap)
    {
        ui.colored_label(theme::WARN, format!("Shared: {why}."));
    }
    let (sh, i) = (c.shared_gpu_vm.trim(), c.isolate_vm.trim());
    if !sh.is_empty() && !i.is_empty() && sh != i {
        ui.colored_label(
            theme::WARN,
            "Both hooks are for one VM: give the same name as above.",
        );
    }
}

fn single_ui(ui: &mut egui::Ui, c: &mut TuningChoices) {
    ui.horizontal(|ui| {
        let l = ui.label("Single GPU: this VM takes the desktop's only GPU");
        ui.add(
            egui::TextEdit::singleline(&mut c.single_gpu_vm)
                .desired_width(140.0)
                .hint_text("VM name"),
        )
        .labelled_by(l.id)
        .on_hover_text("A libvirt hook stops the desktop when this VM starts and gives the screen back when it stops (or its start fails). Empty: the host keeps its GPU.");
        let s = c.single_gpu_vm.trim();
        let i = c.isolate_vm.trim();
        if !s.is_empty() && !i.is_empty() && s != i {
            ui.colored_label(
                theme::WARN,
                "Both hooks are for one VM: give the same name as above.",
            );
        }
        if !s.is_empty() && !c.shared_gpu_vm.trim().is_empty() {
            ui.colored_label(
                theme::WARN,
                "Shared and Single GPU are two ways to use one card: Single GPU is taken.",
            );
        }
    });
}
