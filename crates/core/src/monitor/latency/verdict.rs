//! How good a CPU's timer latency is for a gaming VM, in one word, against
//! thresholds kept here only: the CLI, the app and the docs say the same.

use serde::{Deserialize, Serialize};

/// A CPU's latency for a VM pinned there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Good,
    Fair,
    Poor,
}

/// A p99 at or under this is good for games ("under ~50 µs p99").
pub const GOOD_P99_US: u64 = 50;
/// A p99 above this is poor: hundreds of µs are heard as audio crackle and
/// felt as stutter.
pub const POOR_P99_US: u64 = 200;
/// One wake-up this late or later makes it poor whatever the p99: a stall
/// of a millisecond drops audio.
pub const POOR_MAX_US: u64 = 1000;

/// The verdict for a p99 and a maximum, in µs.
pub fn verdict(p99_us: u64, max_us: u64) -> Verdict {
    if p99_us > POOR_P99_US || max_us >= POOR_MAX_US {
        Verdict::Poor
    } else if p99_us > GOOD_P99_US {
        Verdict::Fair
    } else {
        Verdict::Good
    }
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Fair => "fair",
            Verdict::Poor => "poor",
        }
    }
}

/// The thresholds in one sentence, for people.
pub fn thresholds() -> String {
    format!(
        "good: p99 at most {GOOD_P99_US} µs; fair: p99 up to {POOR_P99_US} µs; poor: p99 above {POOR_P99_US} µs or any wake-up {POOR_MAX_US} µs late or later"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_fall_where_the_words_say() {
        assert_eq!(verdict(GOOD_P99_US, 100), Verdict::Good);
        assert_eq!(verdict(GOOD_P99_US + 1, 100), Verdict::Fair);
        assert_eq!(verdict(POOR_P99_US, 500), Verdict::Fair);
        assert_eq!(verdict(POOR_P99_US + 1, 500), Verdict::Poor);
        assert_eq!(verdict(5, POOR_MAX_US), Verdict::Poor, "one long stall");
        assert!(thresholds().contains("50 µs"));
    }
}
