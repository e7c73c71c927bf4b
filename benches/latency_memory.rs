//! Benchmark: the latency probe's memory must not grow with its duration.
//! A `Recorder` (what each probe thread keeps) is fed made-up wake-ups at the
//! shortest interval (50 µs, 20 000 a second) for 10 s, 1 min, 10 min and
//! 1 h of probe time, as fast as it takes them, and the process's resident
//! memory (VmRSS) is read after each; then the same for what the probe kept
//! before (two `Vec<u64>` holding every wake-up), for comparison.
//! `cargo bench --bench latency_memory`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a bench may

use std::time::Instant;
use vfio_assistant::monitor::latency::{Recorder, stats};
use vfio_assistant::sysroot::{HostPath, HostRoot};

const INTERVAL_NS: u64 = 50_000;

/// This process's resident memory, KiB.
fn rss_kib() -> u64 {
    let status = HostRoot::live()
        .read_text(&HostPath::proc("self/status"))
        .unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// A wake-up latency that looks like a desktop's: mostly 2-20 µs, now and
/// then hundreds, rarely a millisecond stall (a cheap xorshift, no crate).
fn latency_ns(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    match *state % 10_000 {
        0 => 1_000_000 + *state % 2_000_000,
        1..=50 => 100_000 + *state % 400_000,
        _ => 2_000 + *state % 18_000,
    }
}

fn main() {
    let durations_s = [10u64, 60, 600, 3600];
    println!("one CPU at a 50 µs interval; VmRSS of the whole process (KiB)\n");
    println!(
        "  probe time   wake-ups     recorder: RSS (growth)   feed time   p99 µs  timeline points"
    );
    let base = rss_kib();
    let mut flat = Vec::new();
    for &secs in &durations_s {
        let n = secs * 1_000_000_000 / INTERVAL_NS;
        let mut rec = Recorder::new().unwrap();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let t0 = Instant::now();
        for i in 0..n {
            let lat = latency_ns(&mut state);
            rec.record(i * INTERVAL_NS + lat, lat);
        }
        let took = t0.elapsed();
        let rss = rss_kib();
        let s = stats(0, &rec, false, false);
        println!(
            "  {:>7} s {:>12} {:>14} ({:>+7}) {:>9.2} s {:>8} {:>16}",
            secs,
            n,
            rss,
            rss as i64 - base as i64,
            took.as_secs_f64(),
            s.summary.p99_us,
            s.summary.timeline_us.len()
        );
        flat.push(rss);
        drop(rec);
    }
    let growth = flat.iter().max().unwrap() - flat.iter().min().unwrap();
    println!("\n  recorder RSS from 10 s to 1 h: {growth} KiB apart");

    println!("\n  before: two Vec<u64> of every wake-up (latency, when it came)");
    for &secs in &durations_s[..3] {
        let n = (secs * 1_000_000_000 / INTERVAL_NS) as usize;
        let before = rss_kib();
        // As the old probe did: reserved and touched up front.
        let mut lat = vec![1u64; n];
        let mut woke = vec![1u64; n];
        let mut state = 1u64;
        for i in 0..n {
            lat[i] = latency_ns(&mut state);
            woke[i] = i as u64 * INTERVAL_NS;
        }
        let rss = rss_kib();
        println!(
            "  {:>7} s {:>12} {:>14} ({:>+7})",
            secs,
            n,
            rss,
            rss as i64 - before as i64
        );
        std::hint::black_box((&lat, &woke));
    }
    println!(
        "  (1 h would be {} MiB per CPU)",
        3600 * 20_000 * 16 / (1024 * 1024)
    );
}
