//! The views' `Command`s (command.rs), run by the app afterwards: each
//! command carries only what the view knows; the app adds the host, the
//! URI and the snapshot, and starts the job in the slot of the page that
//! asked, so its answer comes back there.

use super::App;
use super::command::{Command, VmPage};
use crate::monitor::sampler::{MonitorConfig, spawn};
use crate::ui::jobs::{self, VmAction};
use crate::ui::state::Page;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Write `text` to `path` for a Save button: whole or not at all, never
/// into a FIFO or through a link (the user named the file: it is replaced).
fn save(path: &str, text: &str, then: &str) -> Result<String, String> {
    crate::userfile::write_new_atomic(std::path::Path::new(path), text.as_bytes(), true)
        .map(|()| format!("Saved to {path}. {then}"))
        .map_err(|e| e.to_string())
}

impl App {
    pub(super) fn run(&mut self, cmd: Command, ctx: &egui::Context) {
        let wake = self.wake();
        let root = self.root_or_live();
        let uri = self.wizard_uri();
        // Each job in its page's slot; a busy slot says so on its page.
        let refused: Option<String> = match cmd {
            Command::SwitchHost(source) => {
                self.switch_to = Some(source);
                None
            }
            Command::Rescan => {
                let ctx = ctx.clone();
                self.start_scan(move || ctx.request_repaint());
                None
            }
            Command::ShowPage(p) => {
                if p != Page::Monitor {
                    // Nothing samples while nobody looks.
                    self.stop_monitor();
                }
                if p == Page::NewVm {
                    self.wizard_takes_the_vm_card();
                }
                self.state.page = p;
                None
            }
            Command::NewVmWith(a) => {
                let gpu = self
                    .snapshot
                    .as_ref()
                    .and_then(|s| s.device(&a))
                    .is_some_and(|e| e.device.is_gpu());
                let w = &mut self.state.vm;
                if gpu {
                    w.gpu = Some(a);
                    self.state.wizard.no_passthrough = false;
                } else if !w.devices.contains(&a) {
                    w.devices.push(a);
                }
                self.state.page = Page::NewVm;
                None
            }
            Command::ShowDevice(a) => {
                self.state.page = Page::Devices;
                self.focus_device = Some(a);
                None
            }
            Command::StartMonitor => {
                self.start_monitor(ctx);
                None
            }
            Command::ReadRom { addr, card } => self
                .devices
                .rom_job
                .start(
                    move || {
                        let f = jobs::read_rom(&root, &addr, card);
                        (addr, f)
                    },
                    wake,
                )
                .err(),
            Command::OpenCpuApply { tune_rest } => {
                self.state.pin_tune_rest |= tune_rest;
                if self.state.pin_domain.trim().is_empty() {
                    self.state.pin_domain = self.state.doctor_domain.trim().to_string();
                }
                self.stop_monitor();
                self.state.page = Page::Cpu;
                None
            }
            Command::ApplyPinning {
                domain,
                plan,
                tune_rest,
            } => {
                self.cpu.applied = None;
                let d = domain.clone();
                let r = self
                    .cpu
                    .apply_job
                    .start(
                        move || jobs::apply_pinning(&d, &uri, *plan, tune_rest),
                        wake,
                    )
                    .err();
                if r.is_none() && !self.cpu.pending_restart.contains(&domain) {
                    self.cpu.pending_restart.push(domain);
                }
                r.inspect(|e| self.cpu.applied = Some(Err(e.clone())))
            }
            Command::SaveBoardXml { xml, path } => {
                self.cpu.saved = Some(save(
                    &path,
                    &xml,
                    "Paste it into the domain's XML (virsh edit), or use Apply below.",
                ));
                None
            }
            Command::Latency {
                cpus,
                seconds,
                compare_idle,
            } => {
                let remote = self.live_remote().cloned();
                self.monitor_rt
                    .latency_job
                    .start(
                        move || match remote {
                            // The probe runs there, on that machine's CPUs.
                            Some(t) => match t.latency(&cpus, seconds, compare_idle) {
                                Ok((c, h)) => (Ok(c), h.map(|r| r.map_err(|e| e.to_string()))),
                                Err(e) => (Err(e.to_string()), None),
                            },
                            None => jobs::latency(&cpus, seconds, compare_idle),
                        },
                        wake,
                    )
                    .err()
            }
            Command::PickFile(field) => self
                .wizard
                .pick_job
                .start(move || jobs::pick_file(field), wake)
                .err(),
            Command::WatchInput { devices } => {
                self.wizard.input_result = None;
                let remote = self.live_remote().cloned();
                self.wizard
                    .input_job
                    .start(
                        move || match remote {
                            // That machine's keyboards, pressed there.
                            Some(t) => t.watch_input(&devices, 5).map_err(|e| e.to_string()),
                            None => jobs::watch_input(&root, &devices),
                        },
                        wake,
                    )
                    .err()
            }
            Command::Validate { xml } => {
                let Some(snap) = self.snapshot.clone() else {
                    return;
                };
                self.wizard.preflight = None;
                let x = xml.clone();
                self.wizard
                    .validate_job
                    .start(move || jobs::validate(&root, &snap, &uri, &x), wake)
                    .err()
            }
            Command::Define { xml, install } => {
                let Some(snap) = self.snapshot.clone() else {
                    return;
                };
                self.wizard.defined = None;
                self.wizard
                    .define_job
                    .start(
                        move || match install {
                            Some(u) => {
                                crate::ui::install_jobs::define_unattended(&root, &snap, &uri, &u)
                            }
                            None => jobs::define(&root, &snap, &uri, &xml),
                        },
                        wake,
                    )
                    .err()
            }
            Command::SaveXml { xml, path } => {
                let then = format!(
                    "Define it here with Define, or `vfio-assistant domain define {path}` in a terminal."
                );
                self.wizard.saved = Some(save(&path, &xml, &then));
                None
            }
            Command::CreateDisk { path, size_gib } => {
                self.wizard.disk_made = None;
                self.wizard
                    .disk_job
                    .start(move || jobs::create_disk(&uri, &path, size_gib), wake)
                    .err()
            }
            Command::DownloadVirtio { to } => self.wizard.virtio_fetch.start(to, wake).err(),
            Command::CancelVirtioDownload => {
                let c = &self.wizard.virtio_fetch.cancel;
                c.store(true, std::sync::atomic::Ordering::Relaxed);
                None
            }
            Command::InspectIso { path } => self
                .wizard
                .iso_job
                .start(
                    move || {
                        let said =
                            crate::install::unattended::describe_iso(std::path::Path::new(&path))
                                .map_err(|e| e.to_string());
                        (path, said)
                    },
                    wake,
                )
                .err(),
            Command::DiskPlace { vm_name } => {
                self.wizard.place_asked = Some(vm_name.clone());
                self.wizard
                    .place_job
                    .start(
                        move || {
                            let p = jobs::disk_place(&uri, &vm_name);
                            (vm_name, p)
                        },
                        wake,
                    )
                    .err()
            }
            Command::Vm { page, name, action } => {
                let remote = self.live_remote().cloned();
                let vm = match page {
                    VmPage::Wizard => &mut self.wizard.vm,
                    VmPage::Troubleshoot => &mut self.troubleshoot.vm,
                };
                vm.follow(&name);
                vm.done = None;
                // The state is read again as soon as the action is done.
                vm.state_read_at = None;
                if action == VmAction::Start {
                    self.cpu.pending_restart.retain(|d| d != &name);
                }
                vm.action
                    .start(
                        move || jobs::vm_action(&root, &uri, &name, action, remote.as_ref()),
                        wake,
                    )
                    .err()
            }
            Command::ProbeVm(domain) => {
                let Some(snap) = self.snapshot.clone() else {
                    return;
                };
                self.troubleshoot.vm_findings = None;
                self.troubleshoot.vm.follow(&domain);
                self.troubleshoot
                    .probe_job
                    .start(move || jobs::probe(&root, &snap, &uri, &domain), wake)
                    .err()
            }
            Command::TuningApply { request, steps } => {
                self.start_helper(
                    crate::helper::HelperRequest::Apply {
                        request: Box::new(request),
                    },
                    steps,
                );
                None
            }
            Command::TuningUndo { id } => {
                let steps = self
                    .tuning
                    .status
                    .iter()
                    .find(|e| e.id == id)
                    .map_or(0, |e| e.changes.len());
                self.start_helper(
                    crate::helper::HelperRequest::Undo { id, force: false },
                    steps,
                );
                None
            }
            Command::OpenTuning {
                focus,
                gpus,
                memory_gib,
            } => {
                for g in gpus {
                    self.vm_takes_card(g);
                }
                if let Some(m) = memory_gib {
                    if self.state.vm.memory_gib == 0 {
                        self.state.vm.memory_gib = m;
                    }
                    self.state.tuning.reserve_hugepages = true;
                }
                let t = &mut self.state.tuning;
                t.off.retain(|id| !focus.contains(id));
                // Each change gets its first tick again: only the named ones on.
                ctx.data_mut(|d| {
                    d.remove::<std::collections::BTreeSet<String>>(
                        crate::ui::views::tuning::presented_id(),
                    )
                });
                self.tuning.focus = focus;
                self.stop_monitor();
                self.state.page = Page::Tuning;
                None
            }
            Command::OpenSharedTuning { gpu } => {
                self.open_gpu_mode(gpu, true);
                None
            }
            Command::OpenSingleGpuTuning { gpu } => {
                self.open_gpu_mode(gpu, false);
                None
            }
            Command::ChooseVmGpu(gpu) => {
                // The VM's card on every page.
                self.state.vm.gpu = Some(gpu.clone());
                self.state.vm_gpu = Some(gpu);
                None
            }
        };
        // Said in the top bar until the next command.
        self.note = refused;
    }

    /// A card for the VM: its GPU when it has none, else one more bound.
    fn vm_takes_card(&mut self, g: String) {
        if self.state.vm.gpu.is_none() {
            self.state.vm.gpu = Some(g);
        } else if self.state.vm.gpu.as_ref() != Some(&g) && !self.state.tuning.gpus.contains(&g) {
            self.state.tuning.gpus.push(g);
        }
    }

    /// The Tuning page with `gpu` in shared mode (`shared`) or single-GPU
    /// mode, for the New VM page's VM, that mode's changes asked for.
    fn open_gpu_mode(&mut self, gpu: String, shared: bool) {
        let vm = self.state.vm.name.clone();
        self.state.vm.gpu = Some(gpu.clone());
        let t = &mut self.state.tuning;
        t.gpus.retain(|g| *g != gpu);
        let (on, off, focus) = if shared {
            (
                &mut t.shared_gpu_vm,
                &mut t.single_gpu_vm,
                vec![
                    "shared-gpu-hook".to_string(),
                    "shared-gpu-desktop".to_string(),
                ],
            )
        } else {
            (
                &mut t.single_gpu_vm,
                &mut t.shared_gpu_vm,
                vec!["single-gpu-hook".to_string()],
            )
        };
        if on.trim().is_empty() {
            *on = vm;
        }
        off.clear();
        t.off.retain(|id| !focus.contains(id));
        self.tuning.focus = focus;
        self.stop_monitor();
        self.state.page = Page::Tuning;
    }

    /// Run the helper with `req`; its lines arrive in the Tuning runtime.
    fn start_helper(&mut self, req: crate::helper::HelperRequest, steps: usize) {
        if self.tuning.is_running() {
            self.note = Some("Still applying: wait for it to finish.".into());
            return;
        }
        let root = self.root_or_live();
        let program = self.tuning.helper.clone();
        let remote = self.remote.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let waker = self.waker.clone();
        self.tuning.run = Some(rx);
        self.tuning.lines.clear();
        self.tuning.ended = None;
        self.tuning.terminal = crate::ui::pkexec_words::terminal_for(&req);
        self.tuning.steps = steps;
        let spawned = std::thread::Builder::new()
            .name("helper".into())
            .spawn(move || {
                jobs::run_helper(
                    &root,
                    &req,
                    program.as_ref(),
                    remote.as_ref(),
                    tx,
                    move || {
                        if let Some(c) = &waker {
                            c.request_repaint();
                        }
                    },
                )
            });
        if let Err(e) = spawned {
            self.tuning.run = None;
            self.note = Some(format!("could not start the helper: {e}"));
        }
    }

    pub(super) fn stop_monitor(&mut self) {
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
        let stop = Arc::new(AtomicBool::new(false));
        if let Some(target) = self.live_remote().cloned() {
            // That machine's own monitor, streamed (the snapshot here never moves).
            self.monitor.from = Some(target.shown());
            let ctx = ctx.clone();
            let domain = (!domain.is_empty()).then(|| domain.to_string());
            match target.spawn_monitor(
                domain.as_deref(),
                Duration::from_secs(1),
                stop.clone(),
                move || ctx.request_repaint(),
            ) {
                Ok(rx) => self.sampler = Some((rx, stop)),
                Err(e) => self.monitor.ended = Some(e.to_string()),
            }
            return;
        }
        let config = MonitorConfig {
            root,
            uri: Some(self.wizard_uri()),
            connect: Some(crate::libvirt::connect),
            domain: (!domain.is_empty()).then(|| domain.to_string()),
            interval: Duration::from_secs(1),
            only_changes: true,
        };
        let ctx = ctx.clone();
        if let Ok(rx) = spawn(config, stop.clone(), move || ctx.request_repaint()) {
            self.sampler = Some((rx, stop));
        }
    }
}
