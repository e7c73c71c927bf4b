//! CPU: the topology drawing with a legend and the summary counts.

use crate::cli::text::topology_counts;
use crate::host::HostSnapshot;
use crate::parse::cpulist::format_cpulist;
use crate::pinning::{PinRequest, plan, validate};
use crate::ui::app::Command;
use crate::ui::state::State;
use crate::ui::views::pin_board::{board_ui, on_cpu};
use crate::ui::views::wizard::WizardRuntime;
use crate::ui::widgets::topology::{CpuMark, CpuMarks, topology_ui_with};
use egui::RichText;

/// The planner's answer for the chosen vCPU count, drawn onto the topology.
fn plan_ui(ui: &mut egui::Ui, s: &HostSnapshot, state: &mut State) -> CpuMarks {
    let t = &s.topology;
    let free = t.summary.cpus_online.saturating_sub(
        t.cores
            .iter()
            .find(|c| c.cpus.contains(&0))
            .map(|c| c.cpus.len())
            .unwrap_or(0),
    );
    let mut marks = CpuMarks::new();
    ui.horizontal(|ui| {
        ui.label("Plan pinning for");
        ui.add(egui::DragValue::new(&mut state.plan_vcpus).range(0..=free).suffix(" vCPUs"))
            .on_hover_text("0 = no plan. The planner keeps SMT pairs, one L3 group and NUMA node, and core 0 for the host.");
        if ui.button("Clear plan").clicked() {
            state.plan_vcpus = 0;
        }
    });
    if state.plan_vcpus == 0 {
        return marks;
    }
    let req = PinRequest {
        vcpus: state.plan_vcpus,
        amd: s.cpu.vendor.as_deref() == Some("AuthenticAMD"),
        ..PinRequest::default()
    };
    match plan(t, &req) {
        Ok(p) => {
            for (v, c) in &p.vcpupin {
                marks.insert(*c, CpuMark::Vcpu(*v));
            }
            for c in &p.emulatorpin {
                marks.insert(*c, CpuMark::Emulator);
            }
            egui::CollapsingHeader::new(format!(
                "Plan for {} vCPUs: why, the XML and the kernel line",
                p.vcpus
            ))
            .id_salt("plan_details")
            .show(ui, |ui| {
                for r in &p.reasons {
                    ui.label(format!("- {r}"));
                }
                for w in &p.warnings {
                    ui.colored_label(egui::Color32::from_rgb(220, 150, 30), format!("! {w}"));
                }
                for problem in validate(t, &p.pinning()) {
                    ui.colored_label(
                        egui::Color32::from_rgb(220, 150, 30),
                        format!("! {}", problem.reason),
                    );
                }
                let xml = p.to_xml();
                ui.horizontal(|ui| {
                    ui.label(RichText::new("libvirt XML").strong());
                    if ui.small_button("Copy XML").clicked() {
                        ui.ctx().copy_text(xml.clone());
                    }
                });
                ui.label(RichText::new(xml).monospace().small());
                let cmdline = p.kernel.cmdline();
                ui.horizontal(|ui| {
                    ui.label(RichText::new("Kernel command line").strong());
                    if ui.small_button("Copy kernel line").clicked() {
                        ui.ctx().copy_text(cmdline.clone());
                    }
                });
                ui.label(RichText::new(cmdline).monospace().small());
            });
        }
        Err(e) => {
            ui.colored_label(ui.visuals().error_fg_color, format!("{e}"));
        }
    }
    marks
}

/// Hover lines for one CPU: the device interrupts allowed to land there.
fn cpu_notes(s: &HostSnapshot, cpu: u32) -> Vec<String> {
    let irqs = &s.system.irq_affinity;
    if irqs.is_empty() {
        return Vec::new();
    }
    let here = irqs.iter().filter(|a| a.cpus.contains(&cpu)).count();
    let only = irqs.iter().filter(|a| a.cpus == [cpu]).count();
    vec![format!(
        "{here} of {} IRQs may land here (smp_affinity_list), {only} only here",
        irqs.len()
    )]
}

pub fn cpu_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    state: &mut State,
    rt: &WizardRuntime,
    out: &mut Vec<Command>,
) {
    let t = &s.topology;
    let sm = &t.summary;
    ui.label(RichText::new(s.cpu.model_name.clone().unwrap_or_else(|| "CPU".into())).heading());
    ui.label(topology_counts(sm, " · "));
    if sm.hybrid {
        let kinds: Vec<String> = t
            .core_kinds
            .iter()
            .rev()
            .map(|k| format!("{} {}s (CPUs {})", k.cores, k.name, format_cpulist(&k.cpus)))
            .collect();
        ui.label(format!(
            "Hybrid CPU: {}. Give a VM's vCPUs the same kind of core.",
            kinds.join(", ")
        ));
    }
    ui.label(format!(
        "Isolated CPUs: {} · nohz_full: {}",
        if t.isolated.is_empty() {
            "none".into()
        } else {
            format_cpulist(&t.isolated)
        },
        if t.nohz_full.is_empty() {
            "none".into()
        } else {
            format_cpulist(&t.nohz_full)
        }
    ));
    ui.label(RichText::new("Threads in one box are SMT siblings of one core: pin them to the VM together. Cores in one L3 group share cache: keep a VM inside one group when it fits.").weak());
    ui.separator();
    let plan_marks = plan_ui(ui, s, state);
    ui.separator();
    let board_marks = board_ui(ui, s, state, rt, out);
    // The board, once it holds chips; the planner's preview otherwise.
    let marks = if board_marks.is_empty() {
        plan_marks
    } else {
        board_marks
    };
    ui.separator();
    let notes = |cpu: u32| cpu_notes(s, cpu);
    let board = &mut state.board;
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            topology_ui_with(ui, t, &marks, &notes, &|_| None, &mut |ui, cpu, resp| {
                on_cpu(board, ui, cpu, resp)
            });
        });
}
