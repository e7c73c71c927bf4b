//! Benchmark: our latency probe against `cyclictest` (rt-tests) on the same CPU,
//! the same interval and duration, alternating which runs first, three rounds;
//! reports p50, p99 and max of each and the ratio of the medians over rounds.
//! cyclictest runs with `--laptop` so that, like our probe, it measures the
//! host as configured: by default it holds /dev/cpu_dma_latency at 0, which
//! keeps the CPU out of deep idle states; one more cyclictest run at its
//! default shows what those idle states cost.
//! `cargo bench --bench latency_vs_cyclictest` (BENCH_SECONDS, default 5).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a bench may

use std::process::Command;
use std::time::Duration;
use vfio_assistant::monitor::latency::probe;

/// (p50, p99, max) in µs.
type Summary = (u64, u64, u64);

/// p50, p99 and max (µs) from `cyclictest -h` histogram output.
fn cyclictest(cpu: u32, interval_us: u64, seconds: u64, laptop: bool) -> Option<Summary> {
    let mut args = vec![
        "-q".to_string(),
        "-m".into(),
        "-p".into(),
        "80".into(),
        "-i".into(),
        interval_us.to_string(),
        "-a".into(),
        cpu.to_string(),
        "-t".into(),
        "1".into(),
        "-D".into(),
        format!("{seconds}s"),
        "-h".into(),
        "20000".into(),
        "--histfile=/dev/stdout".into(),
    ];
    if laptop {
        args.push("--laptop".into());
    }
    let out = Command::new("cyclictest").args(&args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut buckets: Vec<(u64, u64)> = Vec::new();
    let mut max = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# Max Latencies:") {
            max = rest.split_whitespace().next()?.parse().ok()?;
        } else if !line.starts_with('#') {
            let mut f = line.split_whitespace();
            if let (Some(us), Some(n)) = (
                f.next().and_then(|x| x.parse().ok()),
                f.next().and_then(|x| x.parse().ok()),
            ) {
                buckets.push((us, n));
            }
        }
    }
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    let quantile = |q: u64| {
        let mut seen = 0;
        for (us, n) in &buckets {
            seen += n;
            if seen * 100 >= total * q {
                return *us;
            }
        }
        0
    };
    (out.status.success() && total > 0).then(|| (quantile(50), quantile(99), max))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn main() {
    let seconds: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let interval_us = 1000;
    if Command::new("cyclictest").arg("--help").output().is_err() {
        println!("cyclictest not installed (Debian: rt-tests); nothing to compare");
        return;
    }
    println!(
        "CPU 1, {interval_us} µs interval, {seconds} s each, SCHED_FIFO 80 where permitted (µs: p50 / p99 / max)\n"
    );
    let run_ours = || {
        let r = probe(
            &[1],
            Duration::from_micros(interval_us),
            Duration::from_secs(seconds),
            80,
        )
        .unwrap();
        (
            (
                r[0].summary.p50_us,
                r[0].summary.p99_us,
                r[0].summary.max_us,
            ),
            r[0].realtime,
        )
    };
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..3 {
        let (o, t) = if round % 2 == 0 {
            let o = run_ours();
            (o, cyclictest(1, interval_us, seconds, true))
        } else {
            let t = cyclictest(1, interval_us, seconds, true);
            (run_ours(), t)
        };
        let Some(t) = t else {
            println!("round {}: cyclictest failed to run", round + 1);
            continue;
        };
        println!(
            "round {}: ours {:>4} / {:>4} / {:>5} (realtime {}) | cyclictest --laptop {:>4} / {:>4} / {:>5}",
            round + 1,
            o.0.0,
            o.0.1,
            o.0.2,
            o.1,
            t.0,
            t.1,
            t.2
        );
        ours.push(o.0);
        theirs.push(t);
    }
    if !ours.is_empty() {
        let m = |v: &[Summary], f: fn(&Summary) -> u64| median(v.iter().map(f).collect());
        let ratio = |f: fn(&Summary) -> u64| m(&ours, f) as f64 / m(&theirs, f).max(1) as f64;
        println!(
            "median over rounds: ours {} / {} / {} | cyclictest {} / {} / {} | ratio p50 {:.2}, p99 {:.2}, max {:.2}",
            m(&ours, |s| s.0),
            m(&ours, |s| s.1),
            m(&ours, |s| s.2),
            m(&theirs, |s| s.0),
            m(&theirs, |s| s.1),
            m(&theirs, |s| s.2),
            ratio(|s| s.0),
            ratio(|s| s.1),
            ratio(|s| s.2)
        );
    }
    if let Some(d) = cyclictest(1, interval_us, seconds, false) {
        println!(
            "cyclictest at its default (holds /dev/cpu_dma_latency at 0, no deep idle): {} / {} / {}",
            d.0, d.1, d.2
        );
    }
}
