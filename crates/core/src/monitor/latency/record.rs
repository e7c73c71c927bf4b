//! What the probe keeps of its wake-ups, in memory that does not grow with
//! the duration: p50/p99 from a streaming histogram (hdrhistogram), exact
//! min/max/mean from running sums, and a timeline of the worst wake-up per
//! window holding at most `MAX_TIMELINE_POINTS` (when full, neighbouring
//! windows merge and the window doubles). Pure: the probe feeds it, and so
//! can a test or a bench with made-up samples.

use hdrhistogram::Histogram;

/// The width of one timeline point at the start; it doubles each time the
/// timeline fills up.
pub const TIMELINE_WINDOW_NS: u64 = 100_000_000;

/// The most points a timeline holds: at 100 ms windows, 102 s before the
/// first merge; an hour ends at 3.2 s windows.
pub const MAX_TIMELINE_POINTS: usize = 1024;

/// The slowest wake-up the histogram tells apart (60 s); slower ones count
/// there (the exact maximum is kept apart).
const HIST_MAX_US: u64 = 60_000_000;

/// Power-of-two buckets of `LatencyStats::histogram_log2_us`.
const LOG2_BUCKETS: usize = 21;

/// The worst wake-up per window of time, bounded (see the module doc).
#[derive(Debug, Clone)]
pub struct Timeline {
    window_ns: u64,
    /// (the window's start since the probe began, ns; the worst latency in it, ns)
    points: Vec<(u64, u64)>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new()
    }
}

impl Timeline {
    pub fn new() -> Timeline {
        // Every page touched now: no page fault while measuring.
        let mut points = vec![(0, 0); MAX_TIMELINE_POINTS];
        points.clear();
        Timeline {
            window_ns: TIMELINE_WINDOW_NS,
            points,
        }
    }

    /// One wake-up `at_ns` after the start, `lat_ns` late.
    pub fn push(&mut self, at_ns: u64, lat_ns: u64) {
        if self.add_to_last(at_ns, lat_ns) {
            return;
        }
        while self.points.len() >= MAX_TIMELINE_POINTS {
            self.merge();
        }
        // The wider window may now hold it.
        if !self.add_to_last(at_ns, lat_ns) {
            self.points.push((at_ns - at_ns % self.window_ns, lat_ns));
        }
    }

    /// Counted in the last window when it falls there (or before it: a
    /// clock that stepped back), else false.
    fn add_to_last(&mut self, at_ns: u64, lat_ns: u64) -> bool {
        let start = at_ns - at_ns % self.window_ns;
        match self.points.last_mut() {
            Some((t, worst)) if *t >= start => {
                *worst = (*worst).max(lat_ns);
                true
            }
            _ => false,
        }
    }

    /// Double the window and merge the points that now share one, in place.
    fn merge(&mut self) {
        self.window_ns = self.window_ns.saturating_mul(2);
        let w = self.window_ns;
        let mut kept = 0;
        for i in 0..self.points.len() {
            let (t, worst) = self.points[i];
            let start = t - t % w;
            if kept > 0 && self.points[kept - 1].0 == start {
                let last = &mut self.points[kept - 1].1;
                *last = (*last).max(worst);
            } else {
                self.points[kept] = (start, worst);
                kept += 1;
            }
        }
        self.points.truncate(kept);
    }

    /// The window's width now, ns.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// (seconds since the start, the worst wake-up in µs) per window.
    pub fn points_us(&self) -> Vec<(f64, u64)> {
        self.points
            .iter()
            .map(|&(t, worst)| (t as f64 / 1e9, worst / 1000))
            .collect()
    }
}

/// Everything one CPU's probe keeps, in a fixed amount of memory.
#[derive(Debug, Clone)]
pub struct Recorder {
    hist_us: Histogram<u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
    log2_us: [u64; LOG2_BUCKETS],
    timeline: Timeline,
}

/// The summary a recorder ends with, in µs: one CPU's figures in
/// `LatencyStats` (flattened there, so its JSON is as before).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub samples: u64,
    pub min_us: u64,
    pub avg_us: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Counts of wake-ups per power-of-two bucket: `[0,1) [1,2) [2,4) …` µs.
    pub histogram_log2_us: Vec<u64>,
    /// Over time: (seconds since the start, the worst wake-up in µs) per
    /// `timeline_window_ms` — one long stall shows as a spike, not as an
    /// average. At most `MAX_TIMELINE_POINTS`.
    pub timeline_us: Vec<(f64, u64)>,
    /// The width of one timeline point: `TIMELINE_WINDOW`, doubled each time
    /// a long probe filled the timeline.
    pub timeline_window_ms: u64,
}

impl Recorder {
    /// 1 µs to 60 s at 3 significant digits: exact below 2048 µs, about
    /// 130 KiB whatever the duration. (The bounds are constants hdrhistogram
    /// accepts; the error cannot come, but is not unwrapped.)
    pub fn new() -> Result<Recorder, hdrhistogram::CreationError> {
        let mut hist_us = Histogram::new_with_bounds(1, HIST_MAX_US, 3)?;
        // Touches every count: no page fault while measuring.
        hist_us.clear();
        Ok(Recorder {
            hist_us,
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            log2_us: [0; LOG2_BUCKETS],
            timeline: Timeline::new(),
        })
    }

    /// One wake-up, due `at_ns` after the start, that came `lat_ns` late.
    pub fn record(&mut self, at_ns: u64, lat_ns: u64) {
        let us = lat_ns / 1000;
        self.hist_us.saturating_record(us.min(HIST_MAX_US));
        self.count += 1;
        self.sum_ns += u128::from(lat_ns);
        self.min_ns = self.min_ns.min(lat_ns);
        self.max_ns = self.max_ns.max(lat_ns);
        let bucket = (u64::BITS - us.leading_zeros()) as usize;
        self.log2_us[bucket.min(LOG2_BUCKETS - 1)] += 1;
        self.timeline.push(at_ns, lat_ns);
    }

    pub fn samples(&self) -> u64 {
        self.count
    }

    pub fn summary(&self) -> Summary {
        let quantile = |q: f64| {
            if self.count == 0 {
                0
            } else {
                // hdrhistogram answers the highest value equivalent to the
                // bucket: never above what was seen.
                self.hist_us.value_at_quantile(q).min(self.max_ns / 1000)
            }
        };
        let mut hist = self.log2_us.to_vec();
        while hist.len() > 1 && hist.last() == Some(&0) {
            hist.pop();
        }
        Summary {
            samples: self.count,
            min_us: if self.count == 0 {
                0
            } else {
                self.min_ns / 1000
            },
            avg_us: self
                .sum_ns
                .checked_div(u128::from(self.count))
                .map_or(0, |ns| (ns / 1000) as u64),
            p50_us: quantile(0.5),
            p99_us: quantile(0.99),
            max_us: self.max_ns / 1000,
            histogram_log2_us: hist,
            timeline_us: self.timeline.points_us(),
            timeline_window_ms: self.timeline.window_ns() / 1_000_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(lat_ns: &[u64], at_ns: &[u64]) -> Summary {
        let mut r = Recorder::new().unwrap();
        for (&l, &t) in lat_ns.iter().zip(at_ns) {
            r.record(t, l);
        }
        r.summary()
    }

    #[test]
    fn statistics_as_a_sorted_list_gives_them() {
        let s = fed(
            &[1_000, 2_000, 3_000, 4_000, 100_000],
            &[1, 2, 3, 4, 5].map(|i| i * 1_000_000),
        );
        assert_eq!((s.min_us, s.p50_us, s.max_us, s.samples), (1, 3, 100, 5));
        assert_eq!(s.p99_us, 100);
        assert_eq!(s.avg_us, 22);
        assert_eq!(s.histogram_log2_us, vec![0, 1, 2, 1, 0, 0, 0, 1]);
        let none = Recorder::new().unwrap().summary();
        assert_eq!(
            (none.max_us, none.p99_us, none.min_us, none.avg_us),
            (0, 0, 0, 0)
        );
        assert!(none.timeline_us.is_empty());
    }

    #[test]
    fn the_timeline_keeps_the_worst_per_window_where_it_came() {
        // Wake-up 3 came half a second late (a stall): it shows at 0.0 s,
        // later ones in the windows they woke in.
        let s = fed(
            &[1_000, 2_000, 90_000, 1_000, 3_000, 1_000],
            &[1, 2, 3, 504, 506, 607].map(|ms| ms * 1_000_000),
        );
        assert_eq!(s.timeline_us, vec![(0.0, 90), (0.5, 3), (0.6, 1)]);
        assert_eq!(s.timeline_window_ms, 100);
    }

    #[test]
    fn a_full_timeline_merges_windows_and_keeps_the_worst() {
        let mut t = Timeline::new();
        let n = MAX_TIMELINE_POINTS as u64 * 5;
        for i in 0..n {
            // One stall of 5 ms in the middle, 10 µs everywhere else.
            let lat = if i == n / 2 { 5_000_000 } else { 10_000 };
            t.push(i * TIMELINE_WINDOW_NS, lat);
        }
        let p = t.points_us();
        assert!(p.len() <= MAX_TIMELINE_POINTS, "{}", p.len());
        assert!(p.len() > MAX_TIMELINE_POINTS / 4, "{}", p.len());
        assert_eq!(t.window_ns(), TIMELINE_WINDOW_NS * 8);
        assert_eq!(p.iter().filter(|(_, us)| *us == 5_000).count(), 1);
        // In order, evenly spaced at the new width, from the start.
        assert_eq!(p[0].0, 0.0);
        assert!(p.windows(2).all(|w| (w[1].0 - w[0].0 - 0.8).abs() < 1e-9));
        let stall = p.iter().find(|(_, us)| *us == 5_000).unwrap().0;
        let at = (n / 2 * TIMELINE_WINDOW_NS) as f64 / 1e9;
        assert!(stall <= at && at < stall + 0.8, "{stall} {at}");
    }

    #[test]
    fn sparse_points_merge_too() {
        // Windows far apart (every 3rd): merging must still make room.
        let mut t = Timeline::new();
        for i in 0..(MAX_TIMELINE_POINTS as u64 * 4) {
            t.push(i * 3 * TIMELINE_WINDOW_NS, 1_000);
        }
        assert!(t.points_us().len() <= MAX_TIMELINE_POINTS);
    }

    #[test]
    fn huge_latencies_saturate_but_the_maximum_stays_exact() {
        let s = fed(&[u64::MAX / 2, 5_000], &[0, 1]);
        assert_eq!(s.max_us, u64::MAX / 2 / 1000);
        assert_eq!(s.p50_us, 5);
        assert!(s.p99_us >= HIST_MAX_US, "{}", s.p99_us);
        assert_eq!(s.histogram_log2_us.len(), LOG2_BUCKETS);
    }
}
