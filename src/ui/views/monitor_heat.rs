//! The Monitor page's interrupt heat: per CPU over the topology drawing or
//! as a compact strip, on one fixed scale with its legend, and the words a
//! CPU says under the pointer (and to a screen reader).

use crate::host::topology::Topology;
use crate::monitor::rates::Rates;
use crate::monitor::sampler::Update;
use crate::ui::widgets::topology::{CpuMark, CpuMarks, topology_ui_with};
use egui::{Color32, Sense, Stroke, vec2};
use std::collections::{BTreeMap, BTreeSet};

/// The rate that shows as full heat. A fixed scale, so a colour means the
/// same on every host and in every sample: scaled to the busiest CPU, an
/// idle host's 20 timer ticks a second would glow as red as a GPU's 20 000
/// interrupts. 10 000/s is a busy CPU: an idle desktop core takes tens to a
/// thousand (mostly the timer), a gaming VM's GPU and audio thousands.
pub const HEAT_FULL: f64 = 10_000.0;

/// The colour of `v` interrupts/s: log scale in three stretches — dark
/// slate (none) to a calm blue at 100/s (an idle core: the timer), to amber
/// at 1 000/s, to red at `HEAT_FULL` or more (a CPU busy with a device's
/// interrupts). Red means busy, never an idle core's ticks.
pub fn heat(v: f64) -> Color32 {
    let x = ((v.max(0.0) + 1.0).ln() / (HEAT_FULL + 1.0).ln()).clamp(0.0, 1.0);
    const DARK: (u8, u8, u8) = (40, 50, 70);
    const CALM: (u8, u8, u8) = (50, 100, 150);
    const AMBER: (u8, u8, u8) = (200, 170, 60);
    const RED: (u8, u8, u8) = (230, 50, 40);
    let (from, to, y) = if x < 0.5 {
        (DARK, CALM, x * 2.0)
    } else if x < 0.75 {
        (CALM, AMBER, (x - 0.5) * 4.0)
    } else {
        (AMBER, RED, (x - 0.75) * 4.0)
    };
    let lerp = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * y).round() as u8;
    Color32::from_rgb(lerp(from.0, to.0), lerp(from.1, to.1), lerp(from.2, to.2))
}

pub fn heat_strip(ui: &mut egui::Ui, r: &Rates, vm_cpus: &BTreeSet<u32>) {
    ui.horizontal_wrapped(|ui| {
        for (cpu, v) in &r.irq_per_cpu {
            let (rect, resp) = ui.allocate_exact_size(vec2(34.0, 30.0), Sense::hover());
            let painter = ui.painter();
            painter.rect_filled(rect, 3.0, heat(*v));
            if vm_cpus.contains(cpu) {
                painter.rect_stroke(
                    rect,
                    3.0,
                    Stroke::new(2.0, Color32::from_rgb(60, 180, 90)),
                    egui::StrokeKind::Inside,
                );
            }
            painter.text(
                rect.center(),
                egui::Align2::CENTER_CENTER,
                cpu.to_string(),
                egui::FontId::proportional(super::super::theme::MIN_TEXT_SIZE),
                Color32::WHITE,
            );
            let text = cpu_text(r, *cpu, *v, vm_cpus.contains(cpu));
            resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, &text));
            resp.on_hover_text(text);
        }
    });
}

/// What the pointer on a CPU shows: its rate, how busy it is, whose it is.
fn cpu_text(r: &Rates, cpu: u32, v: f64, vm_cpu: bool) -> String {
    let busy = r.cpu_use.iter().find(|c| c.cpu == cpu);
    let freq = r.freq_mhz.iter().find(|(c, _)| *c == cpu);
    let governor = r.governors.iter().find(|g| g.cpus.contains(&cpu));
    format!(
        "CPU {cpu}: {v:.0} interrupts/s{}{}{}{}",
        busy.map(|b| format!(
            ", {:.0}% busy ({:.0}% in IRQ/softirq)",
            b.busy * 100.0,
            (b.irq + b.softirq) * 100.0
        ))
        .unwrap_or_default(),
        freq.map(|(_, mhz)| format!(", {mhz:.0} MHz"))
            .unwrap_or_default(),
        governor
            .map(|g| format!(", governor {}", g.governor))
            .unwrap_or_default(),
        if vm_cpu { " - a VM CPU" } else { "" }
    )
}

/// The scale under the drawing: what each shade means, and what red says.
pub fn heat_legend(ui: &mut egui::Ui) {
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing.x = 4.0;
        ui.weak("interrupts/s:");
        for (v, label) in [
            (0.0, "0"),
            (10.0, "10"),
            (100.0, "100"),
            (1000.0, "1k"),
            (HEAT_FULL, "10k+"),
        ] {
            let (rect, _) = ui.allocate_exact_size(vec2(14.0, 10.0), Sense::hover());
            ui.painter().rect_filled(rect, 2.0, heat(v));
            ui.weak(label);
        }
        ui.weak("(log scale) · blue: idle (an idle core takes tens to hundreds, its timer) · red: 10 000/s or more, a CPU busy with a device's interrupts · point at a CPU for its numbers");
    });
}

/// The interrupt heat on each CPU of the topology drawing: SMT siblings,
/// L3 groups and NUMA nodes stay visible, so "the IRQs all land on the VM's
/// L3 group" can be seen. The VM's CPUs carry their vCPU number.
pub fn heat_topology(ui: &mut egui::Ui, t: &Topology, u: &Update, vm_cpus: &BTreeSet<u32>) {
    let r = &u.rates;
    let rate: BTreeMap<u32, f64> = r.irq_per_cpu.iter().copied().collect();
    let mut marks = CpuMarks::new();
    for (vcpu, cpus) in u.vm.iter().flat_map(|vm| vm.pins.iter()) {
        for c in cpus {
            marks.insert(*c, CpuMark::Vcpu(*vcpu));
        }
    }
    let notes = |cpu: u32| {
        let v = rate.get(&cpu).copied().unwrap_or(0.0);
        vec![cpu_text(r, cpu, v, vm_cpus.contains(&cpu))]
    };
    let shade = |cpu: u32| rate.get(&cpu).map(|v| heat(*v));
    egui::ScrollArea::vertical()
        .id_salt("heat_topology")
        .max_height(340.0)
        .show(ui, |ui| {
            // Screen readers (and the tests) get the same words as the hover.
            topology_ui_with(ui, t, &marks, &notes, &shade, &mut |_, cpu, resp| {
                let v = rate.get(&cpu).copied().unwrap_or(0.0);
                let text = cpu_text(r, cpu, v, vm_cpus.contains(&cpu));
                resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, &text));
            });
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redness(c: Color32) -> u8 {
        c.r()
    }

    #[test]
    fn the_heat_scale_is_fixed_and_grows_with_the_rate() {
        // None is dark, 10 000/s and more is full, and the order holds between.
        assert_eq!(heat(0.0), Color32::from_rgb(40, 50, 70));
        assert_eq!(heat(HEAT_FULL), Color32::from_rgb(230, 50, 40));
        assert_eq!(heat(1e6), heat(HEAT_FULL));
        let rates = [0.0, 5.0, 20.0, 300.0, 2000.0, 9000.0];
        for w in rates.windows(2) {
            assert!(redness(heat(w[0])) < redness(heat(w[1])), "{w:?}");
        }
        // An idle CPU's timer ticks stay well short of full heat, whatever
        // the other CPUs do (the scale does not follow the busiest one).
        assert!(redness(heat(20.0)) < 130, "{:?}", heat(20.0));
        // An idle core at ~75/s (its timer and a few devices) is blue, not red.
        for idle in [20.0, 75.0, 150.0] {
            let c = heat(idle);
            assert!(c.r() < c.b(), "{idle}/s: {c:?}");
        }
        // Red is busy: more red than green and blue by far.
        let c = heat(HEAT_FULL);
        assert!(c.r() > 3 * c.g() && c.r() > 3 * c.b(), "{c:?}");
        // Neighbouring decades differ at a glance.
        for w in [0.0, 10.0, 100.0, 1000.0, 10_000.0].windows(2) {
            let (a, b) = (heat(w[0]), heat(w[1]));
            let d: i32 = [
                a.r().abs_diff(b.r()),
                a.g().abs_diff(b.g()),
                a.b().abs_diff(b.b()),
            ]
            .iter()
            .map(|&x| i32::from(x))
            .sum();
            assert!(d >= 50, "{w:?}: {a:?} vs {b:?}");
        }
        // Garbage never panics or goes below dark.
        assert_eq!(heat(-5.0), heat(0.0));
        assert_eq!(heat(f64::NAN), heat(0.0));
    }
}
