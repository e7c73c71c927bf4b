//! Drag-to-pin on the CPU page: vCPU, emulator and iothread chips in a tray,
//! dragged onto host threads in the topology drawing (and back to the tray to
//! unpin). Every drag has an accessible twin: a selector per vCPU and CPU lists
//! for the emulator and iothread. The validator's problems show next to the
//! vCPU they concern, live; the result is the XML fragment, the kernel line,
//! and "apply to a libvirt domain".

use crate::host::HostSnapshot;
use crate::parse::cpulist::{format_cpulist, parse_cpulist};
use crate::pinning::board::{Board, Chip};
use crate::pinning::{PinPlan, PinRequest, plan, validate};
use crate::ui::app::Command;
use crate::ui::pages::CpuRuntime;
use crate::ui::state::State;
use crate::ui::widgets::a11y::name_control;
use crate::ui::widgets::topology::{CpuMark, CpuMarks};
use egui::RichText;

use crate::ui::theme::WARN;

/// What is being dragged, and from which CPU (None: from the tray).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DragChip {
    pub chip: Chip,
    pub from: Option<u32>,
}

fn amd(s: &HostSnapshot) -> bool {
    s.cpu.vendor.as_deref() == Some("AuthenticAMD")
}

/// The marks the drawing shows for the board.
pub fn board_marks(b: &Board) -> CpuMarks {
    let mut m = CpuMarks::new();
    let cpus: std::collections::BTreeSet<u32> = b
        .pins
        .values()
        .chain(b.emulator.iter())
        .chain(b.iothread.iter())
        .copied()
        .collect();
    for c in cpus {
        let text: Vec<String> = b
            .chips_on(c)
            .iter()
            .map(|ch| match ch {
                Chip::Vcpu(v) => format!("v{v}"),
                Chip::Emulator => "emu".into(),
                Chip::Iothread => "io".into(),
            })
            .collect();
        m.insert(c, CpuMark::Chips(text.join(" ")));
    }
    m
}

/// The drop/drag hook for one CPU cell of the drawing.
pub fn on_cpu(board: &mut Board, ui: &mut egui::Ui, cpu: u32, resp: &egui::Response) {
    if resp.drag_started()
        && let Some(chip) = board.chips_on(cpu).first()
    {
        egui::DragAndDrop::set_payload(
            ui.ctx(),
            DragChip {
                chip: *chip,
                from: Some(cpu),
            },
        );
    }
    if let Some(p) = resp.dnd_release_payload::<DragChip>() {
        if let (Some(from), Chip::Emulator | Chip::Iothread) = (p.from, p.chip) {
            board.unplace(p.chip, Some(from));
        }
        board.place(p.chip, cpu);
    }
}

fn chip_ui(ui: &mut egui::Ui, chip: Chip, problem: bool) {
    let id = ui.scope_id().with(("tray_chip", chip));
    let drag = ui.dnd_drag_source(id, DragChip { chip, from: None }, |ui| {
        let text = RichText::new(chip.label()).monospace();
        let text = if problem { text.color(WARN) } else { text };
        egui::Frame::new()
            .stroke(ui.visuals().widgets.inactive.bg_stroke)
            .corner_radius(8.0)
            .inner_margin(egui::Margin::symmetric(6, 2))
            .show(ui, |ui| ui.label(text));
    });
    // The chip is dragged by pointer; its selector below places it by
    // keyboard (and screen reader), and its name says so.
    name_control(
        &drag.response,
        egui::Role::ListItem,
        format!(
            "{} in the tray: drag onto a CPU, or choose its CPU below",
            chip.label()
        ),
    );
}

fn cpu_choice(s: &HostSnapshot, c: u32) -> String {
    let cpu = s.topology.cpu(c);
    let core = s
        .topology
        .cores
        .iter()
        .find(|k| k.cpus.contains(&c))
        .map(|k| format!(", {}", k.name()))
        .unwrap_or_default();
    let l3 = cpu
        .and_then(|x| x.l3_group)
        .map(|g| format!(", L3 #{g}"))
        .unwrap_or_default();
    format!("CPU {c}{core}{l3}")
}

fn cpulist_row(
    ui: &mut egui::Ui,
    label: &str,
    set: &mut std::collections::BTreeSet<u32>,
    hint: &str,
) {
    ui.horizontal(|ui| {
        let l = ui.label(label);
        let mut text = format_cpulist(&set.iter().copied().collect::<Vec<_>>());
        let r = ui
            .add(
                egui::TextEdit::singleline(&mut text)
                    .hint_text(hint)
                    .desired_width(140.0),
            )
            .labelled_by(l.id);
        if r.changed() {
            if text.trim().is_empty() {
                set.clear();
            } else if let Ok(list) = parse_cpulist(&text) {
                *set = list.into_iter().collect();
            }
        }
    });
}

/// The board panel; returns the marks for the drawing.
pub fn board_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    state: &mut State,
    rt: &CpuRuntime,
    out: &mut Vec<Command>,
) -> CpuMarks {
    let t = &s.topology;
    let online: Vec<u32> = t.online_cpus().map(|c| c.id).collect();
    let b = &mut state.board;
    ui.horizontal(|ui| {
        let l = ui.label("vCPUs for the VM");
        let mut n = b.vcpus;
        ui.add(egui::DragValue::new(&mut n).range(0..=online.len() as u32))
            .labelled_by(l.id);
        if n != b.vcpus {
            b.set_vcpus(n);
        }
        let fill = ui
            .add_enabled(
                b.vcpus > 0,
                egui::Button::new("Fill the board from the planner"),
            )
            .on_hover_text("The planner keeps SMT pairs together, one L3 group and NUMA node where it fits, and core 0 for the host; then move any chip by hand.");
        if fill.clicked() {
            let req = PinRequest {
                vcpus: b.vcpus as usize,
                amd: amd(s),
                ..PinRequest::default()
            };
            match plan(t, &req) {
                Ok(p) => *b = Board::from_plan(&p),
                Err(e) => b.planner_notes = vec![format!("! the planner could not place them: {e}")],
            }
        }
        if ui.button("Clear board").clicked() {
            *b = Board {
                vcpus: b.vcpus,
                ..Board::default()
            };
        }
    });
    if b.vcpus == 0 {
        ui.weak("Choose how many vCPUs, then let the planner fill the board, or drag each chip onto a host thread (or use the selectors).");
        return CpuMarks::new();
    }
    if !b.planner_notes.is_empty() {
        egui::CollapsingHeader::new("Why the planner placed them so")
            .id_salt("planner_notes")
            .show(ui, |ui| {
                for n in &b.planner_notes {
                    match n.strip_prefix("! ") {
                        Some(w) => ui.colored_label(WARN, format!("! {w}")),
                        None => ui.label(format!("- {n}")),
                    };
                }
            });
    }
    let problems = validate(t, &b.pinning(t));
    // A problem of the whole set (it spans two L3 groups…) is said once, not
    // next to every vCPU.
    let total = b.vcpus as usize;
    let about_all = |p: &crate::pinning::validate::PinProblem| {
        p.vcpus.is_empty() || (total > 1 && p.vcpus.len() >= total)
    };
    // The tray: drop here to unpin.
    let tray = egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.horizontal_wrapped(|ui| {
            ui.label("Tray (drag onto a CPU; drop here to unpin):");
            for v in b.unpinned() {
                chip_ui(ui, Chip::Vcpu(v), false);
            }
            chip_ui(ui, Chip::Emulator, false);
            chip_ui(ui, Chip::Iothread, false);
        });
    });
    if let Some(p) = tray.response.dnd_release_payload::<DragChip>() {
        b.unplace(p.chip, p.from);
    }
    egui::CollapsingHeader::new("Each vCPU (keyboard and screen readers)")
        .id_salt("pin_selectors")
        .default_open(true)
        .show(ui, |ui| {
            for v in 0..b.vcpus {
                ui.horizontal(|ui| {
                    let l = ui.label(format!("vCPU {v}"));
                    let current = b.pins.get(&v).copied();
                    let shown = current.map_or("unpinned".to_string(), |c| cpu_choice(s, c));
                    let mut chosen = current;
                    egui::ComboBox::from_id_salt(("vcpu_pin", v))
                        .selected_text(shown)
                        .show_ui(ui, |ui| {
                            ui.selectable_value(&mut chosen, None, "unpinned");
                            for c in &online {
                                ui.selectable_value(&mut chosen, Some(*c), cpu_choice(s, *c));
                            }
                        })
                        .response
                        .labelled_by(l.id);
                    if chosen != current {
                        match chosen {
                            Some(c) => b.place(Chip::Vcpu(v), c),
                            None => b.unplace(Chip::Vcpu(v), None),
                        }
                    }
                    for p in problems
                        .iter()
                        .filter(|p| p.vcpus.contains(&v) && !about_all(p))
                    {
                        ui.colored_label(WARN, RichText::new(format!("! {}", p.reason)).small());
                    }
                });
            }
            cpulist_row(
                ui,
                "Emulator CPUs",
                &mut b.emulator,
                "default: the host's CPUs",
            );
            cpulist_row(
                ui,
                "I/O thread CPUs",
                &mut b.iothread,
                "default: the emulator's",
            );
        });
    for p in problems.iter().filter(|p| about_all(p)) {
        ui.colored_label(WARN, format!("! {}", p.reason));
    }
    // An error (a CPU this host has not online, one that is not there) would
    // stop the VM from starting: such a board is not applied to a domain.
    let blocking: Vec<&str> = problems
        .iter()
        .filter(|p| p.severity == crate::pinning::validate::Severity::Error)
        .map(|p| p.reason.as_str())
        .collect();
    let p: PinPlan = b.to_plan(t, amd(s));
    egui::CollapsingHeader::new("The board as XML, kernel line, and apply to a domain")
        .id_salt("board_out")
        .show(ui, |ui| {
            let xml = p.to_xml();
            ui.horizontal(|ui| {
                if ui.small_button("Copy board XML").clicked() {
                    ui.ctx().copy_text(xml.clone());
                }
                if ui.small_button("Copy board kernel line").clicked() {
                    ui.ctx().copy_text(p.kernel.cmdline());
                }
            });
            ui.horizontal(|ui| {
                let l = ui.label("Save the fragment to");
                ui.add(
                    egui::TextEdit::singleline(&mut state.pin_save_path)
                        .hint_text("pinning.xml")
                        .desired_width(200.0),
                )
                .labelled_by(l.id);
                let ok = !state.pin_save_path.trim().is_empty();
                if ui
                    .add_enabled(ok, egui::Button::new("Save board XML"))
                    .clicked()
                {
                    out.push(Command::SaveBoardXml {
                        xml: xml.clone(),
                        path: state.pin_save_path.trim().to_string(),
                    });
                }
            });
            if let Some(r) = &rt.saved {
                match r {
                    Ok(m) => ui.label(m),
                    Err(e) => ui.colored_label(ui.visuals().error_fg_color, e),
                };
            }
            ui.label(crate::ui::theme::mono(&xml));
            ui.label(crate::ui::theme::mono(p.kernel.cmdline()));
            ui.horizontal(|ui| {
                let l = ui.label("libvirt domain");
                ui.add(egui::TextEdit::singleline(&mut state.pin_domain).desired_width(160.0))
                    .labelled_by(l.id);
                let ok = !state.pin_domain.trim().is_empty() && blocking.is_empty();
                let label = if state.pin_tune_rest {
                    "Apply pinning and tuning to domain"
                } else {
                    "Apply pinning to domain"
                };
                let button = ui.add_enabled(ok, egui::Button::new(label));
                let button = if blocking.is_empty() {
                    button
                } else {
                    button.on_disabled_hover_text(format!(
                        "Not with this board: {}",
                        blocking.join("; ")
                    ))
                };
                if button.clicked() {
                    out.push(Command::ApplyPinning {
                        domain: state.pin_domain.trim().to_string(),
                        plan: Box::new(p.clone()),
                        tune_rest: state.pin_tune_rest,
                    });
                }
                if rt.apply_job.is_busy() {
                    ui.weak("working…");
                }
            });
            ui.checkbox(
                &mut state.pin_tune_rest,
                "Also turn on the Hyper-V enlightenments this host's KVM offers, and the guest timers",
            )
            .on_hover_text("Besides pinning, the Hyper-V enlightenments and timers: Windows then spends fewer VM exits on its clock, spinlocks and interrupts. Takes effect at the VM's next start.");
            match &rt.applied {
                Some(Ok(m)) => {
                    ui.label(m);
                }
                Some(Err(e)) => {
                    ui.colored_label(ui.visuals().error_fg_color, format!("Apply failed: {e}"));
                }
                None => {}
            }
        });
    board_marks(&state.board)
}
