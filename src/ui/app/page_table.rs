//! The app's pages drawn from its state: each page's arm in `draw` (the
//! match is exhaustive, so a page declared in `ui::state`'s `pages!`
//! without its arm does not compile) calls its view in ui/views/ with the
//! runtime the app keeps for it.

use super::{App, Command};
use crate::host::HostSnapshot;
use crate::ui::state::Page;
use crate::ui::views;

/// Draw `page`.
pub fn draw(
    page: Page,
    app: &mut App,
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    out: &mut Vec<Command>,
) {
    match page {
        Page::Overview => overview(app, ui, snap, out),
        Page::Devices => devices(app, ui, snap, out),
        Page::Cpu => cpu(app, ui, snap, out),
        Page::Tuning => tuning(app, ui, snap, out),
        Page::NewVm => new_vm(app, ui, snap, out),
        Page::Monitor => monitor(app, ui, snap, out),
        Page::Troubleshoot => troubleshoot(app, ui, snap, out),
    }
}

fn overview(app: &mut App, ui: &mut egui::Ui, snap: &HostSnapshot, out: &mut Vec<Command>) {
    let t = &app.troubleshoot;
    let name = app.state.vm.name.trim();
    let inside = views::inside_vm::InsideVm {
        name,
        read: t
            .vm_findings
            .as_ref()
            .filter(|_| t.vm.name.as_deref() == Some(name)),
        busy: t.probe_job.is_busy(),
    };
    views::overview::overview_ui(
        ui,
        snap,
        &app.findings,
        app.state.vm_gpu.as_deref(),
        &inside,
        out,
    )
}

fn devices(app: &mut App, ui: &mut egui::Ui, snap: &HostSnapshot, out: &mut Vec<Command>) {
    views::devices::devices_ui(
        ui,
        snap,
        &mut app.state,
        app.focus_device.take(),
        &views::devices::RomView {
            findings: &app.devices.rom_findings,
            busy: app.devices.rom_job.is_busy(),
        },
        out,
    )
}

fn cpu(app: &mut App, ui: &mut egui::Ui, snap: &HostSnapshot, out: &mut Vec<Command>) {
    views::cpu::cpu_ui(ui, snap, &mut app.state, &app.cpu, out)
}

fn tuning(app: &mut App, ui: &mut egui::Ui, snap: &HostSnapshot, out: &mut Vec<Command>) {
    // Another machine itself (not a captured root there) is
    // tuned for real, through its helper under sudo.
    let live = app.shows_a_live_machine();
    views::tuning::tuning_ui(ui, snap, &mut app.state, &app.tuning, live, out)
}

fn new_vm(app: &mut App, ui: &mut egui::Ui, snap: &HostSnapshot, out: &mut Vec<Command>) {
    let uri = app.wizard_uri();
    if app.wizard.caps_asked.as_deref() != Some(uri.as_str()) && !app.wizard.caps_job.is_busy() {
        app.wizard.caps_asked = Some(uri.clone());
        let wake = app.wake();
        let _ = app
            .wizard
            .caps_job
            .start(move || crate::ui::jobs::caps(&uri), wake);
    }
    let live = app.shows_a_live_machine();
    views::wizard::wizard_ui(ui, snap, &mut app.state, &app.wizard, live, out)
}

fn monitor(app: &mut App, ui: &mut egui::Ui, snap: &HostSnapshot, out: &mut Vec<Command>) {
    if app.sampler.is_none() && app.root.is_some() && app.monitor.ended.is_none() {
        out.push(Command::StartMonitor);
    }
    let mode = views::monitor::PageMode {
        running: app.sampler.is_some(),
        busy: app.monitor_rt.latency_job.is_busy(),
        live: app.shows_a_live_machine(),
    };
    let vm = app.state.vm.clone();
    let ctl = &app.wizard.vm;
    let said = match &ctl.done {
        Some(Ok(crate::ui::jobs::VmDone::Install(m))) => Some(m.as_str()),
        _ => None,
    };
    let install = vm.unattended.then(|| views::inside_vm::InstallView {
        name: vm.name.trim(),
        said,
        busy: ctl.action.is_busy(),
    });
    views::monitor::monitor_ui(
        ui,
        snap,
        &app.monitor,
        &mut app.state,
        mode,
        install.as_ref(),
        out,
    )
}

fn troubleshoot(app: &mut App, ui: &mut egui::Ui, _snap: &HostSnapshot, out: &mut Vec<Command>) {
    views::troubleshoot::troubleshoot_ui(
        ui,
        &app.findings,
        &app.troubleshoot,
        &app.cpu.pending_restart,
        &mut app.state,
        out,
    )
}
