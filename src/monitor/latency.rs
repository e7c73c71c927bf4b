//! A cyclictest-style timer latency probe: one thread per chosen CPU, pinned
//! there, real-time (SCHED_FIFO) when permitted, sleeping to absolute deadlines
//! with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`; how late each wake-up
//! comes is the latency a vCPU on that CPU would see from the host.

use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyStats {
    pub cpu: u32,
    pub samples: usize,
    pub min_us: u64,
    pub avg_us: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Counts of wake-ups per power-of-two bucket: `[0,1) [1,2) [2,4) …` µs.
    pub histogram_log2_us: Vec<u64>,
    /// Whether the thread ran SCHED_FIFO (needs root or CAP_SYS_NICE).
    pub realtime: bool,
    /// Whether it could be pinned to `cpu`.
    pub pinned: bool,
    /// Over time: (seconds since the start, the worst wake-up in µs) per
    /// `TIMELINE_WINDOW` — one long stall shows as a spike, not as an average.
    pub timeline_us: Vec<(f64, u64)>,
}

/// The width of one point of `LatencyStats::timeline_us`.
pub const TIMELINE_WINDOW: Duration = Duration::from_millis(100);

/// Pure: the worst latency per window of `per_window` consecutive wake-ups
/// (in wake order), as (when the window's first wake-up came, in seconds
/// since the start; µs). `woke_ns[i]` is when wake-up `i` came: after a long
/// stall the schedule restarts, so the index alone would misplace it.
pub fn timeline(lat_ns: &[u64], woke_ns: &[u64], per_window: usize) -> Vec<(f64, u64)> {
    let per_window = per_window.max(1);
    lat_ns
        .chunks(per_window)
        .enumerate()
        .map(|(i, w)| {
            let t = woke_ns.get(i * per_window).copied().unwrap_or(0) as f64 / 1e9;
            (t, w.iter().copied().max().unwrap_or(0) / 1000)
        })
        .collect()
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProbeError {
    #[error("no CPUs to measure")]
    NoCpus,
    #[error("the interval must be between 50 µs and 1 s")]
    BadInterval,
    #[error("the probe thread for CPU {0} stopped without a result")]
    Thread(u32),
}

/// The same CPU measured as configured (`a`) and with shallow idle states
/// only (`b`), in one line.
pub fn compared(a: &LatencyStats, b: &LatencyStats) -> String {
    format!(
        "p50 {} µs as configured, {} µs shallow idle only; p99 {} / {} µs; max {} / {} µs",
        a.p50_us, b.p50_us, a.p99_us, b.p99_us, a.max_us, b.max_us
    )
}

/// Pure: statistics from wake-up latencies in nanoseconds.
pub fn stats(cpu: u32, mut lat_ns: Vec<u64>, realtime: bool, pinned: bool) -> LatencyStats {
    lat_ns.sort_unstable();
    let us = |ns: u64| ns / 1000;
    let pick = |q: f64| -> u64 {
        if lat_ns.is_empty() {
            return 0;
        }
        let i = ((lat_ns.len() as f64 - 1.0) * q).round() as usize;
        us(lat_ns[i.min(lat_ns.len() - 1)])
    };
    let mut hist = vec![0u64; 21];
    for &ns in &lat_ns {
        let u = us(ns);
        let b = if u == 0 {
            0
        } else {
            (64 - u.leading_zeros()) as usize
        };
        hist[b.min(20)] += 1;
    }
    while hist.len() > 1 && hist.last() == Some(&0) {
        hist.pop();
    }
    let sum: u128 = lat_ns.iter().map(|&x| u128::from(x)).sum();
    LatencyStats {
        cpu,
        samples: lat_ns.len(),
        min_us: lat_ns.first().map(|&x| us(x)).unwrap_or(0),
        avg_us: if lat_ns.is_empty() {
            0
        } else {
            (sum / lat_ns.len() as u128 / 1000) as u64
        },
        p50_us: pick(0.5),
        p99_us: pick(0.99),
        max_us: lat_ns.last().map(|&x| us(x)).unwrap_or(0),
        histogram_log2_us: hist,
        realtime,
        pinned,
        timeline_us: Vec::new(),
    }
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

fn sleep_until_ns(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    // EINTR just ends this sleep early: the lateness is then measured as is.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

fn pin_to(cpu: u32) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays in bounds
    // for cpu < CPU_SETSIZE, checked first.
    unsafe {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return false;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn go_realtime(priority: i32) -> bool {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain syscall on the calling thread with a valid parameter.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// Measure every CPU in `cpus` at once for `duration`, waking every `interval`.
pub fn probe(
    cpus: &[u32],
    interval: Duration,
    duration: Duration,
    priority: i32,
) -> Result<Vec<LatencyStats>, ProbeError> {
    if cpus.is_empty() {
        return Err(ProbeError::NoCpus);
    }
    if interval < Duration::from_micros(50) || interval > Duration::from_secs(1) {
        return Err(ProbeError::BadInterval);
    }
    let interval_ns = interval.as_nanos() as u64;
    let loops = (duration.as_nanos() as u64 / interval_ns).max(1) as usize;
    let handles: Vec<(u32, std::thread::JoinHandle<LatencyStats>)> = cpus
        .iter()
        .map(|&cpu| {
            let h = std::thread::spawn(move || {
                let pinned = pin_to(cpu);
                let realtime = go_realtime(priority);
                let mut lat = Vec::with_capacity(loops);
                let mut woke_at = Vec::with_capacity(loops);
                // Touched before measuring: no page fault inside the loop.
                lat.resize(loops, 1u64);
                woke_at.resize(loops, 1u64);
                lat.clear();
                woke_at.clear();
                let start = now_ns();
                let mut next = start + interval_ns;
                for _ in 0..loops {
                    sleep_until_ns(next);
                    let woke = now_ns();
                    lat.push(woke.saturating_sub(next));
                    woke_at.push(woke.saturating_sub(start));
                    next += interval_ns;
                    // Fell far behind (e.g. suspended): restart the schedule.
                    if woke > next + 100 * interval_ns {
                        next = woke + interval_ns;
                    }
                }
                let per_window = (TIMELINE_WINDOW.as_nanos() as u64 / interval_ns).max(1);
                let line = timeline(&lat, &woke_at, per_window as usize);
                LatencyStats {
                    timeline_us: line,
                    ..stats(cpu, lat, realtime, pinned)
                }
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
    fn statistics() {
        let s = stats(3, vec![1_000, 2_000, 3_000, 4_000, 100_000], false, true);
        assert_eq!((s.min_us, s.p50_us, s.max_us, s.samples), (1, 3, 100, 5));
        assert_eq!(s.avg_us, 22);
        assert_eq!(s.histogram_log2_us.iter().sum::<u64>(), 5);
        assert_eq!(stats(0, vec![], false, false).max_us, 0);
        // The timeline keeps the order: a stall shows where it happened.
        let lat = [1_000, 2_000, 90_000, 1_000, 1_000, 3_000, 1_000];
        // Wake-up 3 came half a second late (a stall): later windows move with it.
        let woke = [
            1_000_000,
            2_000_000,
            3_000_000,
            504_000_000,
            505_000_000,
            506_000_000,
            507_000_000,
        ];
        assert_eq!(
            timeline(&lat, &woke, 3),
            vec![(0.001, 90), (0.504, 3), (0.507, 1)]
        );
        assert!(timeline(&[], &[], 0).is_empty());
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
        assert!(r[0].samples >= 150, "{:?}", r[0]);
        assert!(r[0].max_us < 1_000_000);
        // 200 ms at 1 ms: two 100 ms windows.
        assert_eq!(r[0].timeline_us.len(), 2, "{:?}", r[0].timeline_us);
        assert!(r[0].timeline_us.iter().all(|(_, us)| *us <= r[0].max_us));
        assert!(probe(&[], Duration::from_millis(1), Duration::from_millis(1), 1).is_err());
        assert!(probe(&[0], Duration::from_micros(1), Duration::from_millis(1), 1).is_err());
    }
}
