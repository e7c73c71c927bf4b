//! The app: persisted `State` (data only) next to the runtime: the host
//! being shown, its scan, and one runtime per page (`pages.rs`) with its own
//! job slots. Split the way rerun splits its app: `logic.rs` takes what the
//! workers sent (no drawing), `ui.rs` draws and collects the views'
//! `Command`s (command.rs), `commands.rs` runs them.

mod command;
mod commands;
mod logic;
pub mod page_table;
mod ui;

pub use command::{Command, VmPage};

use super::Source;
use super::pages::{
    CpuRuntime, DevicesRuntime, MonitorRuntime, TroubleshootRuntime, TuningRuntime, WizardRuntime,
};
use super::state::{State, state_key};
use super::views::monitor::MonitorView;
use super::worker::{ScanResult, spawn_scan};
use crate::checks::model::Finding;
use crate::checks::run_checks;
use crate::host::HostSnapshot;
use crate::monitor::sampler::Update;
use crate::sysroot::HostRoot;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Receiver;

pub struct App {
    pub state: State,
    /// Where `state` is saved: one key per host (`host_identity`).
    state_key: String,
    root: Option<HostRoot>,
    /// Keeps an unpacked host (the demo, a snapshot file) alive.
    _unpacked: Option<crate::remote::OpenedHost>,
    source_label: String,
    /// The host shown, to go back to it or switch (the top bar's picker).
    pub source: Option<Source>,
    /// Another machine over SSH: its snapshot is fetched (`fetching`), its
    /// tuning runs through its helper there.
    pub remote: Option<crate::remote::SshTarget>,
    fetching: Option<Receiver<super::worker::FetchResult>>,
    /// The key the choices move to once the fetched machine's id is known
    /// (done with the storage at hand, in `logic`).
    rekey: Option<String>,
    /// A host the picker asks to switch to (done in `logic`, where the
    /// saved choices of both are at hand).
    pub switch_to: Option<Source>,
    /// What the picker's fields hold while typed.
    pub picker: HostPicker,
    /// The libvirt this host's VMs are on (None for a captured host).
    libvirt_uri: Option<String>,
    pub snapshot: Option<Arc<HostSnapshot>>,
    /// The prerequisite checks of `snapshot`, failures first.
    pub findings: Arc<Vec<Finding>>,
    pub error: Option<String>,
    scanning: Option<Receiver<ScanResult>>,
    /// Set by `ShowDevice`: the Devices page opens and scrolls to it.
    pub focus_device: Option<String>,
    pub wizard: WizardRuntime,
    pub troubleshoot: TroubleshootRuntime,
    pub devices: DevicesRuntime,
    pub cpu: CpuRuntime,
    pub monitor_rt: MonitorRuntime,
    pub tuning: TuningRuntime,
    /// The Monitor page's data and its sampler (running only while the page shows).
    pub monitor: MonitorView,
    sampler: Option<(Receiver<Update>, Arc<AtomicBool>)>,
    commands: Vec<Command>,
    /// A request that could not start (its page's job still runs), shown
    /// in the top bar.
    pub note: Option<String>,
    /// Repaints the window (a job's `wake`); none in tests without a context.
    waker: Option<egui::Context>,
}

/// The top bar's host picker while the user types.
#[derive(Debug, Clone, Default)]
pub struct HostPicker {
    pub ssh: String,
    pub snapshot: String,
    /// How a machine typed here is reached (the ssh command, our program
    /// there): empty in the window (ssh from PATH, or the environment's,
    /// see `remote::SshTarget`); tests and embedders set it. Kept across
    /// host switches.
    pub via: crate::remote::Via,
}

/// What names the host whose choices are saved: the demo, a captured root
/// by its path, this machine by its machine-id (its hostname where there is
/// none). Choices made on one are never loaded on another.
pub fn host_identity(source: &Source) -> String {
    match source {
        Source::Demo => "demo".into(),
        Source::Root(path) => format!("root:{}", path.display()),
        // The place as the user names it (user, host, port, captured root).
        Source::Remote(target) => format!("ssh:{}", target.url()),
        Source::Live => {
            let live = HostRoot::live();
            let read = |rel: &str| {
                live.read_text(&crate::sysroot::HostPath::etc(rel))
                    .ok()
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty() && t.len() <= 64)
            };
            format!(
                "live:{}",
                read("machine-id")
                    .or_else(|| read("hostname"))
                    .unwrap_or_else(|| "this-machine".into())
            )
        }
    }
}

impl App {
    pub fn new(cc: &eframe::CreationContext<'_>, source: Source) -> Self {
        let key = state_key(&host_identity(&source));
        let state: State = cc
            .storage
            .and_then(|s| eframe::get_value(s, &key))
            .unwrap_or_default();
        let ctx = cc.egui_ctx.clone();
        let mut app = Self::with_source(source, state, {
            let ctx = ctx.clone();
            move || ctx.request_repaint()
        });
        app.state_key = key;
        app.waker = Some(ctx);
        app
    }

    fn empty(state: State, default_uri: &str) -> Self {
        App {
            state,
            state_key: state_key("embedded"),
            root: None,
            _unpacked: None,
            source_label: String::new(),
            source: None,
            remote: None,
            fetching: None,
            rekey: None,
            switch_to: None,
            picker: HostPicker::default(),
            libvirt_uri: None,
            snapshot: None,
            findings: Arc::new(Vec::new()),
            error: None,
            scanning: None,
            focus_device: None,
            wizard: WizardRuntime::new(default_uri),
            troubleshoot: TroubleshootRuntime::default(),
            devices: DevicesRuntime::default(),
            cpu: CpuRuntime::default(),
            monitor_rt: MonitorRuntime::default(),
            tuning: TuningRuntime::default(),
            monitor: MonitorView::new(),
            sampler: None,
            commands: Vec::new(),
            note: None,
            waker: None,
        }
    }

    fn from_source(source: Source, state: State) -> Self {
        let remote_uri = match &source {
            Source::Remote(t) => Some(t.libvirt_uri()),
            _ => None,
        };
        let default_uri = match (&source, &remote_uri) {
            (Source::Demo, _) => crate::libvirt::TEST_URI.to_string(),
            (_, Some(u)) => u.clone(),
            _ => crate::libvirt::DEFAULT_URI.to_string(),
        };
        let mut app = Self::empty(state, &default_uri);
        app.state_key = state_key(&host_identity(&source));
        app.source = Some(source.clone());
        app.source_label = source.label();
        app.libvirt_uri = source.libvirt_uri();
        match &source {
            // Fetched on a worker, with its progress said (`start_scan`).
            Source::Remote(t) => {
                app.picker.ssh = t.url();
                app.remote = Some(t.clone());
            }
            // This machine, or a folder, a snapshot file or the demo unpacked
            // for as long as the app shows it: as the CLI opens them.
            _ => match source.open() {
                Ok(opened) => {
                    app.root = Some(opened.root.clone());
                    app._unpacked = Some(opened);
                }
                Err(e) => app.error = Some(format!("{e:#}")),
            },
        }
        app
    }

    /// An app that starts scanning `source` at once; `wake` is called when the
    /// scan is done (eframe passes a repaint request; tests may pass nothing).
    pub fn with_source(source: Source, state: State, wake: impl FnOnce() + Send + 'static) -> Self {
        let mut app = Self::from_source(source, state);
        app.start_scan(wake);
        app
    }

    /// Another machine reached through `target` exactly as given (its ssh
    /// command and programs there named: tests, embedding).
    pub fn with_remote(
        target: crate::remote::SshTarget,
        state: State,
        wake: impl FnOnce() + Send + 'static,
    ) -> Self {
        let mut app = Self::from_source(Source::Remote(target), state);
        app.start_scan(wake);
        app
    }

    /// An app showing an already scanned host (tests, embedding).
    pub fn with_snapshot(snapshot: HostSnapshot, state: State) -> Self {
        let mut app = Self::empty(state, crate::libvirt::DEFAULT_URI);
        app.source_label = snapshot.root.clone();
        app.findings = Arc::new(run_checks(&snapshot, None));
        app.snapshot = Some(Arc::new(snapshot));
        app
    }

    fn start_scan(&mut self, wake: impl FnOnce() + Send + 'static) {
        // Another machine: its snapshot is fetched again first (then scanned).
        if let Some(t) = &self.remote {
            if self.fetching.is_none() {
                self.fetching = Some(super::worker::spawn_fetch(t.clone(), wake));
            }
            return;
        }
        self.scan_root(wake);
    }

    /// Scan the root as it is (another machine's: the snapshot fetched).
    fn scan_root(&mut self, wake: impl FnOnce() + Send + 'static) {
        if let Some(root) = &self.root {
            self.scanning = Some(spawn_scan(root.clone(), self.libvirt_uri.clone(), wake));
        }
    }

    /// What the top bar calls the host (embedding, and pictures of a page
    /// on a temporary root, whose path differs every run).
    pub fn set_source_label(&mut self, label: impl Into<String>) {
        self.source_label = label.into();
    }

    pub fn is_scanning(&self) -> bool {
        self.scanning.is_some() || self.fetching.is_some()
    }

    /// Whether another machine's snapshot is being fetched over SSH.
    pub fn is_fetching(&self) -> bool {
        self.fetching.is_some()
    }

    /// Another machine itself (not a captured root there): its live pages
    /// run there, its tuning is done there.
    pub fn live_remote(&self) -> Option<&crate::remote::SshTarget> {
        self.remote.as_ref().filter(|t| t.root.is_none())
    }

    /// Whether the host shown is a running machine (this one or another
    /// over SSH), not a capture that never moves.
    pub fn shows_a_live_machine(&self) -> bool {
        self.root.as_ref().is_some_and(HostRoot::is_live) || self.live_remote().is_some()
    }

    /// Whether the monitor's sampler runs.
    pub fn is_monitoring(&self) -> bool {
        self.sampler.is_some()
    }

    /// The wizard's libvirt URI as the user set it, or the default.
    pub fn wizard_uri(&self) -> String {
        let u = self.state.wizard.uri.trim();
        if u.is_empty() {
            self.wizard.default_uri.clone()
        } else {
            u.to_string()
        }
    }

    /// The host the pages act on: the one scanned (a captured tree reads
    /// from that tree; an embedded snapshot from where it was taken).
    fn root_or_live(&self) -> HostRoot {
        match (&self.root, &self.snapshot) {
            (Some(r), _) => r.clone(),
            (None, Some(s)) => HostRoot::at(&s.root),
            (None, None) => HostRoot::live(),
        }
    }

    /// Whether any page's job still runs (for tests and the window title).
    pub fn is_busy(&self) -> bool {
        let w = &self.wizard;
        let t = &self.troubleshoot;
        w.caps_job.is_busy()
            || w.validate_job.is_busy()
            || w.define_job.is_busy()
            || w.pick_job.is_busy()
            || w.input_job.is_busy()
            || w.disk_job.is_busy()
            || w.place_job.is_busy()
            || w.iso_job.is_busy()
            || w.virtio_fetch.job.is_busy()
            || w.vm.action.is_busy()
            || w.vm.state_job.is_busy()
            || t.probe_job.is_busy()
            || t.vm.action.is_busy()
            || t.vm.state_job.is_busy()
            || self.devices.rom_job.is_busy()
            || self.cpu.apply_job.is_busy()
            || self.monitor_rt.latency_job.is_busy()
            || self.tuning.facts_job.is_busy()
            || self.tuning.status_job.is_busy()
            || self.tuning.is_running()
    }

    /// A closure that repaints the window when a job is done.
    fn wake(&self) -> impl FnOnce() + Send + 'static {
        let ctx = self.waker.clone();
        move || {
            if let Some(c) = ctx {
                c.request_repaint();
            }
        }
    }
}

impl App {
    /// Show `source` instead: this host's choices are saved in `storage`,
    /// the other's loaded from it (each host keeps its own).
    /// One frame's work besides drawing: a host switch asked for (the old
    /// host's choices saved, the new one's loaded), the jobs' results, and
    /// the choices' key once a fetched machine's id is known. `storage` is
    /// eframe's (tests pass their own).
    pub fn logic_with(&mut self, mut storage: Option<&mut (dyn eframe::Storage + '_)>) {
        if let Some(source) = self.switch_to.take() {
            self.switch_host(source, storage.as_deref_mut());
        }
        self.poll();
        if let Some(key) = self.rekey.take() {
            self.adopt_key(key, storage);
        }
    }

    /// The choices are kept under `key` from now on (another machine's id,
    /// learnt with its snapshot): the ones saved there before are taken
    /// up (the page shown stays), or, when there are none, the ones made so
    /// far move there.
    pub fn adopt_key(&mut self, key: String, storage: Option<&mut (dyn eframe::Storage + '_)>) {
        if key == self.state_key {
            return;
        }
        if let Some(st) = storage {
            // What was chosen under the address so far stays there too.
            eframe::set_value(st, &self.state_key, &self.state);
            if let Some(saved) = eframe::get_value::<State>(st, &key) {
                let page = self.state.page;
                self.state = saved;
                self.state.page = page;
            }
        }
        self.state_key = key;
    }

    /// The key the choices are saved under.
    pub fn state_key(&self) -> &str {
        &self.state_key
    }

    pub fn switch_host(
        &mut self,
        source: Source,
        storage: Option<&mut (dyn eframe::Storage + '_)>,
    ) {
        let key = state_key(&host_identity(&source));
        let state = match storage {
            Some(st) => {
                eframe::set_value(st, &self.state_key, &self.state);
                eframe::get_value(st, &key).unwrap_or_default()
            }
            None => State::default(),
        };
        let waker = self.waker.clone();
        let mut next = Self::with_source(source, state, {
            let w = waker.clone();
            move || {
                if let Some(c) = w {
                    c.request_repaint();
                }
            }
        });
        next.state_key = key;
        next.waker = waker;
        next.picker.via = std::mem::take(&mut self.picker.via);
        self.stop_monitor();
        *self = next;
    }
}

impl eframe::App for App {
    fn logic(&mut self, ctx: &egui::Context, frame: &mut eframe::Frame) {
        if self.waker.is_none() {
            self.waker = Some(ctx.clone());
        }
        self.logic_with(frame.storage_mut());
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.ui_content(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, &self.state_key, &self.state);
    }
}
