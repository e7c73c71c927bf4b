//! CPU: the summary counts, the pinning board (filled by the planner or by
//! hand, see pin_board.rs) and the topology drawing the chips sit on.

use crate::host::HostSnapshot;
use crate::parse::cpulist::format_cpulist;
use crate::report::text::topology_counts;
use crate::ui::app::Command;
use crate::ui::pages::CpuRuntime;
use crate::ui::state::State;
use crate::ui::views::pin_board::{board_ui, on_cpu};
use crate::ui::widgets::topology::{CpuMark, topology_ui_with};
use egui::RichText;

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

/// The whole page scrolls as one: with the board's lists and its XML open,
/// the drawing and the Apply row move down instead of out of reach.
pub fn cpu_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    state: &mut State,
    rt: &CpuRuntime,
    out: &mut Vec<Command>,
) {
    egui::ScrollArea::vertical()
        .id_salt("cpu_page")
        .auto_shrink(false)
        .show(ui, |ui| cpu_page_ui(ui, s, state, rt, out));
}

fn cpu_page_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    state: &mut State,
    rt: &CpuRuntime,
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
            .map(|k| {
                format!(
                    "{} {} (CPUs {})",
                    k.cores,
                    k.plural(),
                    format_cpulist(&k.cpus)
                )
            })
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
    // One board: the planner fills it, the user moves chips; the drawing
    // below shows where they sit.
    let marks = board_ui(ui, s, state, rt, out);
    if !state.board.pins.is_empty()
        && ui
            .button("Isolate these CPUs for the VM…")
            .on_hover_text("Opens the Tuning page for the board's CPUs: isolcpus/nohz_full on the kernel command line, interrupts and irqbalance kept off them, the performance governor there.")
            .clicked()
    {
        out.push(Command::OpenTuning {
            focus: vec!["cmdline".into(), "irq-affinity".into(), "irqbalance".into(), "governor".into()],
            gpus: Vec::new(),
            memory_gib: None,
        });
    }
    ui.separator();
    crate::ui::widgets::topology::legend_ui(ui, t);
    let notes = |cpu: u32| {
        let mut lines = cpu_notes(s, cpu);
        lines.push(match marks.get(&cpu) {
            Some(CpuMark::Vcpu(v)) => format!("The board pins vCPU {v} here."),
            Some(CpuMark::Emulator) => "The board runs the VM's emulator threads here.".into(),
            Some(CpuMark::Chips(c)) => format!("The board puts {c} here."),
            None => "The board puts nothing of the VM here: the host's tasks run here.".into(),
        });
        lines
    };
    let board = &mut state.board;
    // Wider than the window on big hosts: the drawing alone scrolls sideways.
    egui::ScrollArea::horizontal()
        .id_salt("cpu_drawing")
        .show(ui, |ui| {
            topology_ui_with(ui, t, &marks, &notes, &|_| None, &mut |ui, cpu, resp| {
                on_cpu(board, ui, cpu, resp)
            });
        });
}
