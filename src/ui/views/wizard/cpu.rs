//! The CPU step: how many vCPUs, pinned by the planner.

use super::StepSpec;
use crate::domain::template::NewDomain;
use crate::host::HostSnapshot;
use crate::ui::wizard_state::{Step, WizardState};

pub const STEP: StepSpec = StepSpec {
    step: Step::Cpu,
    title: "CPU",
    draw: |ui, cx| cpu_step(ui, cx.snap, cx.w, cx.built),
};

fn cpu_step(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    w: &mut WizardState,
    built: Option<&(NewDomain, Vec<String>)>,
) {
    ui.heading("How many vCPUs?");
    let online = snap.topology.summary.cpus_online.max(1);
    ui.horizontal(|ui| {
        let l = ui.label("vCPUs");
        ui.add(egui::DragValue::new(&mut w.vcpus).range(1..=online))
            .labelled_by(l.id);
        ui.weak(format!("of {online} host CPUs"));
    });
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
