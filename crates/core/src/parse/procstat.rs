//! `/proc/stat` per-CPU time lines (`cpuN user nice system idle iowait irq
//! softirq steal guest guest_nice`, in USER_HZ ticks). Older kernels have fewer
//! columns: missing ones are zero. The aggregate `cpu` line is skipped.
//!
//! Not procfs-core's `KernelStats`: its per-CPU times carry no CPU number
//! (a host with an offline CPU would put CPU 3's times on CPU 2), and it
//! fails the whole file without `ctxt`, `btime` and `processes`, which the
//! monitor does not need.

use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    pub cpu: u32,
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    /// Time running guests (already counted in user).
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTimes {
    /// Every tick the CPU spent (guest time is part of user, not added again).
    pub fn total(&self) -> u64 {
        self.user
            .saturating_add(self.nice)
            .saturating_add(self.system)
            .saturating_add(self.idle)
            .saturating_add(self.iowait)
            .saturating_add(self.irq)
            .saturating_add(self.softirq)
            .saturating_add(self.steal)
    }
}

pub fn parse_cpu_times(text: &str) -> Vec<CpuTimes> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(cpu) = it
            .next()
            .and_then(|l| l.strip_prefix("cpu"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = it.map_while(|t| t.parse().ok()).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        if v.len() < 4 {
            continue;
        }
        out.push(CpuTimes {
            cpu,
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
            guest: at(8),
            guest_nice: at(9),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_and_short_lines() {
        // From this machine's /proc/stat (Debian 12, 6.1), and a 2.6.18-style line.
        let text = "cpu  1074963 1130 262612 40934457 23011 0 6137 104 0 0\ncpu0 537111 594 131419 20465770 11541 0 5325 52 0 0\ncpu1 537851 536 131193 20468687 11470 0 812 52 7 0\nintr 123 4 5\ncpu2 10 20 30 40\ncpu3 garbage\n";
        let t = parse_cpu_times(text);
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].cpu, 0);
        assert_eq!(t[0].softirq, 5325);
        assert_eq!(t[1].guest, 7);
        assert_eq!(t[2].idle, 40);
        assert_eq!(t[2].steal, 0);
        assert_eq!(
            t[0].total(),
            537111 + 594 + 131419 + 20465770 + 11541 + 5325 + 52
        );
        assert!(parse_cpu_times("\u{0}cpu\ncpux 1 2 3 4").is_empty());
    }
}
