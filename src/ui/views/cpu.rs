//! CPU: the topology drawing with a legend and the summary counts.

use crate::cli::text::topology_counts;
use crate::host::HostSnapshot;
use crate::parse::cpulist::format_cpulist;
use crate::ui::app::Command;
use crate::ui::widgets::topology::topology_ui;
use egui::RichText;

pub fn cpu_ui(ui: &mut egui::Ui, s: &HostSnapshot, _out: &mut Vec<Command>) {
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
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            topology_ui(ui, t);
        });
}
