//! The memory step: how much, and on which hugepages.

use super::StepSpec;
use crate::host::HostSnapshot;
use crate::ui::theme::WARN;
use crate::ui::vm_model::VmModel;
use crate::ui::wizard_state::{HugeChoice, Step};

pub const STEP: StepSpec = StepSpec {
    step: Step::Memory,
    title: "Memory",
    draw: |ui, cx| memory_step(ui, cx.snap, cx.vm),
};

fn memory_step(ui: &mut egui::Ui, snap: &HostSnapshot, w: &mut VmModel) {
    ui.heading("Memory");
    let total = snap.kernel.mem_total_kib;
    let mut gib = w.memory_for(total);
    let max_gib = total.map_or(4096, |k| (k / (1024 * 1024)).max(1));
    ui.horizontal(|ui| {
        let l = ui.label("Guest memory");
        if ui
            .add(
                egui::DragValue::new(&mut gib)
                    .range(1..=max_gib.max(1))
                    .suffix(" GiB"),
            )
            .labelled_by(l.id)
            .changed()
        {
            w.memory_gib = gib;
        }
        match (total, snap.kernel.mem_available_kib) {
            (Some(t), Some(a)) => ui.weak(format!(
                "this host has {:.1} GiB, {:.1} GiB free now",
                t as f64 / 1_048_576.0,
                a as f64 / 1_048_576.0
            )),
            (Some(t), None) => ui.weak(format!("this host has {:.1} GiB", t as f64 / 1_048_576.0)),
            _ => ui.weak("the host's memory is not known"),
        };
    });
    if let Some(t) = total
        && gib.saturating_mul(1_048_576) > t.saturating_mul(3) / 4
    {
        ui.colored_label(WARN, "That leaves the host less than a quarter of its memory: a VM with a device passed through pins all of its memory, so the host cannot get it back while the VM runs.");
    }
    ui.label("Hugepages");
    ui.horizontal(|ui| {
        ui.radio_value(
            &mut w.hugepages,
            HugeChoice::Auto,
            "Whatever the host has reserved",
        );
        ui.radio_value(&mut w.hugepages, HugeChoice::TwoMiB, "2 MiB");
        ui.radio_value(&mut w.hugepages, HugeChoice::OneGiB, "1 GiB");
        ui.radio_value(&mut w.hugepages, HugeChoice::Off, "None");
    });
    if snap.kernel.hugepages.is_empty() {
        ui.weak("The host lists no hugepage pools.");
    }
    for p in &snap.kernel.hugepages {
        let gib = (p.free * p.size_kib) as f64 / 1_048_576.0;
        ui.label(format!(
            "Host: {} free of {} reserved {} pages ({gib:.1} GiB free)",
            p.free,
            p.total,
            if p.size_kib >= 1_048_576 {
                "1 GiB"
            } else {
                "2 MiB"
            }
        ));
    }
    ui.weak("Reserved hugepages make guest memory faster (fewer TLB misses) and sure to be there at start; reserve them at boot (hugepages=N) or before starting the VM.");
}
