//! CPU list syntax used all over sysfs and the kernel command line: `0-3,8,10-11`.

use super::ParseError;
use std::collections::BTreeSet;

/// Highest CPU number we accept (the kernel's NR_CPUS upper bound is 8192).
const MAX_CPU: u32 = 65_535;

/// Parse `0-3,8,10-11` (also the kernel's `0-7:2/4` stride form) into sorted CPU ids.
/// An empty string is the empty set.
pub fn parse_cpulist(text: &str) -> Result<BTreeSet<u32>, ParseError> {
    let mut set = BTreeSet::new();
    let text = text.trim();
    if text.is_empty() {
        return Ok(set);
    }
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
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
        let (used, group) = match stride {
            None => (1, 1),
            Some(s) => {
                let (u, g) = s
                    .split_once('/')
                    .ok_or_else(|| ParseError::new(format!("bad stride in {part:?}")))?;
                let (u, g) = (number(u)?, number(g)?);
                if g == 0 || u == 0 || u > g {
                    return Err(ParseError::new(format!("bad stride in {part:?}")));
                }
                (u, g)
            }
        };
        let mut base = lo;
        while base <= hi {
            for cpu in base..base.saturating_add(used) {
                if cpu <= hi {
                    set.insert(cpu);
                }
            }
            base = match base.checked_add(group) {
                Some(b) => b,
                None => break,
            };
        }
    }
    Ok(set)
}

fn number(s: &str) -> Result<u32, ParseError> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| ParseError::new(format!("{s:?} is not a CPU number")))?;
    if n > MAX_CPU {
        return Err(ParseError::new(format!(
            "CPU {n} is beyond any real machine"
        )));
    }
    Ok(n)
}

/// Parse a sysfs CPU mask (`00000000,0000ffff`: 32-bit hex words, most
/// significant first) into CPU ids.
pub fn parse_cpumask(text: &str) -> Result<BTreeSet<u32>, ParseError> {
    let mut set = BTreeSet::new();
    let words: Vec<&str> = text.trim().split(',').collect();
    for (i, word) in words.iter().rev().enumerate() {
        let w = word.trim();
        if w.is_empty() {
            continue;
        }
        let bits = u32::from_str_radix(w, 16)
            .map_err(|_| ParseError::new(format!("{w:?} is not a hex CPU mask word")))?;
        let base = u32::try_from(i)
            .ok()
            .and_then(|i| i.checked_mul(32))
            .ok_or_else(|| ParseError::new("CPU mask too long"))?;
        if base > MAX_CPU {
            return Err(ParseError::new("CPU mask too long"));
        }
        for bit in 0..32 {
            if bits & (1 << bit) != 0 {
                set.insert(base + bit);
            }
        }
    }
    Ok(set)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sysfs_lists() {
        let s = parse_cpulist("0-3,8,10-11\n").unwrap();
        assert_eq!(
            s.into_iter().collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert!(parse_cpulist("").unwrap().is_empty());
        assert!(parse_cpulist("\n").unwrap().is_empty());
    }

    #[test]
    fn parses_stride_form() {
        let s = parse_cpulist("0-7:2/4").unwrap();
        assert_eq!(s.into_iter().collect::<Vec<_>>(), vec![0, 1, 4, 5]);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_cpulist("abc").is_err());
        assert!(parse_cpulist("5-2").is_err());
        assert!(parse_cpulist("0-99999999").is_err());
        assert!(parse_cpulist("1-3:0/0").is_err());
    }

    #[test]
    fn parses_masks() {
        let s = parse_cpumask("00000000,00000000,00000000,ffffffff\n").unwrap();
        assert_eq!(s.len(), 32);
        let s = parse_cpumask("00000001,80000000").unwrap();
        assert_eq!(s.into_iter().collect::<Vec<_>>(), vec![31, 32]);
        assert!(parse_cpumask("xyz").is_err());
    }

    #[test]
    fn formats_round_trip() {
        let s = parse_cpulist("0-3,8,10-11").unwrap();
        assert_eq!(format_cpulist(&s), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[5u32]), "5");
        assert_eq!(format_cpulist(&[]), "");
    }
}
