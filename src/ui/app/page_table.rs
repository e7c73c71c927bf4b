//! The app's pages, in the top bar's order: each one's `Page`, its title,
//! and how it draws from the app's state (its view in ui/views/ and the
//! runtime the app keeps for it). Adding a page is its view file, its
//! `Page` variant, and its line here.

use super::{App, Command};
use crate::host::HostSnapshot;
use crate::ui::state::Page;
use crate::ui::views;

/// A page's line in the table.
pub struct PageSpec {
    pub page: Page,
    pub title: &'static str,
    pub draw: fn(&mut App, &mut egui::Ui, &HostSnapshot, &mut Vec<Command>),
}

pub const PAGES: &[PageSpec] = &[
    PageSpec {
        page: Page::Overview,
        title: "Overview",
        draw: |app, ui, snap, out| {
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
        },
    },
    PageSpec {
        page: Page::Devices,
        title: "Devices",
        draw: |app, ui, snap, out| {
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
        },
    },
    PageSpec {
        page: Page::Cpu,
        title: "CPU",
        draw: |app, ui, snap, out| views::cpu::cpu_ui(ui, snap, &mut app.state, &app.cpu, out),
    },
    PageSpec {
        page: Page::Tuning,
        title: "Tuning",
        draw: |app, ui, snap, out| {
            // Another machine itself (not a captured root there) is
            // tuned for real, through its helper under sudo.
            let live = app.shows_a_live_machine();
            views::tuning::tuning_ui(ui, snap, &mut app.state, &app.tuning, live, out)
        },
    },
    PageSpec {
        page: Page::NewVm,
        title: "New VM",
        draw: |app, ui, snap, out| {
            let uri = app.wizard_uri();
            if app.wizard.caps_asked.as_deref() != Some(uri.as_str())
                && !app.wizard.caps_job.is_busy()
            {
                app.wizard.caps_asked = Some(uri.clone());
                let wake = app.wake();
                let _ = app
                    .wizard
                    .caps_job
                    .start(move || crate::ui::jobs::caps(&uri), wake);
            }
            let live = app.shows_a_live_machine();
            views::wizard::wizard_ui(ui, snap, &mut app.state, &app.wizard, live, out)
        },
    },
    PageSpec {
        page: Page::Monitor,
        title: "Monitor",
        draw: |app, ui, snap, out| {
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
        },
    },
    PageSpec {
        page: Page::Troubleshoot,
        title: "Troubleshoot",
        draw: |app, ui, _, out| {
            views::troubleshoot::troubleshoot_ui(
                ui,
                &app.findings,
                &app.troubleshoot,
                &app.cpu.pending_restart,
                &mut app.state,
                out,
            )
        },
    },
];
