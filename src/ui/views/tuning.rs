//! Tuning: the host changes the engine proposes (`tuning::plan`, the same as
//! `tune plan`), grouped by when they take effect, each with why, its
//! evidence, a unified diff per file and every value before → after, each
//! one switchable off; one Apply button that runs the privileged helper
//! (through pkexec) with a progress line per step as they happen, then the
//! verification and, when a reboot is needed, how to get back if it fails;
//! and the journal with Undo. The plan is made from the host's facts (read
//! once off the UI thread) and the choices at the top, once per request
//! (`TuningRuntime::plan_for`), not once per frame.

use crate::host::HostSnapshot;
use crate::host::pci_addr::PciAddr;
use crate::tuning::asked::Asked;
use crate::tuning::kinds::ChangeId;
use crate::tuning::model::{Change, Effect, Plan, Request};
use crate::ui::app::Command;
use crate::ui::pages::TuningRuntime;
use crate::ui::state::State;
use crate::ui::theme;
use egui::RichText;

/// The cards the page binds for the VM: its GPU (`State::vm`), then the
/// Tuning page's other ones.
pub fn vm_cards(state: &State) -> Vec<String> {
    let mut out: Vec<String> = state.vm.gpu.iter().cloned().collect();
    for g in &state.tuning.gpus {
        if !out.contains(g) {
            out.push(g.clone());
        }
    }
    out
}

/// The page's addresses as the request takes them. They are the scan's
/// (sysfs names them); one that is not an address cannot name a device of
/// this host, and `State` drops those already (its `retain` of what is here).
fn addrs(a: &[String]) -> Vec<PciAddr> {
    a.iter().filter_map(|a| a.parse().ok()).collect()
}

/// The request the page's choices make, for the one VM: its cards, its
/// CPUs (the board's pins, else its vCPU count for the planner), its memory
/// when hugepages are to be reserved.
pub fn request_of(state: &State, only: Vec<ChangeId>) -> Request {
    let c = &state.tuning;
    let vcpus = state.board.vcpus as usize;
    // A VM named in a box: none when the box is empty.
    let named = |v: &str| Some(v.trim().to_string()).filter(|v| !v.is_empty());
    Asked {
        gpus: addrs(&vm_cards(state)),
        devices: addrs(&state.vm.devices),
        vcpus: (vcpus > 0).then_some(vcpus),
        cpus: board_cpus(state),
        memory_mib: c
            .reserve_hugepages
            .then(|| state.vm.memory_for(None).saturating_mul(1024)),
        hugepages_1g: c.hugepages_1g,
        sriov: c
            .sriov
            .iter()
            .filter_map(|(a, n)| Some((a.parse().ok()?, *n)))
            .collect(),
        only,
        isolate_vm: named(&c.isolate_vm),
        host_keeps_vm_cpus: !c.boot_isolation,
        single_gpu_vm: named(&c.single_gpu_vm),
        shared_gpu_vm: named(&c.shared_gpu_vm),
        shared_stop_units: super::tuning_gpu_mode::stop_units(c),
        looking_glass_mib: (c.looking_glass_mib > 0).then_some(c.looking_glass_mib),
        kvmfr: c.kvmfr && c.looking_glass_mib > 0,
        qemu_as_user: c.qemu_as_me,
        // Planned for this app's user; under pkexec the helper takes the
        // user who asked, whatever this says.
        desktop_user: (c.looking_glass_mib > 0 || c.qemu_as_me)
            .then(|| std::env::var("USER").ok())
            .flatten(),
    }
    .request()
}

/// The same apply as a command for a terminal (`tuning::command_line`).
pub fn terminal_command(r: &Request) -> String {
    crate::tuning::command_line::apply_command(r)
}

/// The host CPUs the board pins the VM's vCPUs to (None: no pins yet).
pub(super) fn board_cpus(state: &State) -> Option<Vec<u32>> {
    let mut cpus: Vec<u32> = state.board.pins.values().copied().collect();
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

/// The id under which the page remembers which changes it has given their
/// first tick (egui's memory for this run; `Command::OpenTuning` clears it).
pub fn presented_id() -> egui::Id {
    egui::Id::unique("tuning-presented")
}

/// A change's first tick when it first shows: on, except a binding now of
/// a card the host's screen is on (never pre-ticked: the screen goes), and,
/// when a next step opened the page for named changes, every other one.
/// The user's ticks after that are theirs.
fn first_ticks(
    ui: &egui::Ui,
    snap: &HostSnapshot,
    p: &Plan,
    req: &Request,
    focus: &[String],
    off: &mut Vec<String>,
) {
    let takes_screen = screen_taken(snap, req).is_some();
    // What an asked-for change needs is ticked with it.
    let focus = &p.with_needs(focus);
    ui.data_mut(|d| {
        let seen = d.get_temp_mut_or_default::<std::collections::BTreeSet<String>>(presented_id());
        for c in &p.changes {
            let id = c.id.to_string();
            if !seen.insert(id.clone()) {
                continue;
            }
            let not_asked = !focus.is_empty() && !focus.contains(&id);
            let screen = c.id.kind == crate::tuning::model::Kind::VfioBind && takes_screen;
            if (not_asked || screen) && !off.contains(&id) {
                off.push(id);
            }
        }
    });
}

/// What binding a card now does to the host's screen, when the host shows
/// its screen on one of the VM's cards.
fn screen_taken(snap: &HostSnapshot, req: &Request) -> Option<String> {
    req.gpus.iter().find_map(|g| {
        let g = &g.to_string();
        let shown = snap.device(g).map(|e| e.device.host_usage.connected_displays()).unwrap_or_default();
        let why = match crate::report::vm_card::host_screen(snap, g) {
            Some(w) => w.to_string(),
            None if !shown.is_empty() => format!("a display is connected to it: {}", shown.join(", ")),
            None => return None,
        };
        Some(format!(
            "The host's screen is on {g} now ({why}): binding it to vfio-pci now (not ticked) turns that screen off until it is undone or the host reboots. Move the screen to another GPU first, or bind it at boot."
        ))
    })
}

/// `missing`: what a captured tree lacks for it (then it cannot be ticked).
fn change_ui(
    ui: &mut egui::Ui,
    c: &Change,
    off: &mut Vec<String>,
    focus: bool,
    missing: &[String],
) -> Option<String> {
    let id = c.id.to_string();
    let mut on = !off.contains(&id);
    let mut unticked = None;
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.set_width(ui.available_width());
        // Wrapped: a title can be long (the keep names every parameter), and
        // an unwrapped one would widen the group past the window.
        ui.horizontal_wrapped(|ui| {
            if ui
                .add_enabled(missing.is_empty(), egui::Checkbox::new(&mut on, RichText::new(&c.title).strong()))
                .changed()
            {
                if on {
                    off.retain(|x| *x != id);
                } else {
                    off.push(id.clone());
                    unticked = Some(id.clone());
                }
            }
            ui.weak(format!("[{}]", c.id));
            if focus {
                crate::ui::widgets::badges::badge_ui(ui, "asked for", theme::INFO);
            }
            for n in &c.needs {
                ui.weak(format!("needs [{n}]"))
                    .on_hover_text(format!("Does nothing without [{n}]: ticking this ticks that; unticking that unticks this."));
            }
        });
        if !missing.is_empty() {
            ui.colored_label(theme::WARN, theme::detail(format!("Not in this capture: {} (a snapshot keeps only what a scan read); on the machine itself it applies.", missing.join(", "))));
        }
        ui.label(theme::detail(&c.why));
        egui::CollapsingHeader::new("What changes exactly")
            .id_salt(("tuning-detail", &c.id))
            .default_open(focus)
            .show(ui, |ui| {
                for e in &c.evidence {
                    ui.label(theme::mono(format!("seen: {} = {}", e.source, e.value)));
                }
                for f in &c.files {
                    ui.label(theme::mono(f.diff()));
                }
                for v in &c.values {
                    let text = if v.action {
                        format!("write {} <- {}", v.path, v.after)
                    } else {
                        format!("{}: {} -> {}", v.path, v.before, v.after)
                    };
                    ui.label(theme::mono(text));
                }
                for cmd in &c.commands {
                    ui.label(theme::mono(format!(
                        "run: {}{}",
                        cmd.argv().join(" "),
                        if cmd.run {
                            ""
                        } else {
                            "  (listed, not run: a captured host)"
                        }
                    )));
                }
            });
        for n in &c.notes {
            ui.colored_label(theme::WARN, theme::detail(n));
        }
    });
    unticked
}

/// One group's changes; the id the user unticked in it this frame.
fn group_ui(
    ui: &mut egui::Ui,
    p: &Plan,
    effect: Effect,
    heading: &str,
    off: &mut Vec<String>,
    (focus, lacking): (&[String], &std::collections::BTreeMap<String, Vec<String>>),
) -> Option<String> {
    let list: Vec<&Change> = p.changes.iter().filter(|c| c.effect == effect).collect();
    if list.is_empty() {
        return None;
    }
    ui.label(RichText::new(heading).heading());
    let mut unticked = None;
    for c in list {
        let id = c.id.to_string();
        let missing = lacking.get(&id).map_or(&[][..], Vec::as_slice);
        unticked = change_ui(ui, c, off, focus.contains(&id), missing).or(unticked);
    }
    ui.add_space(6.0);
    unticked
}

pub fn tuning_ui(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    state: &mut State,
    rt: &TuningRuntime,
    live: bool,
    out: &mut Vec<Command>,
) {
    egui::ScrollArea::vertical().auto_shrink(false).show(ui, |ui| {
        ui.heading("Host tuning");
        ui.label("What this host needs for a passthrough VM, applied as one transaction you can undo: files are written atomically and kept in a journal, a failure puts everything back, and boot changes are checked before you reboot.");
        super::tuning_journal::unfinished_ui(ui, rt, out);
        super::tuning_inputs::inputs_ui(ui, snap, state);
        if let Some(checks) = &rt.single_gpu {
            ui.label(RichText::new("Before single-GPU passthrough").strong());
            super::findings::finding_list_ui(ui, checks);
        } else if rt.single_gpu_job.is_busy() {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("Checking who holds the GPU, the boot framebuffer and SSH…");
            });
        }
        ui.separator();
        let Some(facts) = &rt.facts else {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("Reading this host's boot configuration and settings…");
            });
            return;
        };
        let req = request_of(state, Vec::new());
        // Planned once per request (and host), not once per frame.
        let planned = rt.plan_for(snap, facts, &req, live);
        let p = match planned.as_ref() {
            Ok(p) => p,
            Err(e) => {
                ui.colored_label(theme::BAD, format!("Cannot plan: {e}"));
                super::tuning_journal::journal_ui(ui, rt, out);
                return;
            }
        };
        let word = |s: &str| if s == "unknown" { "not recognised".to_string() } else { s.to_string() };
        ui.label(format!("Boot loader: {} · initramfs generator: {}", word(&p.boot.loader), word(&p.boot.initramfs)))
            .on_hover_text(p.boot.evidence.iter().map(|e| format!("{} = {}", e.source, e.value)).collect::<Vec<_>>().join("\n"));
        for n in &p.notes {
            ui.weak(theme::detail(n));
        }
        let focus = rt.focus.clone();
        first_ticks(ui, snap, p, &req, &focus, &mut state.tuning.off);
        // A captured tree takes only what it holds: the rest unticked, said.
        let lacking: std::collections::BTreeMap<String, Vec<String>> = if live {
            Default::default()
        } else {
            p.changes
                .iter()
                .map(|c| (c.id.to_string(), crate::tuning::capture_fit::not_in_capture(facts, c)))
                .filter(|(_, m)| !m.is_empty())
                .collect()
        };
        for id in lacking.keys() {
            if !state.tuning.off.contains(id) {
                state.tuning.off.push(id.clone());
            }
        }
        // Said where a binding now is planned (shared mode plans none).
        let binds_now = p.changes.iter().any(|c| c.id.kind == crate::tuning::model::Kind::VfioBind);
        let screen = screen_taken(snap, &req).filter(|_| binds_now);
        if let Some(w) = &screen {
            ui.colored_label(theme::WARN, w);
        }
        let (off, marks) = (&mut state.tuning.off, (focus.as_slice(), &lacking));
        let unticked = [(Effect::Now, "Now"), (Effect::AfterReboot, "After a reboot"), (Effect::AtVmStart, "When the VM starts")]
            .into_iter()
            .fold(None, |u, (effect, heading)| group_ui(ui, p, effect, heading, off, marks).or(u));
        // A change and what it needs go together (Plan::keep_needs).
        let kept_off: Vec<String> = unticked.into_iter().chain(lacking.keys().cloned()).collect();
        p.keep_needs(off, &kept_off);
        for m in &p.manual {
            egui::Frame::group(ui.style()).show(ui, |ui| {
                ui.set_width(ui.available_width());
                ui.label(RichText::new(format!("By hand: {}", m.title)).strong());
                ui.label(theme::detail(&m.why));
                for s in &m.steps {
                    ui.label(theme::detail(format!("- {s}")));
                }
            });
        }
        let chosen: Vec<ChangeId> = p.changes.iter().map(|c| c.id.clone()).filter(|id| !state.tuning.off.contains(&id.to_string())).collect();
        if p.changes.is_empty() {
            let t = &state.tuning;
            let no_cpus = state.board.vcpus == 0;
            if vm_cards(state).is_empty() && no_cpus && !t.reserve_hugepages && t.sriov.is_empty() {
                ui.label("Nothing to change for the host as a whole. Choose the VM's GPU, vCPUs and memory above to see what this host needs for it.");
            } else {
                ui.colored_label(theme::GOOD, "Nothing to change: this host already has everything asked for.");
            }
        } else {
            ui.horizontal(|ui| {
                let label = if live { "Apply (asks for your password)" } else { "Apply to this captured host's files" };
                // Never a second transaction beside one still running.
                let waiting = super::tuning_journal::one_still_runs(rt);
                let apply = ui.add_enabled(!chosen.is_empty() && !rt.is_running() && !waiting, egui::Button::new(RichText::new(label).strong()));
                if apply.clicked() {
                    let steps = p
                        .changes
                        .iter()
                        .filter(|c| chosen.contains(&c.id))
                        .map(|c| c.files.len() + c.values.len() + c.commands.len())
                        .sum();
                    out.push(Command::TuningApply { request: request_of(state, chosen.clone()), steps });
                }
                if rt.is_running() {
                    ui.spinner();
                    ui.label("Applying…");
                } else if waiting {
                    // No spinner: the journal is read again every two
                    // seconds (`watch_job`), and the page redrawn then.
                    ui.colored_label(theme::WARN, "Waiting for the tuning still running (above) to end…");
                }
            });
            // Its own choice, named again where it is applied.
            if let Some(user) = request_of(state, Vec::new()).desktop_user.filter(|_| state.tuning.qemu_as_me)
                && chosen.iter().any(|id| id.kind == crate::tuning::model::Kind::QemuConf)
            {
                ui.colored_label(theme::WARN, format!("{}.", crate::tuning::play::qemu_as_user_words(&user)));
            }
            ui.weak(theme::detail(format!("or in a terminal: {}", terminal_command(&request_of(state, chosen)))));
        }
        super::tuning_progress::progress_ui(ui, rt, &p.boot.recovery);
        let automated = !matches!(p.boot.loader.as_str(), "unknown" | "bootc" | "uki");
        // After an apply its last line says it already.
        if p.needs_reboot() && automated && rt.ended.is_none() {
            ui.weak(theme::detail(p.boot.recovery.clone()));
        }
        ui.separator();
        super::tuning_journal::journal_ui(ui, rt, out);
    });
}
