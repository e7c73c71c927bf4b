//! Drawing: the top bar and the page, with each view given its page's
//! runtime; the views' commands run after the frame is drawn.

use super::{App, Command};
use crate::sysroot::HostRoot;
use crate::ui::state::Page;
use crate::ui::views;

impl App {
    /// Draw everything into `ui`, then run what the views asked for.
    pub fn ui_content(&mut self, ui: &mut egui::Ui) {
        super::super::theme::ensure_readable(ui.ctx());
        egui::Panel::top("top_bar").show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.heading("VFIO Assistant");
                ui.separator();
                for page in Page::ALL {
                    if ui
                        .selectable_label(self.state.page == page, page.title())
                        .clicked()
                    {
                        self.commands.push(Command::ShowPage(page));
                    }
                }
                ui.separator();
                let rescan = ui.add_enabled(
                    self.root.is_some() && !self.is_scanning(),
                    egui::Button::new("Rescan"),
                );
                if rescan.clicked() {
                    self.commands.push(Command::Rescan);
                }
                if self.is_scanning() {
                    ui.spinner();
                    ui.label("Scanning…");
                }
                ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                    ui.weak(format!("Host: {}", self.source_label));
                });
            });
            if let Some(n) = &self.note {
                ui.colored_label(crate::ui::theme::WARN, n);
            }
        });
        egui::CentralPanel::default().show(ui, |ui| self.page_ui(ui));
        let ctx = ui.ctx().clone();
        for cmd in std::mem::take(&mut self.commands) {
            self.run(cmd, &ctx);
        }
    }

    fn page_ui(&mut self, ui: &mut egui::Ui) {
        if let Some(err) = &self.error {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("Could not read the host: {err}"),
            );
        }
        let Some(snap) = self.snapshot.clone() else {
            if self.error.is_none() {
                ui.label("Reading the host…");
            }
            return;
        };
        let mut out = Vec::new();
        match self.state.page {
            Page::Overview => views::overview::overview_ui(ui, &snap, &self.findings, &mut out),
            Page::Devices => views::devices::devices_ui(
                ui,
                &snap,
                &mut self.state,
                self.focus_device.take(),
                &views::devices::RomView {
                    findings: &self.devices.rom_findings,
                    busy: self.devices.rom_job.is_busy(),
                },
                &mut out,
            ),
            Page::Cpu => views::cpu::cpu_ui(ui, &snap, &mut self.state, &self.cpu, &mut out),
            Page::Troubleshoot => views::troubleshoot::troubleshoot_ui(
                ui,
                &self.findings,
                &self.troubleshoot,
                &self.cpu.pending_restart,
                &mut self.state,
                &mut out,
            ),
            Page::Monitor => {
                if self.sampler.is_none() && self.root.is_some() {
                    out.push(Command::StartMonitor);
                }
                let mode = views::monitor::PageMode {
                    running: self.sampler.is_some(),
                    busy: self.monitor_rt.latency_job.is_busy(),
                    live: self.root.as_ref().is_some_and(HostRoot::is_live),
                };
                views::monitor::monitor_ui(
                    ui,
                    &snap,
                    &self.monitor,
                    &mut self.state,
                    mode,
                    &mut out,
                )
            }
            Page::Tuning => {
                let live = self.root.as_ref().is_some_and(HostRoot::is_live);
                views::tuning::tuning_ui(ui, &snap, &mut self.state, &self.tuning, live, &mut out)
            }
            Page::NewVm => {
                let uri = self.wizard_uri();
                if self.wizard.caps_asked.as_deref() != Some(uri.as_str())
                    && !self.wizard.caps_job.is_busy()
                {
                    self.wizard.caps_asked = Some(uri.clone());
                    let wake = self.wake();
                    let _ = self
                        .wizard
                        .caps_job
                        .start(move || crate::ui::jobs::caps(&uri), wake);
                }
                views::wizard::wizard_ui(ui, &snap, &mut self.state.wizard, &self.wizard, &mut out)
            }
        }
        self.commands.extend(out);
    }
}
