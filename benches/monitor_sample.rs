//! Benchmark: one monitor sample, as ratios (the machine is shared and noisy).
//!
//! `cargo bench --bench monitor_sample` prints:
//! * a 256-CPU host with 1500 interrupt lines (built from real /proc/interrupts
//!   rows — an Intel N100's and a 128-CPU server's vfio-msix rows — widened to
//!   256 columns) and a matching /proc/stat, twice: every count a different
//!   7-digit number (the worst case), and each row's real counts repeated
//!   across the CPUs (the real mix of zeros and busy CPUs). The cost of merely
//!   reading the bytes, of the first sample, of a sample + rates when nothing,
//!   a count in 5 % or in every line or every count changed; the limit is 3x the read and under 1 ms;
//! * the live host: one sample + rates next to util-linux `lsirq` printing the
//!   same per-IRQ table;
//! * the monitor thread at 4 Hz: its CPU use in % of one core.
//!
//! `-- profile`, `-- profile-parse`, `-- profile-changed` or
//! `-- profile-changed-rates` loops one case for five seconds, for
//! `perf record`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a bench may

use std::fmt::Write;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use vfio_assistant::monitor::rates::rates;
use vfio_assistant::monitor::sample::{read_host, read_host_after};
use vfio_assistant::monitor::sampler::{MonitorConfig, spawn};
use vfio_assistant::parse::interrupts::{parse_interrupts, parse_interrupts_reusing};
use vfio_assistant::sysroot::{HostPath, HostRoot};

fn median(mut f: impl FnMut(), runs: usize) -> Duration {
    f();
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[t.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// (label, description, counts) of the real rows.
fn real_rows() -> Vec<(String, String, Vec<u64>)> {
    let mut rows = Vec::new();
    for f in [
        "intel-n100-minipc-proc-interrupts.txt",
        "x86-128cpu-server-vfio-msix-interrupts-excerpt.txt",
    ] {
        let p = format!("{}/tests/fixtures/listings/{f}", env!("CARGO_MANIFEST_DIR"));
        let text: String = std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        for r in parse_interrupts(&text).rows {
            rows.push((r.label.clone(), r.description.clone(), r.per_cpu.clone()));
        }
    }
    rows
}

/// How the counts of the widened host are made up.
#[derive(Clone, Copy)]
enum Counts {
    /// Every count a different 7-digit number: the worst case for parsing.
    Dense,
    /// Each row's real counts repeated across the columns (CPU c gets the real
    /// row's count for CPU c mod its CPU count): the real mix of zeros and
    /// busy CPUs.
    RealMix,
}

/// A /proc/interrupts with `cpus` columns and `lines` rows, and a /proc/stat.
fn big_host(cpus: usize, lines: usize, mix: Counts) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let rows = real_rows();
    let mut t = String::from("     ");
    for c in 0..cpus {
        let _ = write!(t, "  CPU{c:<6}");
    }
    t.push('\n');
    for i in 0..lines {
        let (label, desc, _) = &rows[i % rows.len()];
        let label = if label.parse::<u32>().is_ok() || i >= rows.len() {
            (i + 16).to_string()
        } else {
            label.clone()
        };
        let _ = write!(t, "{label:>4}:");
        let real = &rows[i % rows.len()].2;
        for c in 0..cpus {
            let v = match mix {
                Counts::Dense => ((i * 7919 + c * 104_729) % 9_999_991) as u64,
                Counts::RealMix if real.is_empty() => 0,
                Counts::RealMix => real[c % real.len()],
            };
            let _ = write!(t, " {v:>10}");
        }
        let _ = writeln!(t, "  {desc}");
    }
    let mut stat = String::from("cpu  1 2 3 4 5 6 7 8 0 0\n");
    for c in 0..cpus {
        let _ = writeln!(
            stat,
            "cpu{c} {} 0 {} {} 10 0 {} 0 0 0",
            1000 + c,
            500 + c,
            90000 + c,
            c
        );
    }
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    std::fs::create_dir_all(dir.path().join("sys")).unwrap();
    std::fs::write(dir.path().join("proc/interrupts"), t).unwrap();
    std::fs::write(dir.path().join("proc/stat"), stat).unwrap();
    dir
}

fn cpu_seconds() -> f64 {
    let mut u = libc_rusage();
    // SAFETY: getrusage fills the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn libc_rusage() -> libc::rusage {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// The 256-CPU report for one way of making up the counts; with `profile`
/// set (`-- profile` / `-- profile-parse`) it loops one case instead.
/// `line` with the counts `which(k)` picks (k = the CPU column) one higher,
/// printed the kernel's way (`" %10u"`).
fn bump_counts(line: &str, which: impl Fn(usize) -> bool) -> String {
    let Some(colon) = line.find(':') else {
        return line.to_string();
    };
    let mut out = line[..=colon].to_string();
    let mut rest = &line[colon + 1..];
    let mut k = 0;
    while rest.len() >= 11 {
        let Ok(v) = rest[..11].trim().parse::<u64>() else {
            break;
        };
        if which(k) {
            write!(out, " {:>10}", v + 1).unwrap();
        } else {
            out.push_str(&rest[..11]);
        }
        rest = &rest[11..];
        k += 1;
    }
    out.push_str(rest);
    out
}

fn big_report(mix: Counts, name: &str) {
    let dir = big_host(256, 1500, mix);
    let root = HostRoot::at(dir.path());
    let bytes = std::fs::metadata(dir.path().join("proc/interrupts"))
        .unwrap()
        .len();
    // The baseline: the bytes read into one buffer of the right size (what
    // the sampler does from its second sample on), as text.
    let read_only = median(
        || {
            let a = root
                .read_text_sized(&HostPath::proc("interrupts"), bytes as usize)
                .unwrap();
            let b = root.read_text(&HostPath::proc("stat")).unwrap();
            std::hint::black_box((a, b));
        },
        50,
    );
    let text = root.read_text(&HostPath::proc("interrupts")).unwrap();
    if std::env::args().any(|a| a == "profile-parse") {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            drop(std::hint::black_box(parse_interrupts(&text)));
        }
        return;
    }
    let parse_only = median(|| drop(std::hint::black_box(parse_interrupts(&text))), 50);
    let sample = median(|| drop(std::hint::black_box(read_host(&root))), 50);
    // Between two samples of a real host most lines do not change, and a line
    // that changes does so because a CPU or two took the interrupt: 5 % of the
    // lines (every 20th) or every line with one count up, and the worst case,
    // every count of every line up.
    let changed = |every: usize, all_counts: bool| -> String {
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                if i > 0 && i % every == 0 {
                    bump_counts(l, |k| all_counts || k == i % 256)
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let prev_i = parse_interrupts(&text);
    let prev_s = vfio_assistant::monitor::sample::Sample {
        t_ns: 0,
        interrupts: Some(prev_i.clone()),
        ..Default::default()
    };
    let mut report = Vec::new();
    for (label, every, all_counts) in [
        ("5 % of lines, a count each", 20, false),
        ("every line, a count each", 1, false),
        ("every count changed", 1, true),
    ] {
        let next = changed(every, all_counts);
        // `-- profile-changed`: "every line, a count each" only, for `perf`.
        // `-- profile-changed-rates`: the same with the rates, as measured.
        if every == 1 && !all_counts && std::env::args().any(|a| a == "profile-changed") {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                std::hint::black_box(parse_interrupts_reusing(&next, Some((&text, &prev_i))));
            }
            return;
        }
        if every == 1 && !all_counts && std::env::args().any(|a| a == "profile-changed-rates") {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                let i = parse_interrupts_reusing(&next, Some((&text, &prev_i)));
                let cur = vfio_assistant::monitor::sample::Sample {
                    t_ns: 1_000_000_000,
                    interrupts: Some(i),
                    ..Default::default()
                };
                std::hint::black_box(rates(&prev_s, &cur, None));
            }
            return;
        }
        let t = median(
            || {
                let i = parse_interrupts_reusing(&next, Some((&text, &prev_i)));
                let cur = vfio_assistant::monitor::sample::Sample {
                    t_ns: 1_000_000_000,
                    interrupts: Some(i),
                    ..Default::default()
                };
                std::hint::black_box(rates(&prev_s, &cur, None));
            },
            30,
        );
        let parse = median(
            || {
                std::hint::black_box(parse_interrupts_reusing(&next, Some((&text, &prev_i))));
            },
            30,
        );
        report.push((label, t, parse));
    }
    let prev = read_host(&root);
    // `cargo bench --bench monitor_sample -- profile`: only this case, for a
    // profiler (`perf record`), for 5 seconds.
    if std::env::args().any(|a| a == "profile") {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            let cur = read_host_after(&root, Some(&prev));
            std::hint::black_box(rates(&prev, &cur, None));
        }
        return;
    }
    let sample_rates = median(
        || {
            let cur = read_host_after(&root, Some(&prev));
            std::hint::black_box(rates(&prev, &cur, None));
        },
        50,
    );
    println!(
        "256 CPUs, 1500 interrupt lines, {name} ({} KiB of /proc/interrupts):",
        bytes / 1024
    );
    println!("  read the bytes only        {:>8.0} µs", us(read_only));
    println!("  parse /proc/interrupts     {:>8.0} µs", us(parse_only));
    println!(
        "  first sample (read + parse, cpufreq files) {:>8.0} µs  = {:.2}x the read",
        us(sample),
        us(sample) / us(read_only)
    );
    println!(
        "  sample + rates, nothing changed {:>8.0} µs  = {:.2}x the read (limit 3x; target < 1000 µs)",
        us(sample_rates),
        us(sample_rates) / us(read_only)
    );
    for (label, t, parse) in &report {
        println!(
            "  parse + rates, {label:<26} {:>8.0} µs  = {:.2}x the read (+ the read itself; parse {:.0} µs)",
            us(*t),
            us(*t) / us(read_only),
            us(*parse)
        );
    }
}

fn main() {
    big_report(Counts::Dense, "dense 7-digit counts (worst case)");
    if std::env::args().any(|a| a.starts_with("profile")) {
        return;
    }
    big_report(Counts::RealMix, "real rows' counts repeated across CPUs");

    let live = HostRoot::live();
    let prev = read_host(&live);
    let ours = median(
        || {
            let cur = read_host_after(&live, Some(&prev));
            std::hint::black_box(rates(&prev, &cur, None));
        },
        50,
    );
    let live_read = median(
        || {
            drop(std::hint::black_box(
                live.read_text(&HostPath::proc("interrupts")),
            ))
        },
        50,
    );
    println!(
        "live host: reading /proc/interrupts {:.0} µs; sample + rates {:.0} µs = {:.2}x the read",
        us(live_read),
        us(ours),
        us(ours) / us(live_read)
    );
    let lsirq = Command::new("lsirq").output();
    match lsirq {
        Ok(o) if o.status.success() => {
            let theirs = median(|| drop(Command::new("lsirq").output().unwrap()), 20);
            println!(
                "live host: sample + rates {:.0} µs vs lsirq {:.0} µs: ratio {:.2}",
                us(ours),
                us(theirs),
                us(ours) / us(theirs)
            );
        }
        _ => println!(
            "live host: sample + rates {:.0} µs (lsirq not available: util-linux)",
            us(ours)
        ),
    }

    let stop = Arc::new(AtomicBool::new(false));
    let before = cpu_seconds();
    let t0 = Instant::now();
    let rx = spawn(
        MonitorConfig {
            root: HostRoot::live(),
            uri: None,
            connect: None,
            domain: None,
            interval: Duration::from_millis(250),
            only_changes: false,
        },
        stop.clone(),
        || {},
    )
    .unwrap();
    let mut n = 0;
    while t0.elapsed() < Duration::from_secs(5) {
        if rx.recv_timeout(Duration::from_secs(1)).is_ok() {
            n += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let used = cpu_seconds() - before;
    println!(
        "monitor at 4 Hz on the live host: {n} samples in 5 s, {:.2}% of one core (target < 1%)",
        used / t0.elapsed().as_secs_f64() * 100.0
    );
}
