//! Taking what the workers sent, with no drawing (eframe's `logic`): the
//! scan, each page's job slots, the monitor's samples, and the live state
//! of the VM a page's buttons act on (read again every few seconds while
//! that page shows).

use super::App;
use crate::ui::jobs::{self, PickField};
use crate::ui::pages::VmControl;
use crate::ui::runtime::flatten;
use crate::ui::state::{Page, state_key};
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

/// How often a shown VM's state is read again.
const VM_STATE_EVERY: Duration = Duration::from_secs(2);

impl App {
    /// Everything that arrived since the last frame.
    pub fn poll(&mut self) {
        self.poll_fetch();
        self.poll_scan();
        self.poll_jobs();
        self.poll_monitor();
        self.refresh_vm_state();
        self.poll_tuning();
    }

    /// Another machine's snapshot arrived: it is the root now (the last
    /// one dropped), scanned like any other; the Tuning page reads it anew.
    fn poll_fetch(&mut self) {
        let Some(rx) = &self.fetching else { return };
        let got = match rx.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => Err("the fetch stopped without a result".into()),
        };
        self.fetching = None;
        match got {
            Ok(opened) => {
                // That machine's choices are kept under its own id, the
                // one the app running there uses too, whatever the address.
                self.rekey = opened
                    .machine_id
                    .as_ref()
                    .map(|id| state_key(&format!("live:{id}")));
                self.root = Some(opened.root.clone());
                self._unpacked = Some(opened);
                self.tuning.facts = None;
                self.tuning.single_gpu = None;
                self.tuning.status_asked = false;
                let wake = self.wake();
                self.scan_root(wake);
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// The Tuning page: its facts and journal when it shows (read again
    /// after each helper run), and the helper's lines as they come.
    fn poll_tuning(&mut self) {
        let t = &mut self.tuning;
        if let Some(Ok(f)) = t.facts_job.poll() {
            t.facts = Some(f);
            t.forget_plan();
        }
        if let Some(Ok(s)) = t.status_job.poll() {
            t.status = s;
        }
        if let Some(Ok(s)) = t.watch_job.poll() {
            t.status = s;
        }
        if let Some(Ok(f)) = t.single_gpu_job.poll() {
            t.single_gpu = Some(f);
        }
        let mut finished = false;
        if let Some(rx) = &t.run {
            while let Ok(m) = rx.try_recv() {
                match m {
                    jobs::HelperMsg::Line(h) => t.lines.push(h),
                    jobs::HelperMsg::Exit(code, err) => {
                        t.ended = Some((code, jobs::helper_exit_words(code, &err, &t.terminal)));
                        finished = true;
                    }
                    jobs::HelperMsg::NotStarted(why) => {
                        t.ended = Some((None, Some(why)));
                        finished = true;
                    }
                }
            }
        }
        if finished {
            t.run = None;
            // The host changed: read it again (another machine's snapshot
            // is fetched anew).
            t.facts = None;
            t.single_gpu = None;
            t.status_asked = false;
            if self.remote.is_some() {
                let wake = self.wake();
                self.start_scan(wake);
            }
        }
        // Nothing is read before the host is there (another machine's
        // snapshot still on its way).
        if self.state.page != Page::Tuning || self.root.is_none() && self.remote.is_some() {
            return;
        }
        let root = self.root_or_live();
        if self.tuning.facts.is_none()
            && !self.tuning.facts_job.is_busy()
            && !self.tuning.is_running()
        {
            let r = root.clone();
            let _ = self
                .tuning
                .facts_job
                .start(move || jobs::tuning_facts(&r), self.wake());
        }
        let single = &self.state.tuning.single_gpu_vm;
        if single.trim().is_empty() {
            self.tuning.single_gpu = None;
        } else if self.tuning.single_gpu.is_none()
            && !self.tuning.single_gpu_job.is_busy()
            && let Some(snap) = self.snapshot.clone()
        {
            let r = root.clone();
            let gpu = crate::ui::views::tuning::vm_cards(&self.state)
                .first()
                .cloned();
            let _ = self.tuning.single_gpu_job.start(
                move || crate::report::single_gpu::for_gpus(&r, &snap, gpu.as_deref()),
                self.wake(),
            );
        }
        // A transaction still running (the app that started it was closed
        // while its helper went on): its journal read again every two
        // seconds until it ends, apart from the page's jobs.
        let t = &self.tuning;
        if t.status
            .iter()
            .any(|s| s.standing == crate::tuning::status::Standing::Running)
            && !t.watch_job.is_busy()
            && !t.status_job.is_busy()
        {
            let r = root.clone();
            let _ = self.tuning.watch_job.start(
                move || {
                    std::thread::sleep(Duration::from_secs(2));
                    jobs::tuning_status(&r)
                },
                self.wake(),
            );
        }
        if !self.tuning.status_asked && !self.tuning.status_job.is_busy() {
            self.tuning.status_asked = true;
            let _ = self
                .tuning
                .status_job
                .start(move || jobs::tuning_status(&root), self.wake());
        }
    }

    fn poll_scan(&mut self) {
        let Some(rx) = &self.scanning else { return };
        match rx.try_recv() {
            Ok(Ok((snap, findings))) => {
                let dropped = self.state.fit_to_host(&snap);
                if !dropped.is_empty() {
                    self.note = Some(format!(
                        "Saved choices that do not fit this host were left out: {}.",
                        dropped.join("; ")
                    ));
                }
                self.snapshot = Some(std::sync::Arc::new(snap));
                self.tuning.forget_plan();
                self.findings = std::sync::Arc::new(findings);
                self.error = None;
                self.scanning = None;
            }
            Ok(Err(e)) => {
                self.error = Some(e);
                self.scanning = None;
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => {
                self.error = Some("the scan stopped without a result".into());
                self.scanning = None;
            }
        }
    }

    fn poll_jobs(&mut self) {
        let w = &mut self.wizard;
        if let Some(r) = w.caps_job.poll() {
            let r = flatten(r).ok();
            w.versions = r.as_ref().and_then(|x| x.1);
            w.caps = r.map(|x| x.0);
            self.state.wizard.versions = w.versions;
        }
        if let Some(r) = w.validate_job.poll() {
            w.preflight = Some((String::new(), flatten(r)));
        }
        if let Some(r) = w.define_job.poll() {
            let r = flatten(r);
            if let Ok(plan) = &r {
                w.vm.follow(&plan.name);
                w.vm.state_read_at = None;
            }
            w.defined = Some(r);
        }
        if let Some(r) = w.disk_job.poll() {
            let r = flatten(r);
            if let Ok(path) = &r {
                self.state.wizard.disk = path.clone();
                self.state.wizard.create_disk = false;
            }
            self.wizard.disk_made = Some(r);
        }
        let w = &mut self.wizard;
        if let Some(Ok(place)) = w.place_job.poll() {
            w.place = Some(place);
        }
        if let Some(Ok(seen)) = w.iso_job.poll() {
            w.iso_seen = Some(seen);
        }
        if let Some(r) = w.virtio_fetch.job.poll() {
            let r = r.and_then(|x| x);
            if let Ok(p) = &r {
                self.state.vm.virtio_iso = p.clone();
            }
            w.virtio_fetch.done = Some(r);
        }
        if let Some(r) = w.input_job.poll() {
            let r = r.and_then(|x| x);
            if let (Ok(found), Some(snap)) = (&r, &self.snapshot) {
                let kind_of = |p: &str| {
                    snap.system
                        .input
                        .iter()
                        .find(|d| d.by_id == p)
                        .map(|d| d.kind)
                };
                use crate::host::input::InputKind;
                let wiz = &mut self.state.wizard;
                if let Some(k) = found
                    .iter()
                    .find(|x| x.keys > 0 && kind_of(&x.by_id) == Some(InputKind::Keyboard))
                {
                    wiz.evdev_keyboard = k.by_id.clone();
                }
                if let Some(m) = found
                    .iter()
                    .find(|x| x.moves > 0 && kind_of(&x.by_id) == Some(InputKind::Mouse))
                {
                    wiz.evdev_mouse = m.by_id.clone();
                }
            }
            self.wizard.input_result = Some(r);
        }
        let w = &mut self.wizard;
        if let Some(r) = w.pick_job.poll() {
            match r {
                Ok((field, path)) => self.picked(field, path),
                Err(e) => self.wizard.pick_note = Some(e),
            }
        }
        poll_vm(&mut self.wizard.vm);
        let t = &mut self.troubleshoot;
        if let Some(r) = t.probe_job.poll() {
            t.vm_findings = Some(flatten(r));
        }
        poll_vm(&mut self.troubleshoot.vm);
        if let Some(r) = self.devices.rom_job.poll() {
            match r {
                Ok((addr, f)) => {
                    self.devices.rom_findings.insert(addr, f);
                }
                Err(e) => self.note = Some(e),
            }
        }
        if let Some(r) = self.cpu.apply_job.poll() {
            self.cpu.applied = Some(flatten(r));
        }
        if let Some(r) = self.monitor_rt.latency_job.poll() {
            match r {
                Ok((configured, held)) => {
                    self.monitor.latency = Some(configured);
                    self.monitor.latency_held = held;
                }
                Err(e) => self.monitor.latency = Some(Err(e)),
            }
        }
    }

    /// Take the monitor's new samples.
    fn poll_monitor(&mut self) {
        let Some((rx, _)) = &self.sampler else { return };
        let mut ended = None;
        while let Ok(u) = rx.try_recv() {
            match u.ended {
                Some(why) => ended = Some(why),
                None => self.monitor.push(u),
            }
        }
        // Said on the page, and not started again by itself: Start does.
        if ended.is_some() {
            self.monitor.ended = ended;
            self.stop_monitor();
        }
    }

    /// Read the followed VM's state again when its page shows and it is due.
    fn refresh_vm_state(&mut self) {
        let uri = self.wizard_uri();
        let wake = self.wake();
        let vm = match self.state.page {
            Page::NewVm => &mut self.wizard.vm,
            Page::Troubleshoot => &mut self.troubleshoot.vm,
            _ => return,
        };
        let Some(name) = vm.name.clone() else { return };
        let due = vm
            .state_read_at
            .is_none_or(|t| t.elapsed() >= VM_STATE_EVERY);
        if !due || vm.state_job.is_busy() || vm.action.is_busy() {
            return;
        }
        vm.state_read_at = Some(Instant::now());
        let _ = vm
            .state_job
            .start(move || jobs::vm_state(&uri, &name), wake);
        if let Some(ctx) = &self.waker {
            ctx.request_repaint_after(VM_STATE_EVERY);
        }
    }

    /// A file dialog's answer goes into its wizard field.
    /// The wizard opened from a next step or the top bar starts with the
    /// VM's card (`report::vm_card`, the Overview's choice), unless it has
    /// one already or the user said "no passthrough".
    pub(super) fn wizard_takes_the_vm_card(&mut self) {
        if self.state.vm.gpu.is_some() || self.state.wizard.no_passthrough {
            return;
        }
        let Some(snap) = self.snapshot.as_ref() else {
            return;
        };
        if let crate::report::vm_card::Pick::Card { card, .. } =
            crate::report::vm_card::pick(snap, self.state.vm_gpu.as_deref())
        {
            self.state.vm.gpu = Some(card.address().to_string());
        }
    }

    fn picked(&mut self, field: PickField, path: Option<String>) {
        let Some(path) = path else {
            self.wizard.pick_note = Some(
                "No file chosen. If no dialog appeared, this desktop has no xdg-desktop-portal: type the path instead.".into(),
            );
            return;
        };
        self.wizard.pick_note = None;
        match field {
            PickField::Disk => self.state.wizard.disk = path,
            PickField::InstallIso => self.state.vm.install_iso = path,
            PickField::VirtioIso => self.state.vm.virtio_iso = path,
            PickField::LgInstaller => self.state.vm.lg_installer = path,
        }
    }
}

fn poll_vm(vm: &mut VmControl) {
    if let Some(r) = vm.state_job.poll() {
        vm.state = Some(flatten(r));
    }
    if let Some(r) = vm.action.poll() {
        vm.done = Some(flatten(r));
        // Read the state at once: it changed, or the start failed.
        vm.state_read_at = None;
    }
}
