//! A cyclictest-style timer latency probe: one thread per chosen CPU, pinned
//! there, real-time (SCHED_FIFO) when permitted, sleeping to absolute deadlines
//! with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`; how late each wake-up
//! comes is the latency a vCPU on that CPU would see from the host. Each
//! thread keeps its wake-ups in a `Recorder` (record.rs): the memory is the
//! same for ten seconds and for a day. `Verdict` (verdict.rs) says what the
//! numbers mean.

mod record;
mod verdict;

pub use record::{MAX_TIMELINE_POINTS, Recorder, Summary, TIMELINE_WINDOW_NS, Timeline};
pub use verdict::{GOOD_P99_US, POOR_MAX_US, POOR_P99_US, Verdict, thresholds, verdict};

use crate::parse::cpulist::{format_cpulist, parse_cpulist};
use crate::sysroot::{HostPath, HostRoot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub cpu: u32,
    /// What its recorder measured (samples, min/avg/p50/p99/max, the
    /// histogram and the timeline), flattened: the JSON keeps one level.
    #[serde(flatten)]
    pub summary: Summary,
    /// Whether the thread ran SCHED_FIFO (needs root or CAP_SYS_NICE).
    pub realtime: bool,
    /// Whether it could be pinned to `cpu`.
    pub pinned: bool,
    /// Good, fair or poor for a VM pinned there (see `verdict`).
    pub verdict: Verdict,
}

/// The width of one point of `Summary::timeline_us` at the start.
pub const TIMELINE_WINDOW: Duration = Duration::from_nanos(TIMELINE_WINDOW_NS);

/// The most CPUs one probe measures at once (one real-time thread each).
pub const MAX_PROBE_CPUS: usize = 256;

/// The shortest and longest wake-up interval.
pub const MIN_INTERVAL: Duration = Duration::from_micros(50);
pub const MAX_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProbeError {
    #[error("no CPUs to measure")]
    NoCpus,
    #[error("{asked} CPUs is more than one probe measures at once (at most {MAX_PROBE_CPUS})")]
    TooManyCpus { asked: usize },
    #[error("CPU {missing} {verb} not online on this host (online: {online})", verb = if missing.contains([',', '-']) { "are" } else { "is" })]
    NotOnline { missing: String, online: String },
    #[error("the online CPUs could not be read: {0}")]
    Online(String),
    #[error("the interval must be between 50 µs and 1 s")]
    BadInterval,
    #[error("the probe thread for CPU {0} stopped without a result")]
    Thread(u32),
    #[error("the probe's histogram: {0}")]
    Histogram(String),
}

/// The CPUs this host has online (`devices/system/cpu/online`).
pub fn online_cpus(root: &HostRoot) -> Result<BTreeSet<u32>, ProbeError> {
    let path = HostPath::sys("devices/system/cpu/online");
    let text = root
        .read_text(&path)
        .map_err(|e| ProbeError::Online(e.to_string()))?;
    parse_cpulist(&text).map_err(|e| ProbeError::Online(format!("{path}: {e}")))
}

/// Pure: `cpus` can be measured on a host with `online` CPUs — some, all
/// online, and not more than `MAX_PROBE_CPUS`.
pub fn check_cpus(cpus: &[u32], online: &BTreeSet<u32>) -> Result<(), ProbeError> {
    if cpus.is_empty() {
        return Err(ProbeError::NoCpus);
    }
    let missing: Vec<u32> = cpus
        .iter()
        .copied()
        .filter(|c| !online.contains(c))
        .collect();
    if !missing.is_empty() {
        return Err(ProbeError::NotOnline {
            missing: format_cpulist(&missing),
            online: format_cpulist(online),
        });
    }
    if cpus.len() > MAX_PROBE_CPUS {
        return Err(ProbeError::TooManyCpus { asked: cpus.len() });
    }
    Ok(())
}

/// The same CPU measured as configured (`a`) and with shallow idle states
/// only (`b`), in one line.
pub fn compared(a: &LatencyStats, b: &LatencyStats) -> String {
    format!(
        "p50 {} µs as configured, {} µs shallow idle only; p99 {} / {} µs; max {} / {} µs",
        a.summary.p50_us,
        b.summary.p50_us,
        a.summary.p99_us,
        b.summary.p99_us,
        a.summary.max_us,
        b.summary.max_us
    )
}

/// A recorder's summary as one CPU's statistics, with its verdict.
pub fn stats(cpu: u32, recorder: &Recorder, realtime: bool, pinned: bool) -> LatencyStats {
    let summary = recorder.summary();
    LatencyStats {
        cpu,
        verdict: verdict(summary.p99_us, summary.max_us),
        summary,
        realtime,
        pinned,
    }
}

fn now_ns() -> u64 {
    crate::monitor::sample::monotonic_ns()
}

fn sleep_until_ns(t: u64) {
    let ts = rustix::time::Timespec {
        tv_sec: i64::try_from(t / 1_000_000_000).unwrap_or(i64::MAX),
        tv_nsec: i64::try_from(t % 1_000_000_000).unwrap_or(0),
    };
    // EINTR just ends this sleep early: the lateness is then measured as is.
    let _ = rustix::thread::clock_nanosleep_absolute(rustix::thread::ClockId::Monotonic, &ts);
}

fn pin_to(cpu: u32) -> bool {
    let cpu = cpu as usize;
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return false;
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).is_ok()
}

fn go_realtime(priority: i32) -> bool {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // rustix has no sched_setscheduler: the one call left to libc.
    // SAFETY: plain syscall on the calling thread with a valid parameter.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// Measure every CPU in `cpus` at once for `duration`, waking every
/// `interval`. CPUs this host does not have online are refused (when the
/// online list cannot be read, such a CPU shows as not pinned), and so are
/// more than `MAX_PROBE_CPUS`.
pub fn probe(
    cpus: &[u32],
    interval: Duration,
    duration: Duration,
    priority: i32,
) -> Result<Vec<LatencyStats>, ProbeError> {
    match online_cpus(&HostRoot::live()) {
        Ok(online) => check_cpus(cpus, &online)?,
        Err(_) if cpus.is_empty() => return Err(ProbeError::NoCpus),
        Err(_) if cpus.len() > MAX_PROBE_CPUS => {
            return Err(ProbeError::TooManyCpus { asked: cpus.len() });
        }
        Err(_) => {}
    }
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&interval) {
        return Err(ProbeError::BadInterval);
    }
    let interval_ns = interval.as_nanos() as u64;
    let loops = (duration.as_nanos() / u128::from(interval_ns)).max(1);
    // Made here, before any thread starts: a failure is one error, not a
    // thread's panic.
    let recorders = cpus
        .iter()
        .map(|_| Recorder::new())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ProbeError::Histogram(e.to_string()))?;
    let handles: Vec<(u32, std::thread::JoinHandle<LatencyStats>)> = cpus
        .iter()
        .zip(recorders)
        .map(|(&cpu, mut rec)| {
            let h = std::thread::spawn(move || {
                let pinned = pin_to(cpu);
                let realtime = go_realtime(priority);
                let first = now_ns() + interval_ns;
                let mut next = first;
                for _ in 0..loops {
                    sleep_until_ns(next);
                    let woke = now_ns();
                    // Filed under when it was due: a late wake-up belongs to
                    // the window of the deadline it missed.
                    rec.record(next - first, woke.saturating_sub(next));
                    next += interval_ns;
                    // Fell far behind (e.g. suspended): restart the schedule.
                    if woke > next + 100 * interval_ns {
                        next = woke + interval_ns;
                    }
                }
                stats(cpu, &rec, realtime, pinned)
            });
            (cpu, h)
        })
        .collect();
    // Every thread joined, even after one failed: none is left running.
    let joined: Vec<Result<LatencyStats, ProbeError>> = handles
        .into_iter()
        .map(|(cpu, h)| h.join().map_err(|_| ProbeError::Thread(cpu)))
        .collect();
    joined.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_that_are_not_there_are_named_and_many_are_capped() {
        let online: BTreeSet<u32> = (0..4).collect();
        assert_eq!(check_cpus(&[0, 3], &online), Ok(()));
        let all: Vec<u32> = (0..=65_535).collect();
        let err = check_cpus(&all, &online).unwrap_err();
        assert_eq!(
            err.to_string(),
            "CPU 4-65535 are not online on this host (online: 0-3)"
        );
        assert_eq!(
            check_cpus(&[7], &online).unwrap_err().to_string(),
            "CPU 7 is not online on this host (online: 0-3)"
        );
        assert_eq!(check_cpus(&[], &online), Err(ProbeError::NoCpus));
        let big: BTreeSet<u32> = (0..1024).collect();
        let many: Vec<u32> = (0..300).collect();
        assert_eq!(
            check_cpus(&many, &big),
            Err(ProbeError::TooManyCpus { asked: 300 })
        );
        // The probe refuses them itself, before a thread starts (what the
        // app's field passes on unchecked).
        let here = online_cpus(&HostRoot::live()).unwrap();
        assert!(here.contains(&0));
        let absent = here.last().unwrap() + 1;
        let err = probe(
            &[0, absent],
            Duration::from_millis(1),
            Duration::from_millis(1),
            1,
        );
        assert!(matches!(err, Err(ProbeError::NotOnline { .. })), "{err:?}");
    }

    #[test]
    fn a_short_probe_measures() {
        let r = probe(
            &[0],
            Duration::from_micros(1000),
            Duration::from_millis(200),
            1,
        )
        .unwrap();
        assert_eq!(r.len(), 1);
        assert!(r[0].summary.samples >= 150, "{:?}", r[0]);
        assert!(r[0].summary.max_us < 1_000_000);
        // 200 ms at 1 ms: two 100 ms windows.
        assert_eq!(
            r[0].summary.timeline_us.len(),
            2,
            "{:?}",
            r[0].summary.timeline_us
        );
        assert_eq!(r[0].summary.timeline_window_ms, 100);
        // The verdict stands where the documented thresholds put these
        // numbers (checked against the constants, not by calling `verdict`).
        let (p99, max) = (r[0].summary.p99_us, r[0].summary.max_us);
        match r[0].verdict {
            Verdict::Good => assert!(p99 <= GOOD_P99_US && max < POOR_MAX_US, "{:?}", r[0]),
            Verdict::Fair => assert!(
                p99 > GOOD_P99_US && p99 <= POOR_P99_US && max < POOR_MAX_US,
                "{:?}",
                r[0]
            ),
            Verdict::Poor => assert!(p99 > POOR_P99_US || max >= POOR_MAX_US, "{:?}", r[0]),
        }
        assert!(
            r[0].summary
                .timeline_us
                .iter()
                .all(|(_, us)| *us <= r[0].summary.max_us)
        );
        assert!(probe(&[], Duration::from_millis(1), Duration::from_millis(1), 1).is_err());
        assert!(probe(&[0], Duration::from_micros(1), Duration::from_millis(1), 1).is_err());
    }
}
