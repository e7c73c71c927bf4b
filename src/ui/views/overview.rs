//! Overview: the host in words a newcomer understands — can this CPU do it, is
//! the IOMMU on, what the firmware and kernel say, and the GPUs with verdicts.

use crate::checks::model::Finding;
use crate::host::HostSnapshot;
use crate::report::next_step::{NextAction, next_step_with};
use crate::report::text::human_kib;
use crate::tuning::kinds::Kind;
use crate::ui::app::Command;
use crate::ui::state::Page;
use crate::ui::widgets::badges::{badge_ui, verdict_color, verdict_label};
use egui::RichText;

use crate::ui::theme::{BAD, GOOD, WARN};

/// The host in three sentences a newcomer understands.
fn summary_ui(ui: &mut egui::Ui, s: &HostSnapshot) {
    let cpu = s.cpu.model_name.as_deref().unwrap_or("unknown CPU");
    let virt = match s.cpu.virtualization() {
        Some(v) => format!("{v}: the CPU can run virtual machines with hardware help."),
        None if s.firmware.dev_kvm => {
            "The CPU flags hide VT-x/AMD-V, but KVM works (this host is itself a VM).".to_string()
        }
        None => "No VT-x/AMD-V: the CPU cannot run fast VMs until it is enabled in the firmware."
            .to_string(),
    };
    ui.label(RichText::new(cpu).strong());
    ui.label(virt);
    let iommu = if s.iommu.active {
        RichText::new(format!("IOMMU on: {} IOMMU groups. A group is the smallest set of devices that can be handed to a VM.", s.iommu.groups)).color(GOOD)
    } else if s.cpu.hypervisor
        && s.firmware.acpi_tables_visible
        && !s.firmware.acpi_dmar
        && !s.firmware.acpi_ivrs
    {
        RichText::new("IOMMU not active: this host is a VM without a virtual IOMMU, so it has no device to pass through. Passthrough is set up on the bare-metal host.").color(BAD)
    } else {
        RichText::new("IOMMU not active: no device can be passed through until VT-d / AMD-Vi is on in the firmware and the kernel.").color(BAD)
    };
    ui.label(iommu);
}

fn card(ui: &mut egui::Ui, title: &str, add: impl FnOnce(&mut egui::Ui)) {
    egui::Frame::group(ui.style())
        .inner_margin(10)
        .show(ui, |ui| {
            ui.set_width(ui.available_width());
            ui.label(RichText::new(title).heading());
            ui.add_space(4.0);
            add(ui);
        });
    ui.add_space(8.0);
}

/// The one thing to do now, with the button that does it.
fn next_step_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    findings: &[Finding],
    chosen: Option<&str>,
    out: &mut Vec<Command>,
) {
    let step = next_step_with(s, findings, chosen);
    ui.label(RichText::new(&step.sentence).strong().size(16.0));
    if !matches!(
        step.action,
        NextAction::ChooseGpu { .. } | NextAction::MoveScreen { .. }
    ) {
        ui.label(crate::ui::theme::detail(&step.why));
    }
    ui.add_space(4.0);
    action_ui(ui, s, &step.action, out);
    for alt in &step.alternatives {
        if let NextAction::Tuning {
            change: Kind::SingleGpuHook,
            device: Some(gpu),
        } = &alt.action
            && ui
                .button(&alt.label)
                .on_hover_text("Opens the Tuning page in single-GPU mode: a hook hands the card to the VM when it starts (the desktop stops) and gives it back when it stops.")
                .clicked()
        {
            out.push(Command::OpenSingleGpuTuning { gpu: gpu.clone() });
        }
    }
}

/// The button (or the words) that carry a step out.
fn action_ui(ui: &mut egui::Ui, s: &HostSnapshot, action: &NextAction, out: &mut Vec<Command>) {
    match action {
        NextAction::Tuning { change, device } => {
            let label = if *change == Kind::VfioBoot {
                "Bind it on the Tuning page"
            } else {
                "Fix on the Tuning page"
            };
            if ui
                .button(label)
                .on_hover_text("Opens the Tuning page with this change selected: you see exactly what it writes before you apply it, and can undo it.")
                .clicked()
            {
                out.push(Command::OpenTuning {
                    focus: vec![(*change).to_string()],
                    gpus: device.iter().filter(|_| *change == Kind::VfioBoot).cloned().collect(),
                    memory_gib: None,
                });
            }
            // A second GPU may also stay the desktop's while the VM is off.
            if let Some(gpu) = device.as_ref().filter(|_| *change == Kind::VfioBoot)
                && s.device(gpu).is_some_and(|e| e.device.is_gpu())
                && crate::tuning::shared_gpu::misfit(s, gpu).is_none()
                && ui
                    .button("Or share it: the desktop's while the VM is off")
                    .on_hover_text("Opens the Tuning page in shared mode: the card stays on its driver for Linux (games, CUDA, render offload), and a hook lends it to the VM at its start and gives it back at its stop, without a reboot or a logout.")
                    .clicked()
            {
                out.push(Command::OpenSharedTuning { gpu: gpu.clone() });
            }
        }
        NextAction::RestoreHost { transaction } => {
            if ui
                .button("Restore the host")
                .on_hover_text("Puts every file, value and boot file back as it was before the interrupted tuning, from its journal. The Tuning page shows each step.")
                .clicked()
            {
                out.push(Command::TuningUndo {
                    id: transaction.clone(),
                });
                out.push(Command::ShowPage(Page::Tuning));
            }
        }
        NextAction::NewVm => {
            if ui.button("Create the VM").clicked() {
                out.push(Command::ShowPage(Page::NewVm));
            }
        }
        NextAction::ByHand => {
            ui.weak("This is done outside the running system (the firmware setup, a slot, a cable): no button here can do it.");
        }
        NextAction::ChooseGpu { cards } => {
            ui.label("One card goes to the VM and the host keeps the other; the first is the one this app would pick:");
            for c in cards {
                ui.horizontal_wrapped(|ui| {
                    if ui
                        .button(format!("Use the {} for the VM", c.name))
                        .on_hover_text(format!("{}: {}", c.address, c.why))
                        .clicked()
                    {
                        out.push(Command::ChooseVmGpu(c.address.clone()));
                    }
                    ui.label(crate::ui::theme::detail(format!("{} — {}", c.address, c.why)));
                });
            }
        }
        NextAction::MoveScreen { steps, .. } => {
            for (i, step) in steps.iter().enumerate() {
                ui.label(format!("{}. {step}", i + 1));
            }
            ui.weak("These are done in the firmware setup and at the back of the machine: no button here can do them. After the reboot this page says whether it took.");
        }
    }
}

pub fn overview_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    findings: &[Finding],
    chosen_gpu: Option<&str>,
    inside: &super::inside_vm::InsideVm<'_>,
    out: &mut Vec<Command>,
) {
    egui::ScrollArea::vertical().auto_shrink(false).show(ui, |ui| {
        card(ui, "Next step", |ui| next_step_ui(ui, s, findings, chosen_gpu, out));
        card(ui, "This host", |ui| summary_ui(ui, s));
        card(ui, "Checks", |ui| super::findings::findings_ui(ui, findings, Some(&mut *out)));
        card(ui, "GPUs", |ui| {
            let gpus: Vec<_> = s.gpus().collect();
            if gpus.is_empty() {
                ui.label("No display controller found.");
            }
            for e in gpus {
                ui.horizontal_wrapped(|ui| {
                    badge_ui(ui, verdict_label(e.passthrough.verdict), verdict_color(e.passthrough.verdict));
                    if ui.link(format!("{}  {}", e.device.address, e.device.display_name())).clicked() {
                        out.push(Command::ShowDevice(e.device.address.clone()));
                    }
                    let class = crate::report::vm_card::class_of(s, e);
                    ui.label(RichText::new(class.kind.word()).weak())
                        .on_hover_text(&class.because);
                });
                ui.label(RichText::new(&e.passthrough.reason).weak());
                ui.add_space(4.0);
            }
        });
        card(ui, "Inside the VM", |ui| super::inside_vm::inside_vm_ui(ui, inside, out));
        card(ui, "Details", |ui| {
            let t = &s.topology.summary;
            ui.label(format!(
                "{} PCI functions in {} IOMMU groups; {} package(s), {} NUMA node(s), {} L3 group(s), {} cores, {} CPUs online{}.",
                s.pci_devices.len(),
                s.iommu.groups,
                t.packages,
                t.numa_nodes,
                t.l3_groups,
                t.cores,
                t.cpus_online,
                if t.cpus_offline > 0 { format!(" ({} offline)", t.cpus_offline) } else { String::new() }
            ));
            let k = &s.kernel;
            ui.label(format!("Kernel {}", k.release.as_deref().unwrap_or("(release unknown)")));
            if let Some(c) = &k.cmdline {
                ui.label(crate::ui::theme::mono(format!("Command line: {}", c.raw)));
            }
            let pools: Vec<String> = k.hugepages.iter().map(|p| format!("{}: {} of {} free", human_kib(p.size_kib), p.free, p.total)).collect();
            ui.label(format!(
                "Transparent hugepages: {}; hugepages: {}; clocksource: {}",
                k.thp_enabled.as_deref().unwrap_or("unknown"),
                if pools.is_empty() { "none".into() } else { pools.join(", ") },
                k.clocksource.as_deref().unwrap_or("unknown")
            ));
            if !s.warnings.is_empty() {
                ui.label(RichText::new(format!("{} file(s) could not be read; the rest is shown.", s.warnings.len())).color(WARN))
                    .on_hover_text(s.warnings.iter().take(20).map(|w| format!("{}: {}", w.path, w.message)).collect::<Vec<_>>().join("\n"));
            }
        });
    });
}
