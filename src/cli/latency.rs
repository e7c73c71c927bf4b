//! `vfio-assistant latency --cpus LIST [--interval-us N] [--duration-s N] [--json]`:
//! timer wake-up latency per CPU, like cyclictest, with a histogram and (in
//! JSON, and as "stalls" in text) the worst wake-up per 100 ms over time.

use crate::monitor::latency::probe;
use crate::parse::cpulist::parse_cpulist;
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
    /// Print the statistics as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &LatencyArgs) -> anyhow::Result<i32> {
    let cpus: Vec<u32> = parse_cpulist(&args.cpus)
        .with_context(|| format!("--cpus {:?}", args.cpus))?
        .into_iter()
        .collect();
    let results = probe(
        &cpus,
        Duration::from_micros(args.interval_us),
        Duration::from_secs(args.duration_s),
        args.priority,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(0);
    }
    println!(
        "Timer latency, {} µs interval, {} s ({}):",
        args.interval_us,
        args.duration_s,
        if results.iter().all(|r| r.realtime) {
            "SCHED_FIFO"
        } else {
            "not real-time: run as root for SCHED_FIFO"
        }
    );
    println!("  CPU  samples   min   avg   p50   p99    max (µs)");
    for r in &results {
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
    for r in &results {
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
    println!(
        "\nWhat it means: a vCPU pinned there waits this long for the host to run it. Under ~50 µs p99 is good for games; spikes in the hundreds of µs are audio crackle and stutter (look at `vfio-assistant doctor stutter`)."
    );
    Ok(0)
}
