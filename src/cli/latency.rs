//! `vfio-assistant latency --cpus LIST [--interval-us N] [--duration-s N]
//! [--compare-idle] [--json]`: timer wake-up latency per CPU, like
//! cyclictest, with a histogram and (in JSON, and as "stalls" in text) the
//! worst wake-up per 100 ms over time; with `--compare-idle`, measured again
//! with every CPU kept to shallow idle states (C1/C1E).

use crate::host::cpuidle::SHALLOW_IDLE_US;
use crate::monitor::idle_hold::{IdleHold, probe_compared};
use crate::monitor::latency::{LatencyStats, compared};
use crate::parse::cpulist::parse_cpulist;
use crate::sysroot::HostRoot;
use anyhow::Context;
use clap::Args;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct LatencyArgs {
    /// CPUs to measure (e.g. the ones about to be pinned to the VM: 2-7).
    #[arg(long, value_name = "CPUS")]
    pub cpus: String,
    /// Wake-up interval in microseconds.
    #[arg(long, default_value_t = 1000)]
    pub interval_us: u64,
    /// How long to measure, in seconds.
    #[arg(long, default_value_t = 10)]
    pub duration_s: u64,
    /// SCHED_FIFO priority of the probe threads (when permitted).
    #[arg(long, default_value_t = 80)]
    pub priority: i32,
    /// Measure twice: as the host is configured, then with every CPU kept to
    /// shallow idle states (C1/C1E; root; a PM QoS request withdrawn when the
    /// probe ends, nothing stays changed), to show what deep ones cost here.
    /// With --json the output is then {"as_configured": [...],
    /// "shallow_idle_only": [...]}.
    #[arg(long)]
    pub compare_idle: bool,
    /// Print the statistics as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &LatencyArgs) -> anyhow::Result<i32> {
    let cpus: Vec<u32> = parse_cpulist(&args.cpus)
        .with_context(|| format!("--cpus {:?}", args.cpus))?
        .into_iter()
        .collect();
    // The device is opened first: a missing permission shows before anything
    // is measured.
    let hold = if args.compare_idle {
        Some(IdleHold::open(&HostRoot::live()).map_err(anyhow::Error::msg)?)
    } else {
        None
    };
    let (results, held) = probe_compared(
        &cpus,
        Duration::from_micros(args.interval_us),
        Duration::from_secs(args.duration_s),
        args.priority,
        hold,
    )?;
    let held = held.transpose().map_err(anyhow::Error::msg)?;
    if args.json {
        match &held {
            None => println!("{}", serde_json::to_string_pretty(&results)?),
            Some(h) => println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "as_configured": results,
                    "shallow_idle_only": h,
                }))?
            ),
        }
        return Ok(0);
    }
    table(args, "", &results);
    if let Some(h) = &held {
        table(
            args,
            &format!(", every CPU kept to idle states that wake within {SHALLOW_IDLE_US} µs"),
            h,
        );
        println!("\nWhat deep idle states cost here:");
        for (a, b) in results.iter().zip(h) {
            println!("  CPU {}: {}", a.cpu, compared(a, b));
        }
        println!(
            "A large drop means the CPUs' idle states add to the guest's latency: see cpu.idle_states in `vfio-assistant check` for how to limit them while the VM runs."
        );
    }
    println!(
        "\nWhat it means: a vCPU pinned there waits this long for the host to run it. Under ~50 µs p99 is good for games; spikes in the hundreds of µs are audio crackle and stutter (look at `vfio-assistant doctor stutter`)."
    );
    Ok(0)
}

/// One measurement as a table, with the stalls over 4x each CPU's p99.
fn table(args: &LatencyArgs, how: &str, results: &[LatencyStats]) {
    println!(
        "Timer latency, {} µs interval, {} s ({}){how}:",
        args.interval_us,
        args.duration_s,
        if results.iter().all(|r| r.realtime) {
            "SCHED_FIFO"
        } else {
            "not real-time: run as root for SCHED_FIFO"
        }
    );
    println!("  CPU  samples   min   avg   p50   p99    max (µs)");
    for r in results {
        println!(
            "  {:>3} {:>8} {:>5} {:>5} {:>5} {:>5} {:>6}{}",
            r.cpu,
            r.samples,
            r.min_us,
            r.avg_us,
            r.p50_us,
            r.p99_us,
            r.max_us,
            if r.pinned { "" } else { "  (could not pin)" }
        );
    }
    // When the worst wake-ups came: a few isolated stalls point at a periodic
    // host job; stalls everywhere at load.
    for r in results {
        let limit = r.p99_us.max(1).saturating_mul(4);
        let at: Vec<String> = r
            .timeline_us
            .iter()
            .filter(|(_, us)| *us > limit)
            .take(8)
            .map(|(t, us)| format!("{t:.1} s ({us} µs)"))
            .collect();
        if !at.is_empty() {
            println!(
                "  CPU {}: stalls over 4x its p99 at {}",
                r.cpu,
                at.join(", ")
            );
        }
    }
}
