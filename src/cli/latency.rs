//! `vfio-assistant latency --cpus LIST [--interval-us N] [--duration-s N]
//! [--compare-idle] [--json]`: timer wake-up latency per CPU, like
//! cyclictest, with a histogram, a verdict (good / fair / poor, thresholds in
//! monitor/latency/verdict.rs) and (in JSON, and as "stalls" in text) the
//! worst wake-up per window over time; with `--compare-idle`, measured again
//! with every CPU kept to shallow idle states (C1/C1E). The CPUs must be
//! online here; every number is checked when the arguments are read.

use super::out::{StdoutError, outln};
use crate::host::cpuidle::SHALLOW_IDLE_US;
use crate::monitor::idle_hold::{IdleHold, probe_compared};
use crate::monitor::latency::{LatencyStats, check_cpus, compared, online_cpus, thresholds};
use crate::parse::cpulist::parse_cpulist;
use crate::sysroot::HostRoot;
use clap::Args;
use std::collections::BTreeSet;
use std::time::Duration;

/// The longest probe: a day (the memory it takes does not grow with it).
pub const MAX_DURATION_S: i64 = 86_400;

#[derive(Debug, Args)]
pub struct LatencyArgs {
    /// CPUs to measure (e.g. the ones about to be pinned to the VM: 2-7);
    /// each must be online on this host.
    #[arg(long, value_name = "CPUS", value_parser = parse_cpus)]
    pub cpus: BTreeSet<u32>,
    // Parsed signed with a range, so that -1 is "not in 1..=86400", not a
    // stray option or "invalid digit".
    /// Wake-up interval in microseconds (50 to 1000000).
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i64).range(50..=1_000_000))]
    pub interval_us: i64,
    /// How long to measure, in whole seconds (1 to 86400).
    #[arg(long, default_value_t = 10, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i64).range(1..=MAX_DURATION_S))]
    pub duration_s: i64,
    /// SCHED_FIFO priority of the probe threads (1 to 99, when permitted).
    #[arg(long, default_value_t = 80, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(1..=99))]
    pub priority: i32,
    /// Measure twice: as the host is configured, then with every CPU kept to
    /// shallow idle states (C1/C1E; root; a PM QoS request withdrawn when the
    /// probe ends, nothing stays changed), to show what deep ones cost here.
    /// With --json the output is then {"as_configured": [...],
    /// "shallow_idle_only": [...]}.
    #[arg(long)]
    pub compare_idle: bool,
    /// Print the statistics as JSON (see docs/latency-json.md).
    #[arg(long)]
    pub json: bool,
}

/// `--cpus`: a CPU list with at least one CPU.
fn parse_cpus(text: &str) -> Result<BTreeSet<u32>, String> {
    let cpus = parse_cpulist(text).map_err(|e| e.to_string())?;
    if cpus.is_empty() {
        return Err("names no CPU (e.g. 2-7)".into());
    }
    Ok(cpus)
}

pub fn run(args: &LatencyArgs) -> anyhow::Result<i32> {
    let cpus: Vec<u32> = args.cpus.iter().copied().collect();
    // CPUs that are not there are refused before anything starts.
    check_cpus(&cpus, &online_cpus(&HostRoot::live())?).map_err(|e| {
        anyhow::anyhow!(
            "--cpus {}: {e}",
            crate::parse::cpulist::format_cpulist(&cpus)
        )
    })?;
    // The device is opened first: a missing permission shows before anything
    // is measured.
    let hold = if args.compare_idle {
        Some(IdleHold::open(&HostRoot::live())?)
    } else {
        None
    };
    let (results, held) = probe_compared(
        &cpus,
        Duration::from_micros(args.interval_us.unsigned_abs()),
        Duration::from_secs(args.duration_s.unsigned_abs()),
        args.priority,
        hold,
    )?;
    let held = held.transpose().map_err(anyhow::Error::msg)?;
    if args.json {
        match &held {
            None => outln!("{}", serde_json::to_string_pretty(&results)?)?,
            Some(h) => outln!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "as_configured": results,
                    "shallow_idle_only": h,
                }))?
            )?,
        }
        return Ok(0);
    }
    table(args, "", &results)?;
    if let Some(h) = &held {
        table(
            args,
            &format!(", every CPU kept to idle states that wake within {SHALLOW_IDLE_US} µs"),
            h,
        )?;
        outln!("\nWhat deep idle states cost here:")?;
        for (a, b) in results.iter().zip(h) {
            outln!("  CPU {}: {}", a.cpu, compared(a, b))?;
        }
        outln!(
            "A large drop means the CPUs' idle states add to the guest's latency: see cpu.idle_states in `vfio-assistant check` for how to limit them while the VM runs."
        )?;
    }
    outln!(
        "\nWhat it means: a vCPU pinned there waits this long for the host to run it. For games, {}. Spikes in the hundreds of µs are audio crackle and stutter (look at `vfio-assistant doctor stutter`).",
        thresholds()
    )?;
    Ok(0)
}

/// One measurement as a table, with the stalls over 4x each CPU's p99.
fn table(args: &LatencyArgs, how: &str, results: &[LatencyStats]) -> Result<(), StdoutError> {
    outln!(
        "Timer latency, {} µs interval, {} s ({}){how}:",
        args.interval_us,
        args.duration_s,
        if results.iter().all(|r| r.realtime) {
            "SCHED_FIFO"
        } else {
            "not real-time: run as root for SCHED_FIFO"
        }
    )?;
    outln!("  CPU  samples   min   avg   p50   p99    max (µs)  verdict")?;
    for r in results {
        outln!(
            "  {:>3} {:>8} {:>5} {:>5} {:>5} {:>5} {:>6}       {}{}",
            r.cpu,
            r.summary.samples,
            r.summary.min_us,
            r.summary.avg_us,
            r.summary.p50_us,
            r.summary.p99_us,
            r.summary.max_us,
            r.verdict.word(),
            if r.pinned { "" } else { "  (could not pin)" }
        )?;
    }
    // When the worst wake-ups came: a few isolated stalls point at a periodic
    // host job; stalls everywhere at load.
    for r in results {
        let limit = r.summary.p99_us.max(1).saturating_mul(4);
        let at: Vec<String> = r
            .summary
            .timeline_us
            .iter()
            .filter(|(_, us)| *us > limit)
            .take(8)
            .map(|(t, us)| format!("{t:.1} s ({us} µs)"))
            .collect();
        if !at.is_empty() {
            outln!(
                "  CPU {}: stalls over 4x its p99 at {}",
                r.cpu,
                at.join(", ")
            )?;
        }
    }
    Ok(())
}
