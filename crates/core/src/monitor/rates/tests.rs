use super::{moved_span, rates};
use crate::monitor::sample::Sample;
use crate::parse::interrupts::{parse_interrupts, parse_interrupts_reusing};

/// Rates from rows that know which columns the parse read anew agree
/// with rates from rows parsed afresh (every column compared), over
/// chained samples where a few counts move, a line is spoiled and
/// mended, and now and then every count of a line moves.
#[test]
fn the_parse_s_moved_columns_give_the_compared_rates() {
    let mut counts: Vec<Vec<u64>> = (0..12)
        .map(|l| (0..40).map(|c| ((l * 5 + c) % 3) as u64 * 700).collect())
        .collect();
    let listing = |counts: &[Vec<u64>], spoil: Option<usize>| {
        let mut t: String = (0..40)
            .map(|c| format!("{:>11}", format!("CPU{c}")))
            .collect();
        for (l, row) in counts.iter().enumerate() {
            t.push_str(&format!("\n{l:>4}:"));
            for (c, v) in row.iter().enumerate() {
                if spoil == Some(l) && c == 7 {
                    t.push_str("      7 7 7");
                } else {
                    t.push_str(&format!(" {v:>10}"));
                }
            }
            t.push_str(&format!("  IR-PCI-MSI {l}-edge  dev{l}"));
        }
        t
    };
    let sample = |t_ns: u64, text: &str, i| Sample {
        t_ns,
        interrupts: Some(i),
        interrupts_text: Some(std::sync::Arc::new(text.to_string())),
        ..Sample::default()
    };
    let mut text = listing(&counts, None);
    let mut prev = sample(0, &text, parse_interrupts(&text));
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for step in 1..200u64 {
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (l, c) = ((x % 12) as usize, ((x >> 8) % 40) as usize);
            counts[l][c] += 1 + (x >> 20) % 5000;
        }
        if step % 7 == 0 {
            counts[step as usize % 12]
                .iter_mut()
                .for_each(|v| *v += step);
        }
        let spoil = (step % 11 == 0).then_some(step as usize % 12);
        let next = listing(&counts, spoil);
        let t_ns = step * 250_000_000;
        let reused =
            parse_interrupts_reusing(&next, Some((&text, prev.interrupts.as_ref().unwrap())));
        let fresh = sample(t_ns, &next, parse_interrupts(&next));
        let cur = sample(t_ns, &next, reused);
        assert_eq!(
            rates(&prev, &cur, None),
            rates(&prev, &fresh, None),
            "step {step}"
        );
        (text, prev) = (next, cur);
    }
}

#[test]
fn moved_span_is_first_to_last_difference() {
    for n in [0usize, 1, 7, 8, 9, 16, 17, 44, 256] {
        let old: Vec<u64> = (0..n as u64).map(|i| i * 3).collect();
        for a in 0..n.min(20) {
            for b in [a, a + 1, a + 9, n.saturating_sub(1)] {
                if b >= n || b < a {
                    continue;
                }
                let mut new = old.clone();
                new[a] += 1;
                new[b] += 2;
                assert_eq!(moved_span(&old, &new), a..b + 1, "n {n}, {a}..={b}");
            }
        }
        assert!(moved_span(&old, &old).is_empty(), "n {n}");
        assert_eq!(moved_span(&old, &old[..n / 2]), 0..n / 2);
    }
}
