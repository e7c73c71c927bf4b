//! The CPU step: how many vCPUs, pinned by the planner.

use super::StepSpec;
use crate::domain::template::NewDomain;
use crate::host::HostSnapshot;
use crate::pinning::board::Board;
use crate::ui::vm_model::SUGGESTED_VCPUS;
use crate::ui::wizard_state::{Step, WizardState};

pub const STEP: StepSpec = StepSpec {
    step: Step::Cpu,
    title: "CPU",
    draw: |ui, cx| cpu_step(ui, cx.snap, (cx.w, cx.board), cx.built),
};

fn cpu_step(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    (w, board): (&mut WizardState, &mut Board),
    built: Option<&(NewDomain, Vec<String>)>,
) {
    ui.heading("How many vCPUs?");
    let online = u32::try_from(snap.topology.summary.cpus_online.max(1)).unwrap_or(u32::MAX);
    ui.horizontal(|ui| {
        let l = ui.label("vCPUs");
        let mut n = super::vcpus_of(board);
        if ui
            .add(egui::DragValue::new(&mut n).range(1..=online))
            .labelled_by(l.id)
            .on_hover_text("The same vCPUs as the CPU page's board and the Tuning page.")
            .changed()
        {
            board.set_vcpus(n);
        }
        ui.weak(format!("of {online} host CPUs"));
    });
    if board.vcpus == 0 {
        ui.weak(format!(
            "The wizard suggests {SUGGESTED_VCPUS} vCPUs; the CPU page's board has none yet (changing the number here sets it there)."
        ));
    } else if !board.pins.is_empty() {
        let mut cpus: Vec<u32> = board.pins.values().copied().collect();
        cpus.sort_unstable();
        cpus.dedup();
        ui.label(format!(
            "Your board on the CPU page pins these {} vCPUs to CPUs {}; the plan below is the wizard's own: use the board's by applying it to the VM on the CPU page once it is defined.",
            board.vcpus,
            crate::parse::cpulist::format_cpulist(&cpus)
        ));
    }
    ui.checkbox(&mut w.pin, "Pin vCPUs to host cores (recommended)")
        .on_hover_text("Each vCPU keeps its own host thread and cache; the host keeps core 0 for itself, the emulator and I/O.");
    if let Some((d, _)) = built {
        for e in d
            .edits
            .iter()
            .filter(|e| e.path == "cputune" || e.path == "cpu")
        {
            ui.label(format!("{} — {}", e.what, e.why));
        }
    }
}
