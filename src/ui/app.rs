//! The app: persisted `State` (data) next to runtime handles (the root, the scan
//! channel). Views fill `Command`s while drawing; the app runs them afterwards.

use super::jobs::{Job, JobResult, PickField, spawn_job};
use super::state::{Page, State};
use super::views::monitor::MonitorView;
use super::views::wizard::WizardRuntime;
use super::worker::{ScanResult, spawn_scan};
use super::{Source, views};
use crate::checks::model::Finding;
use crate::checks::run_checks;
use crate::host::HostSnapshot;
use crate::monitor::sampler::{MonitorConfig, Update, spawn};
use crate::sysroot::HostRoot;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// Something a view asks the app to do after drawing.
#[must_use]
#[derive(Debug, Clone)]
pub enum Command {
    Rescan,
    ShowPage(Page),
    /// Show this device on the Devices page.
    ShowDevice(String),
    /// Ask libvirt something off the UI thread.
    Job(Job),
    /// Write the wizard's XML to a file.
    SaveXml {
        xml: String,
        path: String,
    },
    /// (Re)start the monitor's sampler.
    StartMonitor,
    /// Read this libvirt domain for the Troubleshoot page.
    ProbeVm(String),
}

/// A temporary folder a host was unpacked to, removed with the app.
#[allow(dead_code)] // held, never read
enum Unpacked {
    Demo(tempfile::TempDir),
    Snapshot(crate::sysroot::OpenedRoot),
}

pub struct App {
    pub state: State,
    root: Option<HostRoot>,
    /// Keeps an unpacked host (the demo, a snapshot file) alive.
    _unpacked: Option<Unpacked>,
    source_label: String,
    pub snapshot: Option<Arc<HostSnapshot>>,
    /// The prerequisite checks of `snapshot`, failures first.
    pub findings: Arc<Vec<Finding>>,
    pub error: Option<String>,
    scanning: Option<Receiver<ScanResult>>,
    /// Set by `ShowDevice`: the Devices page opens and scrolls to it.
    pub focus_device: Option<String>,
    /// The wizard's libvirt answers.
    pub wizard: WizardRuntime,
    job: Option<Receiver<JobResult>>,
    /// The URI whose domain capabilities were asked for.
    caps_asked: Option<String>,
    /// The Troubleshoot page's domain findings (or why there are none).
    pub vm_findings: Option<Result<Vec<Finding>, String>>,
    /// Cards whose ROM was read on the Devices page: address -> `device.rom`.
    pub rom_findings: std::collections::BTreeMap<String, Finding>,
    /// The Monitor page's data and its sampler (running only while the page shows).
    pub monitor: MonitorView,
    sampler: Option<(Receiver<Update>, Arc<AtomicBool>)>,
    commands: Vec<Command>,
}

const STATE_KEY: &str = "vfio-assistant-state";

impl App {
    pub fn new(cc: &eframe::CreationContext<'_>, source: Source) -> Self {
        let state: State = cc
            .storage
            .and_then(|s| eframe::get_value(s, STATE_KEY))
            .unwrap_or_default();
        let ctx = cc.egui_ctx.clone();
        Self::with_source(source, state, move || ctx.request_repaint())
    }

    fn from_source(source: Source, state: State) -> Self {
        let default_uri = if source == Source::Demo {
            crate::libvirt::TEST_URI
        } else {
            crate::libvirt::DEFAULT_URI
        };
        let (root, demo_dir, label, error) = match source {
            Source::Live => (
                Some(HostRoot::live()),
                None,
                "this machine".to_string(),
                None,
            ),
            // A folder, or a snapshot file unpacked for as long as the app runs.
            Source::Root(path) => {
                let label = path.display().to_string();
                match crate::sysroot::open_root(&path) {
                    Ok(opened) => (
                        Some(opened.root().clone()),
                        Some(Unpacked::Snapshot(opened)),
                        label,
                        None,
                    ),
                    Err(e) => (None, None, label, Some(format!("{e:#}"))),
                }
            }
            Source::Demo => match super::demo::unpack_demo() {
                Ok((root, dir)) => (
                    Some(root),
                    Some(Unpacked::Demo(dir)),
                    "demo host (sample data)".to_string(),
                    None,
                ),
                Err(e) => (None, None, "demo host".to_string(), Some(format!("{e:#}"))),
            },
        };
        App {
            state,
            root,
            _unpacked: demo_dir,
            source_label: label,
            snapshot: None,
            findings: Arc::new(Vec::new()),
            error,
            scanning: None,
            focus_device: None,
            wizard: WizardRuntime {
                default_uri: default_uri.into(),
                ..WizardRuntime::default()
            },
            job: None,
            caps_asked: None,
            monitor: MonitorView::new(),
            sampler: None,
            vm_findings: None,
            rom_findings: Default::default(),
            commands: Vec::new(),
        }
    }

    /// An app that starts scanning `source` at once; `wake` is called when the
    /// scan is done (eframe passes a repaint request; tests may pass nothing).
    pub fn with_source(source: Source, state: State, wake: impl FnOnce() + Send + 'static) -> Self {
        let mut app = Self::from_source(source, state);
        app.start_scan(wake);
        app
    }

    /// An app showing an already scanned host (tests, embedding).
    pub fn with_snapshot(snapshot: HostSnapshot, state: State) -> Self {
        App {
            state,
            root: None,
            _unpacked: None,
            source_label: snapshot.root.clone(),
            findings: Arc::new(run_checks(&snapshot, None)),
            snapshot: Some(Arc::new(snapshot)),
            error: None,
            scanning: None,
            focus_device: None,
            wizard: WizardRuntime {
                default_uri: crate::libvirt::DEFAULT_URI.into(),
                ..WizardRuntime::default()
            },
            job: None,
            caps_asked: None,
            monitor: MonitorView::new(),
            sampler: None,
            vm_findings: None,
            rom_findings: Default::default(),
            commands: Vec::new(),
        }
    }

    fn start_scan(&mut self, wake: impl FnOnce() + Send + 'static) {
        if let Some(root) = &self.root {
            self.scanning = Some(spawn_scan(root.clone(), wake));
        }
    }

    pub fn is_scanning(&self) -> bool {
        self.scanning.is_some()
    }

    /// Take a finished libvirt job, if any.
    pub fn poll_job(&mut self) {
        let Some(rx) = &self.job else { return };
        let result = match rx.try_recv() {
            Ok(r) => r,
            Err(std::sync::mpsc::TryRecvError::Empty) => return,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                JobResult::Defined(Err("the libvirt job stopped without a result".into()))
            }
        };
        self.job = None;
        self.wizard.busy = false;
        match result {
            JobResult::Caps(c) => self.wizard.caps = c.ok(),
            JobResult::Validated { ok, lines } => self.wizard.validation = Some((ok, lines)),
            JobResult::Defined(r) => self.wizard.defined = Some(r),
            JobResult::Applied(r) => self.wizard.applied = Some(r),
            JobResult::Latency(r, held) => {
                self.monitor.latency = Some(r);
                self.monitor.latency_held = held;
            }
            JobResult::Picked(field, path) => self.picked(field, path),
            JobResult::VmFindings(r) => self.vm_findings = Some(r),
            JobResult::Rom(addr, f) => {
                self.rom_findings.insert(addr, f);
            }
        }
    }

    /// Take the monitor's new samples.
    pub fn poll_monitor(&mut self) {
        let Some((rx, _)) = &self.sampler else { return };
        while let Ok(u) = rx.try_recv() {
            self.monitor.push(u);
        }
    }

    /// Whether the monitor's sampler runs.
    pub fn is_monitoring(&self) -> bool {
        self.sampler.is_some()
    }

    fn stop_monitor(&mut self) {
        if let Some((_, stop)) = self.sampler.take() {
            stop.store(true, Ordering::Relaxed);
        }
    }

    fn start_monitor(&mut self, ctx: &egui::Context) {
        self.stop_monitor();
        let Some(root) = self.root.clone() else {
            return;
        };
        self.monitor.restart();
        let domain = self.state.monitor_domain.trim();
        let config = MonitorConfig {
            root,
            uri: Some(self.wizard_uri()),
            domain: (!domain.is_empty()).then(|| domain.to_string()),
            interval: Duration::from_secs(1),
            only_changes: true,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let ctx = ctx.clone();
        if let Ok(rx) = spawn(config, stop.clone(), move || ctx.request_repaint()) {
            self.sampler = Some((rx, stop));
        }
    }

    /// A file dialog's answer goes into its wizard field.
    fn picked(&mut self, field: PickField, path: Option<String>) {
        let Some(path) = path else {
            self.wizard.pick_note = Some(
                "No file chosen. If no dialog appeared, this desktop has no xdg-desktop-portal: type the path instead.".into(),
            );
            return;
        };
        self.wizard.pick_note = None;
        let w = &mut self.state.wizard;
        match field {
            PickField::Disk => w.disk = path,
            PickField::InstallIso => w.install_iso = path,
            PickField::VirtioIso => w.virtio_iso = path,
        }
    }

    /// Whether a libvirt job is running.
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// The wizard's libvirt URI as the user set it, or the default.
    fn wizard_uri(&self) -> String {
        let u = self.state.wizard.uri.trim();
        if u.is_empty() {
            self.wizard.default_uri.clone()
        } else {
            u.to_string()
        }
    }

    /// Take a finished scan, if any (no drawing).
    pub fn poll_scan(&mut self) {
        self.poll_job();
        self.poll_monitor();
        let Some(rx) = &self.scanning else { return };
        match rx.try_recv() {
            Ok(Ok((snap, findings))) => {
                self.snapshot = Some(Arc::new(snap));
                self.findings = Arc::new(findings);
                self.error = None;
                self.scanning = None;
            }
            Ok(Err(e)) => {
                self.error = Some(e);
                self.scanning = None;
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.error = Some("the scan stopped without a result".into());
                self.scanning = None;
            }
        }
    }

    /// Draw everything into `ui`, then run what the views asked for.
    pub fn ui_content(&mut self, ui: &mut egui::Ui) {
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
        });
        egui::CentralPanel::default().show(ui, |ui| {
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
                        findings: &self.rom_findings,
                        busy: self.job.is_some(),
                    },
                    &mut out,
                ),
                Page::Cpu => views::cpu::cpu_ui(ui, &snap, &mut self.state, &self.wizard, &mut out),
                Page::Troubleshoot => views::troubleshoot::troubleshoot_ui(
                    ui,
                    &self.findings,
                    self.vm_findings.as_ref(),
                    self.job.is_some(),
                    &mut self.state,
                    &mut out,
                ),
                Page::Monitor => {
                    if self.sampler.is_none() && self.root.is_some() {
                        out.push(Command::StartMonitor);
                    }
                    let mode = views::monitor::PageMode {
                        running: self.sampler.is_some(),
                        busy: self.job.is_some(),
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
                Page::NewVm => {
                    let uri = self.wizard_uri();
                    if self.caps_asked.as_deref() != Some(uri.as_str()) && self.job.is_none() {
                        self.caps_asked = Some(uri.clone());
                        out.push(Command::Job(Job::Caps(uri)));
                    }
                    views::wizard::wizard_ui(
                        ui,
                        &snap,
                        &mut self.state.wizard,
                        &self.wizard,
                        &mut out,
                    )
                }
            }
            self.commands.extend(out);
        });
        let ctx = ui.ctx().clone();
        for cmd in std::mem::take(&mut self.commands) {
            self.run(cmd, &ctx);
        }
    }

    fn run(&mut self, cmd: Command, ctx: &egui::Context) {
        match cmd {
            Command::Rescan => {
                let ctx = ctx.clone();
                self.start_scan(move || ctx.request_repaint());
            }
            Command::ShowPage(p) => {
                if p != Page::Monitor {
                    // Nothing samples while nobody looks.
                    self.stop_monitor();
                }
                self.state.page = p;
            }
            Command::StartMonitor => self.start_monitor(ctx),
            Command::ProbeVm(domain) => {
                let root = self.root.clone().unwrap_or_else(HostRoot::live);
                if let Some(snapshot) = self.snapshot.clone() {
                    self.vm_findings = None;
                    let job = Job::ProbeVm {
                        domain,
                        uri: self.wizard_uri(),
                        root,
                        snapshot,
                    };
                    self.run(Command::Job(job), ctx);
                }
            }
            Command::ShowDevice(a) => {
                self.state.page = Page::Devices;
                self.focus_device = Some(a);
            }
            Command::Job(mut job) => {
                if let Job::ReadRom { root, .. } = &mut job {
                    *root = self.root.clone();
                }
                if let Job::ApplyPinning { uri, .. } = &mut job {
                    if uri.is_empty() {
                        *uri = self.wizard_uri();
                    }
                    self.wizard.applied = None;
                }
                if self.job.is_none() {
                    if matches!(job, Job::Validate { .. }) {
                        self.wizard.validation = None;
                    }
                    if matches!(job, Job::Define { .. }) {
                        self.wizard.defined = None;
                    }
                    self.wizard.busy = true;
                    let ctx = ctx.clone();
                    self.job = Some(spawn_job(job, move || ctx.request_repaint()));
                }
            }
            Command::SaveXml { xml, path } => {
                self.wizard.saved = Some(
                    // Whole or not at all, never into a FIFO or through a link;
                    // the save dialog has asked about replacing a file.
                    crate::userfile::write_new_atomic(
                        std::path::Path::new(&path),
                        xml.as_bytes(),
                        true,
                    )
                    .map(|()| {
                        format!(
                            "Saved to {path}. Define it with `vfio-assistant domain define {path}`."
                        )
                    })
                    .map_err(|e| e.to_string()),
                );
            }
        }
    }
}

impl eframe::App for App {
    fn logic(&mut self, _ctx: &egui::Context, _frame: &mut eframe::Frame) {
        self.poll_scan();
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.ui_content(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, STATE_KEY, &self.state);
    }
}
