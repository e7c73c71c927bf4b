//! The monitor's one thread: every interval it reads a sample, turns the last
//! two into rates and sends them. A VM named in the config is looked up when
//! the monitor starts and again every few seconds until it is found (it may be
//! started later); a source that fails is reported in the rates, and the
//! monitor goes on. It stops when told to or when nobody listens any more.

use super::rates::{Rates, rates};
use super::sample::{Sample, VmThreads, read_host_after, read_threads};
use super::vm::{KvmSource, find_vm, kvm_counters};
use crate::hypervisor::{Connect, Hypervisor};
use crate::sysroot::HostRoot;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct MonitorConfig {
    pub root: HostRoot,
    /// libvirt URI for the VM's QMP (needed with `domain`).
    pub uri: Option<String>,
    /// How to open it (the app passes `vfio_assistant_libvirt::connect`);
    /// without one a domain is not followed, and the reason is said.
    pub connect: Option<Connect>,
    pub domain: Option<String>,
    pub interval: Duration,
    /// Send an update only when it would show something new (the app: no
    /// repaint when nothing moved). The CLI prints every sample.
    pub only_changes: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Update {
    /// Seconds since the monitor started.
    pub t_s: f64,
    pub rates: Rates,
    pub vm: Option<VmThreads>,
    /// Why the VM is not (yet) followed.
    pub vm_problem: Option<String>,
    /// A feed from another machine that ended: why (the last update, with
    /// nothing else in it). The local sampler never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

impl Update {
    /// The last update of a feed that ended, saying why.
    pub fn ended(why: String) -> Update {
        Update {
            t_s: 0.0,
            rates: Rates::default(),
            vm: None,
            vm_problem: None,
            ended: Some(why),
        }
    }

    /// Whether `other` would draw the same page: the same rates, the same VM
    /// and the same problems; only the time and the interval length differ.
    pub fn shows_the_same(&self, other: &Update) -> bool {
        let mut a = self.rates.clone();
        a.dt_s = other.rates.dt_s;
        a == other.rates && self.vm == other.vm && self.vm_problem == other.vm_problem
    }
}

/// Everything the thread keeps between samples.
struct Monitor {
    config: MonitorConfig,
    hv: Option<Box<dyn Hypervisor + Send>>,
    vm: Option<VmThreads>,
    vm_problem: Option<String>,
    since_lookup: u32,
    prev: Option<Sample>,
    start_ns: u64,
    /// The source of KVM's counters that worked last time: tried first.
    kvm_source: Option<KvmSource>,
}

impl Monitor {
    fn new(config: MonitorConfig) -> Self {
        let mut m = Monitor {
            hv: None,
            vm: None,
            vm_problem: None,
            since_lookup: 0,
            prev: None,
            kvm_source: None,
            start_ns: super::sample::monotonic_ns(),
            config,
        };
        if m.config.domain.is_some() {
            let uri = m
                .config
                .uri
                .clone()
                .unwrap_or_else(|| crate::hypervisor::DEFAULT_URI.into());
            match m.config.connect.map(|open| open(&uri)) {
                Some(Ok(hv)) => m.hv = Some(hv),
                Some(Err(e)) => m.vm_problem = Some(e.to_string()),
                None => m.vm_problem = Some("this build cannot open libvirt".into()),
            }
        }
        m
    }

    fn look_up_vm(&mut self) {
        let (Some(hv), Some(name)) = (&self.hv, &self.config.domain) else {
            return;
        };
        match find_vm(hv.as_ref(), &self.config.root, name) {
            Ok(vm) => {
                self.vm = Some(vm);
                self.vm_problem = None;
            }
            Err(e) => self.vm_problem = Some(e.to_string()),
        }
    }

    /// One sample; rates once there are two.
    fn step(&mut self) -> Option<Update> {
        if self.vm.is_none() && self.since_lookup.is_multiple_of(8) {
            self.look_up_vm();
        }
        self.since_lookup = self.since_lookup.wrapping_add(1);
        let mut s = read_host_after(&self.config.root, self.prev.as_ref());
        if let Some(vm) = &self.vm {
            read_threads(&self.config.root, vm, &mut s);
            if s.threads.is_empty() {
                // The VM stopped (or restarted with new threads): look again.
                self.vm = None;
                self.vm_problem = Some("its vCPU threads are gone (stopped or restarted)".into());
            } else if let Some(hv) = &self.hv {
                match kvm_counters(hv.as_ref(), &self.config.root, vm, self.kvm_source) {
                    Ok((source, k)) => {
                        s.kvm = k;
                        s.kvm_source = Some(source);
                        self.kvm_source = Some(source);
                    }
                    Err(e) => {
                        self.kvm_source = None;
                        s.problems.push(format!("KVM counters: {e}"));
                    }
                }
            }
        }
        let out = self.prev.as_ref().map(|p| Update {
            t_s: s.t_ns.saturating_sub(self.start_ns) as f64 / 1e9,
            rates: rates(p, &s, self.vm.as_ref()),
            vm: self.vm.clone(),
            vm_problem: self.vm_problem.clone(),
            ended: None,
        });
        self.prev = Some(s);
        out
    }
}

/// Start the monitor; each `Update` arrives on the receiver, `wake` is called
/// after each (the app's repaint).
pub fn spawn(
    config: MonitorConfig,
    stop: Arc<AtomicBool>,
    wake: impl Fn() + Send + 'static,
) -> std::io::Result<Receiver<Update>> {
    let (tx, rx) = channel();
    std::thread::Builder::new()
        .name("monitor".into())
        .spawn(move || {
            let interval = config.interval.max(Duration::from_millis(50));
            let only_changes = config.only_changes;
            let mut m = Monitor::new(config);
            let mut shown: Option<Update> = None;
            // The last update held back: sent just before the next one that
            // shows something new, so a plot stays flat up to the change
            // instead of sloping across the quiet stretch.
            let mut held: Option<Update> = None;
            while !stop.load(Ordering::Relaxed) {
                if let Some(u) = m.step() {
                    // Nothing moved (an idle or captured host): the window is
                    // not woken to draw the same thing again.
                    if only_changes && shown.as_ref().is_some_and(|s| s.shows_the_same(&u)) {
                        held = Some(u);
                    } else {
                        shown = Some(u.clone());
                        let sent = held.take().is_none_or(|h| tx.send(h).is_ok());
                        if !sent || tx.send(u).is_err() {
                            break;
                        }
                        wake();
                    }
                }
                std::thread::sleep(interval);
            }
        })?;
    Ok(rx)
}

/// A bounded time series for plots: the newest `cap` points.
#[derive(Debug, Clone, Default)]
pub struct Series {
    cap: usize,
    points: VecDeque<[f64; 2]>,
}

impl Series {
    pub fn new(cap: usize) -> Self {
        Series {
            cap: cap.max(1),
            points: VecDeque::with_capacity(cap.max(1)),
        }
    }
    pub fn push(&mut self, t: f64, v: f64) {
        if self.points.len() == self.cap {
            self.points.pop_front();
        }
        self.points.push_back([t, v]);
    }
    pub fn points(&self) -> impl Iterator<Item = &[f64; 2]> {
        self.points.iter()
    }
    pub fn len(&self) -> usize {
        self.points.len()
    }
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
    pub fn last(&self) -> Option<f64> {
        self.points.back().map(|p| p[1])
    }
}
