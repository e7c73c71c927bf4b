//! `vfio-assistant monitor [--connect URI] [--domain NAME] [--interval-ms N]
//! [--duration-s N] [--json]`: interrupts per CPU and per source, CPU time,
//! and for a running VM where each vCPU ran against its pinning and KVM's exit
//! rates. One block per sample on a terminal; `--json` prints one JSON object
//! per sample (an `Update`, see src/monitor/sampler.rs) per line.

use super::domain_virt::ConnectArgs;
use crate::monitor::rates::Rates;
use crate::monitor::sampler::{MonitorConfig, Update, spawn};
use crate::sysroot::HostRoot;
use clap::Args;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Follow this running libvirt domain: its vCPU threads and KVM counters.
    #[arg(long, value_name = "NAME")]
    pub domain: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub interval_ms: u64,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// One JSON object per sample.
    #[arg(long)]
    pub json: bool,
}

fn per_cpu(list: &[(u32, f64)], fmt: impl Fn(f64) -> String) -> String {
    list.iter()
        .map(|(c, v)| format!("{c}:{}", fmt(*v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The terminal block for one update.
pub fn render(u: &Update) -> String {
    let r: &Rates = &u.rates;
    let mut o = String::new();
    let _ = writeln!(o, "t={:.1}s (over {:.2}s)", u.t_s, r.dt_s);
    let _ = writeln!(
        o,
        "  interrupts/s per CPU  {}",
        per_cpu(&r.irq_per_cpu, |v| format!("{v:.0}"))
    );
    let busy: Vec<(u32, f64)> = r.cpu_use.iter().map(|c| (c.cpu, c.busy * 100.0)).collect();
    let _ = writeln!(
        o,
        "  busy % per CPU        {}",
        per_cpu(&busy, |v| format!("{v:.0}"))
    );
    if !r.freq_mhz.is_empty() {
        let _ = writeln!(
            o,
            "  MHz per CPU           {}",
            per_cpu(&r.freq_mhz, |v| format!("{v:.0}"))
        );
    }
    if !r.governors.is_empty() {
        let _ = writeln!(o, "  governor              {}", r.governors_text());
    }
    for s in r.sources.iter().take(5) {
        let vfio = s
            .vfio
            .map(|m| format!(" [passed-through device, {m:?}]"))
            .unwrap_or_default();
        let vm = s
            .misplaced()
            .map(|m| format!(" — lands on {m}"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  {:>6}/s  {:<6} {}{vfio}{vm}",
            format!("{:.0}", s.per_s),
            s.label,
            s.description
        );
    }
    if let Some(vm) = &u.vm {
        let _ = writeln!(o, "  VM {} (pid {}):", vm.name, vm.pid);
    }
    for v in &r.vcpus {
        let pin = match v.on_pin {
            Some(true) => format!("pinned {:?}: ok", v.pinned),
            Some(false) => format!("pinned {:?}: NOT on its pin", v.pinned),
            None => "not pinned".into(),
        };
        let _ = writeln!(
            o,
            "    vCPU {} on CPU {} ({pin}), ran {:.0}%, waited {:.1} ms/s, {:.0} switches/s ({:.0} forced)",
            v.vcpu,
            v.cpu,
            v.running * 100.0,
            v.wait_ms_per_s,
            v.switches_per_s,
            v.involuntary_per_s
        );
    }
    if let (Some(src), false) = (r.kvm_source, r.kvm.is_empty()) {
        let _ = writeln!(o, "    KVM counters from {}", src.label());
    }
    for k in r.kvm.iter().take(6) {
        let _ = writeln!(
            o,
            "    KVM {:<16} {:>8.0}/s  {}",
            k.name, k.per_s, k.meaning
        );
    }
    if let Some(p) = &u.vm_problem {
        let _ = writeln!(o, "  VM not followed: {p}");
    }
    for p in &r.problems {
        let _ = writeln!(o, "  note: {p}");
    }
    o
}

pub fn run(root: &HostRoot, args: &MonitorArgs, demo: bool) -> anyhow::Result<i32> {
    let config = MonitorConfig {
        root: root.clone(),
        uri: Some(args.connect.uri(demo).to_string()),
        domain: args.domain.clone(),
        interval: Duration::from_millis(args.interval_ms),
        only_changes: false,
    };
    if demo || !root.is_live() {
        eprintln!(
            "vfio-assistant: a captured host: its counters were written once and never move, so the rates stay at zero (the monitor is for the live machine)"
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let rx = spawn(config, stop.clone(), || {})?;
    let started = Instant::now();
    let limit = args.duration_s.map(Duration::from_secs_f64);
    while let Ok(u) = rx.recv() {
        if args.json {
            println!("{}", serde_json::to_string(&u)?);
        } else {
            println!("{}", render(&u));
        }
        if limit.is_some_and(|l| started.elapsed() >= l) {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(0)
}
