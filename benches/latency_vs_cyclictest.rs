//! Benchmark: our latency probe against `cyclictest` (rt-tests) on the same CPU,
//! the same interval and duration, one after the other, and the same again in
//! the other order; reports both p99 and max and their ratio.
//! `cargo bench --bench latency_vs_cyclictest` (BENCH_SECONDS, default 5).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a bench may

use std::process::Command;
use std::time::Duration;
use vfio_assistant::monitor::latency::probe;

/// p99 and max (µs) from `cyclictest -h` histogram output.
fn cyclictest(cpu: u32, interval_us: u64, seconds: u64) -> Option<(u64, u64, bool)> {
    let out = Command::new("cyclictest")
        .args([
            "-q",
            "-m",
            "-p",
            "80",
            "-i",
            &interval_us.to_string(),
            "-a",
            &cpu.to_string(),
            "-t",
            "1",
            "-D",
            &format!("{seconds}s"),
            "-h",
            "20000",
            "--histfile=/dev/stdout",
        ])
        .output()
        .ok()?;
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
    let mut seen = 0;
    let mut p99 = 0;
    for (us, n) in &buckets {
        seen += n;
        if seen * 100 >= total * 99 {
            p99 = *us;
            break;
        }
    }
    Some((p99, max, out.status.success()))
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
    println!("CPU 1, {interval_us} µs interval, {seconds} s each, SCHED_FIFO 80 where permitted\n");
    for round in 0..2 {
        let run_ours = || {
            let r = probe(
                &[1],
                Duration::from_micros(interval_us),
                Duration::from_secs(seconds),
                80,
            )
            .unwrap();
            (r[0].p99_us, r[0].max_us, r[0].realtime)
        };
        let (ours, theirs) = if round == 0 {
            let o = run_ours();
            (o, cyclictest(1, interval_us, seconds))
        } else {
            let t = cyclictest(1, interval_us, seconds);
            (run_ours(), t)
        };
        match theirs {
            Some((tp99, tmax, _)) => println!(
                "round {}: ours p99 {:>5} µs max {:>6} µs (realtime {}) | cyclictest p99 {:>5} µs max {:>6} µs | p99 ratio {:.2}",
                round + 1,
                ours.0,
                ours.1,
                ours.2,
                tp99,
                tmax,
                ours.0 as f64 / tp99.max(1) as f64
            ),
            None => println!("round {}: cyclictest failed to run", round + 1),
        }
    }
}
