//! CPU sets as the kernel prints them: the list form (`0-3,8,10-11`, the
//! command line's `0-7:2/4` strides, cpufreq's space-separated `0 1 2 3`) and
//! the mask form (`00000000,0000ffff`: 32-bit hex words, most significant
//! first, the only form older kernels have for cache and sibling sets).
//!
//! Both parsers take time linear in the text (plus a sort of its ranges) and
//! refuse CPU ids above [`MAX_CPU`], so a hostile or corrupt file costs
//! milliseconds, not minutes.

use super::ParseError;
use std::collections::BTreeSet;

/// Highest CPU number we accept. The kernel's NR_CPUS tops out at 8192; eight
/// times that leaves room for any real machine and bounds the work.
pub const MAX_CPU: u32 = 65_535;

/// Most ranges one list may name, strides expanded. A real set of
/// [`MAX_CPU`]` + 1` CPUs has at most half as many disjoint ranges.
const MAX_RANGES: usize = 1 << 18;

/// Words in a mask that reaches [`MAX_CPU`].
const MAX_MASK_WORDS: usize = (MAX_CPU as usize + 1) / 32;

/// Parse `0-3,8,10-11` (also `0-7:2/4` strides and `0 1 2` lists) into sorted
/// CPU ids. An empty string is the empty set.
pub fn parse_cpulist(text: &str) -> Result<BTreeSet<u32>, ParseError> {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    let parts = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty());
    for part in parts {
        let (range, stride) = match part.split_once(':') {
            Some((r, s)) => (r, Some(s)),
            None => (part, None),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(range)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(ParseError::new(format!("range {part:?} runs backwards")));
        }
        let Some(stride) = stride else {
            push_range(&mut ranges, (lo, hi), text)?;
            continue;
        };
        let (used, group) = stride
            .split_once('/')
            .ok_or_else(|| ParseError::new(format!("bad stride in {part:?}")))?;
        let (used, group) = (number(used)?, number(group)?);
        if group == 0 || used == 0 || used > group {
            return Err(ParseError::new(format!("bad stride in {part:?}")));
        }
        let mut base = lo;
        loop {
            push_range(
                &mut ranges,
                (base, base.saturating_add(used - 1).min(hi)),
                text,
            )?;
            match base.checked_add(group) {
                Some(next) if next <= hi => base = next,
                _ => break,
            }
        }
    }
    Ok(collect_ranges(ranges))
}

fn push_range(ranges: &mut Vec<(u32, u32)>, r: (u32, u32), text: &str) -> Result<(), ParseError> {
    if ranges.len() >= MAX_RANGES {
        return Err(ParseError::new(format!(
            "CPU list of {} bytes names more than {MAX_RANGES} ranges: not a real CPU set",
            text.len()
        )));
    }
    ranges.push(r);
    Ok(())
}

/// Sort, merge overlapping and touching ranges, and list their CPUs.
fn collect_ranges(mut ranges: Vec<(u32, u32)>) -> BTreeSet<u32> {
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    // Sorted input: the set is built in one pass, not by repeated inserts.
    merged.into_iter().flat_map(|(lo, hi)| lo..=hi).collect()
}

fn number(s: &str) -> Result<u32, ParseError> {
    let s = s.trim();
    if s.len() > 10 {
        // Quote only the start: the text may be a megabyte of digits.
        let head: String = s.chars().take(12).collect();
        return Err(ParseError::new(format!(
            "{head:?}… ({} bytes) is not a CPU number",
            s.len()
        )));
    }
    let n: u32 = s
        .parse()
        .map_err(|_| ParseError::new(format!("{s:?} is not a CPU number")))?;
    if n > MAX_CPU {
        return Err(ParseError::new(format!(
            "CPU {n} is beyond any real machine (at most {MAX_CPU})"
        )));
    }
    Ok(n)
}

/// Parse a sysfs CPU mask (`00000000,0000ffff`: 32-bit hex words, most
/// significant first; the first word may be shorter, `fffff` for 20 CPUs)
/// into CPU ids. An empty string is the empty set.
pub fn parse_cpumask(text: &str) -> Result<BTreeSet<u32>, ParseError> {
    let text = text.trim();
    let mut cpus: Vec<u32> = Vec::new();
    if text.is_empty() {
        return Ok(BTreeSet::new());
    }
    // Least significant word first, so CPU ids come out in ascending order.
    for (i, word) in text.rsplit(',').enumerate() {
        let w = word.trim();
        if i >= MAX_MASK_WORDS {
            return Err(ParseError::new(format!(
                "CPU mask of {} bytes has more than {MAX_MASK_WORDS} words (CPUs beyond {MAX_CPU})",
                text.len()
            )));
        }
        if w.is_empty() || w.len() > 8 {
            return Err(ParseError::new(format!(
                "{w:?} is not a 32-bit hex CPU mask word"
            )));
        }
        let mut bits = u32::from_str_radix(w, 16)
            .map_err(|_| ParseError::new(format!("{w:?} is not a hex CPU mask word")))?;
        // i < MAX_MASK_WORDS = 2048, so the base fits in u32.
        let base = (i as u32) * 32;
        while bits != 0 {
            cpus.push(base + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
    Ok(cpus.into_iter().collect())
}

/// Format CPU ids compactly: `[0,1,2,3,8]` -> `0-3,8`.
pub fn format_cpulist<'a>(cpus: impl IntoIterator<Item = &'a u32>) -> String {
    let mut sorted: Vec<u32> = cpus.into_iter().copied().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// Format CPU ids the way the kernel writes a mask file of `words` 32-bit
/// words (`%*pb`): e.g. `00000000,00000101`. Used to compare list and mask
/// forms and in tests.
pub fn format_cpumask<'a>(cpus: impl IntoIterator<Item = &'a u32>, words: usize) -> String {
    let mut w = vec![0u32; words.max(1)];
    for &c in cpus {
        if let Some(word) = w.get_mut(c as usize / 32) {
            *word |= 1 << (c % 32);
        }
    }
    w.iter()
        .rev()
        .map(|x| format!("{x:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn ids(s: BTreeSet<u32>) -> Vec<u32> {
        s.into_iter().collect()
    }

    #[test]
    fn parses_sysfs_lists() {
        let s = parse_cpulist("0-3,8,10-11\n").unwrap();
        assert_eq!(ids(s), vec![0, 1, 2, 3, 8, 10, 11]);
        assert!(parse_cpulist("").unwrap().is_empty());
        assert!(parse_cpulist("\n").unwrap().is_empty());
    }

    #[test]
    fn parses_cpufreq_space_separated_lists() {
        // cpufreq/policy3/related_cpus of the ARM phone fixture.
        assert_eq!(ids(parse_cpulist("3 4 5 6\n").unwrap()), vec![3, 4, 5, 6]);
    }

    #[test]
    fn overlapping_and_repeated_ranges_merge() {
        let s = parse_cpulist("4-7,0-3,2-5,8,8,9").unwrap();
        assert_eq!(ids(s), (0..=9).collect::<Vec<_>>());
    }

    #[test]
    fn parses_stride_form() {
        let s = parse_cpulist("0-7:2/4").unwrap();
        assert_eq!(ids(s), vec![0, 1, 4, 5]);
        let s = parse_cpulist("0-6:1/3").unwrap();
        assert_eq!(ids(s), vec![0, 3, 6]);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_cpulist("abc").is_err());
        assert!(parse_cpulist("5-2").is_err());
        assert!(parse_cpulist("0-99999999").is_err());
        assert!(parse_cpulist("1-3:0/0").is_err());
        assert!(parse_cpulist("65536").is_err());
        assert!(parse_cpulist(&"9".repeat(100_000)).is_err());
    }

    #[test]
    fn hostile_lists_are_fast_and_bounded() {
        // 800 KB of the widest range, repeated: took minutes before (every CPU
        // of every range was inserted into the set one by one).
        let text = "0-65535,".repeat(100_000);
        let t = Instant::now();
        let s = parse_cpulist(&text).unwrap();
        assert_eq!(s.len(), 65_536);
        // Strides that would expand to billions of ranges are refused.
        let strides = "0-65535:1/2,".repeat(60_000);
        assert!(parse_cpulist(&strides).is_err());
        // A mask far wider than any machine is refused, not walked.
        assert!(parse_cpumask(&"ffffffff,".repeat(100_000)).is_err());
        let elapsed = t.elapsed();
        assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    }

    #[test]
    fn parses_masks() {
        let s = parse_cpumask("00000000,00000000,00000000,ffffffff\n").unwrap();
        assert_eq!(s.len(), 32);
        let s = parse_cpumask("00000001,80000000").unwrap();
        assert_eq!(ids(s), vec![31, 32]);
        // The kernel shortens the top word: 20 CPUs print as `fffff`.
        assert_eq!(
            ids(parse_cpumask("fffff\n").unwrap()),
            (0..20).collect::<Vec<_>>()
        );
        assert!(parse_cpumask("").unwrap().is_empty());
        assert!(parse_cpumask("xyz").is_err());
        assert!(parse_cpumask("0,,1").is_err());
        assert!(parse_cpumask("1ffffffff").is_err());
    }

    #[test]
    fn formats_round_trip() {
        let s = parse_cpulist("0-3,8,10-11").unwrap();
        assert_eq!(format_cpulist(&s), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[5u32]), "5");
        assert_eq!(format_cpulist(&[]), "");
        let s = parse_cpulist("0,8,33").unwrap();
        let mask = format_cpumask(&s, 2);
        assert_eq!(mask, "00000002,00000101");
        assert_eq!(parse_cpumask(&mask).unwrap(), s);
    }
}
