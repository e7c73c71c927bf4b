//! The CPU topology drawn as nested boxes, lstopo-style: package > NUMA node >
//! L3 group > core > hardware threads. Hybrid core kinds and isolated CPUs are
//! marked; boxes wrap so 256 CPUs stay readable.

use crate::host::topology::{Core, Topology};
use crate::parse::cpulist::format_cpulist;
use crate::report::text::human_kib;
use egui::{Color32, RichText};

use crate::ui::theme::{E_CORE, EMULATOR, ISOLATED, P_CORE, VCPU};

/// What the drawing's marks mean, in one row: a vCPU's pin, the emulator's
/// CPUs, isolated CPUs, the core kinds of a hybrid CPU, and which CPUs are
/// offline (they have no box).
pub fn legend_ui(ui: &mut egui::Ui, t: &Topology) {
    let swatch = |ui: &mut egui::Ui, color: Color32, text: &str| {
        let (rect, _) = ui.allocate_exact_size(egui::vec2(12.0, 12.0), egui::Sense::hover());
        ui.painter().rect_filled(rect, 2.0, color);
        ui.label(text);
        ui.add_space(8.0);
    };
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new("Legend:").strong());
        swatch(ui, VCPU, "v0 … a vCPU pinned here");
        swatch(ui, EMULATOR, "emu: the emulator and I/O threads");
        swatch(ui, ISOLATED, "isolated (isolcpus)");
        if t.summary.hybrid {
            for k in t.core_kinds.iter().rev() {
                let c = if k.efficiency == 0 { E_CORE } else { P_CORE };
                swatch(ui, c, &k.plural());
            }
        }
        let offline: Vec<u32> = t.cpus.iter().filter(|c| !c.online).map(|c| c.id).collect();
        if !offline.is_empty() {
            ui.label(format!(
                "offline, not drawn: CPU {}",
                format_cpulist(&offline)
            ));
        }
    });
}

fn boxed<R>(ui: &mut egui::Ui, fill: Color32, add: impl FnOnce(&mut egui::Ui) -> R) -> R {
    egui::Frame::new()
        .fill(fill)
        .stroke(ui.visuals().widgets.noninteractive.bg_stroke)
        .corner_radius(4.0)
        .inner_margin(4)
        .show(ui, add)
        .inner
}

/// What runs on a host CPU in a pinning plan, drawn on its chip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuMark {
    Vcpu(u32),
    Emulator,
    /// Chips placed by hand on the board, e.g. `v0 emu`.
    Chips(String),
}

pub type CpuMarks = std::collections::BTreeMap<u32, CpuMark>;

/// Extra lines for a CPU's hover (what else runs there: IRQs), asked for only
/// while the pointer is on that CPU.
pub type CpuNotes<'a> = dyn Fn(u32) -> Vec<String> + 'a;

/// A background for a CPU's cell (the monitor's interrupt heat), or none.
pub type CpuShade<'a> = dyn Fn(u32) -> Option<Color32> + 'a;

/// Called for each host CPU's cell after it is drawn (drop targets, drag sources).
pub type OnCpu<'a> = dyn FnMut(&mut egui::Ui, u32, &egui::Response) + 'a;

/// What a core box is drawn with.
struct Draw<'a, 'b> {
    marks: &'a CpuMarks,
    notes: &'a CpuNotes<'a>,
    shade: &'a CpuShade<'a>,
    on_cpu: &'a mut OnCpu<'b>,
}

fn core_ui(ui: &mut egui::Ui, t: &Topology, core: &Core, d: &mut Draw<'_, '_>) {
    let marks = d.marks;
    let kind = core.kind.and_then(|k| t.core_kinds.get(k));
    let color = match kind {
        Some(k) if k.efficiency == 0 => E_CORE,
        Some(_) => P_CORE,
        None => ui.visuals().widgets.inactive.bg_fill,
    };
    boxed(ui, color.linear_multiply(0.25), |ui| {
        ui.vertical(|ui| {
            // Named by its threads, as the CLI names it (`Core::name`).
            let name = core.name();
            let name = format!("C{}", &name[1..]);
            let label = match kind {
                Some(k) => format!("{name} ({})", k.name),
                None => name,
            };
            ui.label(RichText::new(label).small());
            ui.horizontal(|ui| {
                for cpu_id in &core.cpus {
                    let cpu = t.cpu(*cpu_id);
                    let isolated = cpu.is_some_and(|c| c.isolated);
                    let (label, mark_color) = match marks.get(cpu_id) {
                        Some(CpuMark::Vcpu(v)) => (format!("CPU {cpu_id} v{v}"), Some(VCPU)),
                        Some(CpuMark::Emulator) => (format!("CPU {cpu_id} emu"), Some(EMULATOR)),
                        // A vCPU's mark where one sits here, else the emulator's.
                        Some(CpuMark::Chips(c)) => {
                            let vcpu = c.split_whitespace().any(|t| {
                                t.strip_prefix('v').is_some_and(|n| {
                                    n.chars().all(|ch| ch.is_ascii_digit()) && !n.is_empty()
                                })
                            });
                            (
                                format!("CPU {cpu_id} {c}"),
                                Some(if vcpu { VCPU } else { EMULATOR }),
                            )
                        }
                        None => (format!("CPU {cpu_id}"), None),
                    };
                    let text = RichText::new(label).monospace();
                    let text = match (mark_color, isolated) {
                        (Some(c), _) => text.color(c).strong(),
                        (None, true) => text.color(ISOLATED).strong(),
                        (None, false) => text,
                    };
                    let resp = match (d.shade)(*cpu_id) {
                        // On a heat background: text that contrasts with it,
                        // and a marked CPU outlined in the mark's colour.
                        Some(fill) => {
                            let [r, g, b, _] = fill.to_array();
                            let light =
                                0.299 * f32::from(r) + 0.587 * f32::from(g) + 0.114 * f32::from(b)
                                    > 140.0;
                            let ink = if light {
                                Color32::BLACK
                            } else {
                                Color32::WHITE
                            };
                            let stroke = match mark_color {
                                Some(c) => egui::Stroke::new(2.0, c),
                                None => egui::Stroke::NONE,
                            };
                            let text = text.color(ink);
                            egui::Frame::new()
                                .fill(fill)
                                .stroke(stroke)
                                .corner_radius(3.0)
                                .inner_margin(egui::Margin::symmetric(3, 1))
                                .show(ui, |ui| {
                                    ui.add(egui::Label::new(text).sense(egui::Sense::hover()))
                                })
                                .inner
                        }
                        None => ui.add(egui::Label::new(text).sense(egui::Sense::hover())),
                    };
                    (d.on_cpu)(ui, *cpu_id, &resp);
                    let notes = d.notes;
                    resp.on_hover_ui(|ui| {
                        ui.label(format!(
                            "CPU {cpu_id}, {} of package {}",
                            core.name(),
                            core.package_id.unwrap_or(0)
                        ));
                        ui.label(format!("SMT siblings: {}", format_cpulist(&core.cpus)));
                        if let Some(c) = cpu {
                            if let Some(n) = c.numa_node {
                                ui.label(format!("NUMA node {n}"));
                            }
                            if let Some(l3) = c.l3_group {
                                ui.label(format!("L3 group #{l3}"));
                            }
                            if let Some(f) = c.max_freq_khz {
                                ui.label(format!("max {:.1} GHz", f as f64 / 1_000_000.0));
                            }
                            if let Some(g) = &c.governor {
                                ui.label(format!("governor {g}"));
                            }
                            if c.isolated {
                                ui.label("isolated from the host scheduler (isolcpus)");
                            }
                            if c.nohz_full {
                                ui.label("nohz_full: timer tick off when one task runs");
                            }
                        }
                        for n in notes(*cpu_id) {
                            ui.label(n);
                        }
                    });
                }
            });
        });
    });
}

/// Width for one core box: its threads side by side, or its label.
fn core_box_size(t: &Topology, core: &Core) -> egui::Vec2 {
    const THREAD_WIDTH: f32 = 76.0;
    let label = if core.kind.and_then(|k| t.core_kinds.get(k)).is_some() {
        110.0
    } else {
        60.0
    };
    let threads = core.cpus.len() as f32 * THREAD_WIDTH;
    egui::vec2(threads.max(label) + 10.0, 44.0)
}

pub fn topology_ui(ui: &mut egui::Ui, t: &Topology, marks: &CpuMarks) {
    topology_ui_with(ui, t, marks, &|_| Vec::new(), &|_| None, &mut |_, _, _| {});
}

/// The drawing with a hook on every CPU cell (the pinning board's drops).
pub fn topology_ui_with(
    ui: &mut egui::Ui,
    t: &Topology,
    marks: &CpuMarks,
    notes: &CpuNotes<'_>,
    shade: &CpuShade<'_>,
    on_cpu: &mut OnCpu<'_>,
) {
    let mut d = Draw {
        marks,
        notes,
        shade,
        on_cpu,
    };
    let pkg_fill = ui.visuals().faint_bg_color;
    for pkg in t.layout() {
        boxed(ui, pkg_fill, |ui| {
            ui.set_width(ui.available_width());
            ui.label(RichText::new(format!("Package {}", pkg.package_id)).strong());
            for n in &pkg.nodes {
                let node = n.numa_node;
                boxed(ui, pkg_fill, |ui| {
                    ui.set_width(ui.available_width());
                    let mem = node
                        .and_then(|n| t.numa_nodes.iter().find(|x| x.id == n))
                        .and_then(|n| n.memory_kib)
                        .map(|m| format!(" — {} memory", human_kib(m)))
                        .unwrap_or_default();
                    ui.label(format!(
                        "NUMA node {}{mem}",
                        node.map(|n| n.to_string()).unwrap_or("?".into())
                    ));
                    for group in &n.l3s {
                        let l3 = group.l3_group;
                        let cores: Vec<&Core> =
                            group.cores.iter().filter_map(|i| t.cores.get(*i)).collect();
                        boxed(ui, pkg_fill, |ui| {
                            ui.set_width(ui.available_width());
                            let size = l3
                                .and_then(|i| t.l3_groups.get(i))
                                .and_then(|g| g.size_kib)
                                .map(|s| format!(" ({})", human_kib(s)))
                                .unwrap_or_default();
                            ui.label(match l3 {
                                Some(i) => format!("L3 group #{i}{size} — {} cores", cores.len()),
                                None => format!("No shared L3 — {} cores", cores.len()),
                            });
                            ui.horizontal_wrapped(|ui| {
                                for core in &cores {
                                    // A known size lets the row wrap before the box
                                    // instead of squeezing it (256 CPUs stay readable).
                                    ui.allocate_ui(core_box_size(t, core), |ui| {
                                        core_ui(ui, t, core, &mut d)
                                    });
                                }
                            });
                        });
                    }
                });
            }
        });
        ui.add_space(6.0);
    }
    let offline: Vec<u32> = t.cpus.iter().filter(|c| !c.online).map(|c| c.id).collect();
    if !offline.is_empty() {
        ui.label(format!(
            "Offline CPUs (no topology while offline): {}",
            format_cpulist(&offline)
        ));
    }
}
