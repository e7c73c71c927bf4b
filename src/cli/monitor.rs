//! `vfio-assistant monitor [--connect URI] [--domain NAME] [--interval-ms N]
//! [--duration-s N] [--json]`: interrupts per CPU and per source, CPU time,
//! and for a running VM where each vCPU ran against its pinning and KVM's exit
//! rates. One block per sample on a terminal; `--json` prints one JSON object
//! per sample (an `Update`, see crates/core/src/monitor/sampler.rs) per line.

use super::domain_virt::ConnectArgs;
use super::out::{errln, outln};
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
    /// Milliseconds between samples (50 to 60000).
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i64).range(50..=60_000))]
    pub interval_ms: i64,
    /// Stop after this many seconds, fractions allowed, more than 0 and at
    /// most 30 days (default: run until interrupted).
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = parse_duration_s)]
    pub duration_s: Option<Duration>,
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
        connect: Some(crate::libvirt::connect),
        domain: args.domain.clone(),
        interval: Duration::from_millis(args.interval_ms.unsigned_abs()),
        only_changes: false,
    };
    if demo || !root.is_live() {
        errln!(
            "vfio-assistant: a captured host: its counters were written once and never move, so the rates stay at zero (the monitor is for the live machine)"
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let rx = spawn(config, stop.clone(), || {})?;
    let started = Instant::now();
    let shown = (|| -> anyhow::Result<()> {
        while let Ok(u) = rx.recv() {
            if args.json {
                outln!("{}", serde_json::to_string(&u)?)?;
            } else {
                outln!("{}", render(&u))?;
            }
            if args.duration_s.is_some_and(|l| started.elapsed() >= l) {
                break;
            }
        }
        Ok(())
    })();
    // Stopped whichever way the loop ended (a closed pipe included).
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    shown.map(|()| 0)
}

/// The longest `--duration-s` (30 days): far beyond any session, and far
/// below what `Duration` can hold.
pub const MAX_DURATION_S: f64 = 30.0 * 24.0 * 3600.0;

/// `--duration-s`: a number of seconds above 0 and at most `MAX_DURATION_S`
/// (no NaN, no infinity, no negative time).
pub fn parse_duration_s(text: &str) -> Result<Duration, String> {
    let s: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !s.is_finite() || s <= 0.0 || s > MAX_DURATION_S {
        return Err(format!(
            "give more than 0 and at most {MAX_DURATION_S:.0} seconds (30 days)"
        ));
    }
    Ok(Duration::from_secs_f64(s))
}
