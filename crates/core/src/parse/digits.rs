//! Decimal numbers eight bytes at a time (SWAR: one 64-bit word holds eight
//! ASCII bytes). A 256-CPU `/proc/interrupts` holds ~400k counts; digit by
//! digit, `v = v * 10 + d` is a chain of dependent multiplies, and that chain
//! was most of a full parse. Here up to eight digits cost three multiplies.

use std::ops::Range;

const ONES: u64 = 0x0101_0101_0101_0101;

/// How many of the word's bytes, lowest (first in memory) first, are ASCII
/// digits before the first byte that is not.
#[inline]
fn digit_run(word: u64) -> usize {
    // A low nibble >= 10 sets 0x10 in its own byte: no carry leaves a byte.
    (non_digits(word).trailing_zeros() / 8) as usize
}

/// Bit 7 of each byte set where that byte is non-zero (no cross-byte carry).
#[inline]
fn nonzero_bytes(v: u64) -> u64 {
    (((v & (0x7F * ONES)) + 0x7F * ONES) | v) & (0x80 * ONES)
}

/// Bit 7 of each byte set where that byte is not an ASCII digit.
#[inline]
fn non_digits(word: u64) -> u64 {
    let hi = word & (0xF0 * ONES);
    let over = ((word & (0x0F * ONES)) + 0x06 * ONES) & (0xF0 * ONES);
    nonzero_bytes((hi ^ (0x30 * ONES)) | over)
}

/// Eight digit values (0..=9), the most significant in the lowest byte, as
/// one number: pairs, then quads, then all eight.
#[inline]
fn combine(d: u64) -> u64 {
    let d = (d.wrapping_mul(10) + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
    let d = (d.wrapping_mul(100) + (d >> 16)) & 0x0000_FFFF_0000_FFFF;
    (d.wrapping_mul(10_000) + (d >> 32)) & 0xFFFF_FFFF
}

/// One count the way the kernel prints it in /proc/interrupts (`" %10u"`):
/// 11 bytes, blanks then a right-aligned number of 1 to 10 digits. None when
/// the field is anything else.
#[inline]
fn fixed_field(f: &[u8; 11]) -> Option<u64> {
    let word = u64::from_le_bytes([f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10]]);
    // Most counts of a big host are 0 (a device's interrupt goes to one CPU).
    if word == u64::from_le_bytes(*b"       0") && f[..3] == *b"   " {
        return Some(0);
    }
    let nd = non_digits(word);
    // Digits counted from the top byte (the rightmost character) down.
    let run = if nd == 0 {
        8
    } else {
        (nd.leading_zeros() / 8) as usize
    };
    if run == 0 || f[0] != b' ' {
        return None;
    }
    if run < 8 {
        // Everything left of the number must be blanks.
        let below = (1u64 << (8 * (8 - run))) - 1;
        if (word ^ (0x20 * ONES)) & below != 0 || f[1] != b' ' || f[2] != b' ' {
            return None;
        }
        return Some(combine((word ^ (0x30 * ONES)) & !below));
    }
    let low = combine(word ^ (0x30 * ONES));
    let d = |b: u8| u64::from(b - b'0');
    match (f[1], f[2]) {
        (b' ', b' ') => Some(low),
        (b' ', c) if c.is_ascii_digit() => Some(d(c) * 100_000_000 + low),
        (a, c) if a.is_ascii_digit() && c.is_ascii_digit() => {
            Some((d(a) * 10 + d(c)) * 100_000_000 + low)
        }
        _ => None,
    }
}

/// `n` counts printed the kernel's way from `start`: 11 bytes each, followed
/// by the end of the line or a blank. Each field is parsed on its own (no
/// chain from one number's end to the next one's start), so a line of 256
/// counts is a quarter of the work of token-by-token parsing. Returns None
/// (and leaves `out` as it was) when the line is laid out any other way.
///
/// `before` is the same line in the previous sample, when it was laid out
/// this way too. A line changes because one or two CPUs took the interrupt;
/// every field whose bytes did not change keeps its old count, so such a line
/// costs little more than comparing its bytes. Returns the fields whose count
/// may differ from `before`'s (all of them without it): the rates need look
/// at no others.
pub fn fixed_width_counts(
    line: &[u8],
    start: usize,
    n: usize,
    out: &mut Vec<u64>,
    before: Option<Before>,
) -> Option<Range<usize>> {
    let region = line.get(start..start.checked_add(n.checked_mul(11)?)?)?;
    if !matches!(line.get(start + region.len()), None | Some(b' ' | b'\t')) {
        return None;
    }
    let whole = before.filter(|b| b.bytes.len() == region.len() && b.counts.len() == n);
    // Whole fields before the first changed byte and after the last one keep
    // their counts: only the fields between are compared or parsed.
    let (kept_to, kept_from) = whole.map_or((0, n), |b| {
        let to = (b.equal / 11).min(n);
        (to, b.equal_from.div_ceil(11).clamp(to, n))
    });
    let first = out.len();
    out.reserve(n);
    if let Some(b) = whole {
        out.extend_from_slice(&b.counts[..kept_to]);
    }
    let middle = &region[kept_to * 11..kept_from * 11];
    // The old line's fields and counts beside the middle.
    let mut before = whole.map(|b| {
        (
            &b.bytes[kept_to * 11..kept_from * 11],
            &b.counts[kept_to..kept_from],
        )
    });
    // Fields that changed so far: a line where most CPUs moved (the local
    // timer) stops comparing with the old one and only parses.
    let mut moved = 0;
    let middle_first = out.len();
    // Eight fields at a time: eight idle CPUs in a row (a device interrupt
    // goes to one or two CPUs), or eight that did not change since the last
    // sample, cost one 88-byte comparison instead of eight fields.
    for (g, group) in middle.chunks(ZEROS8.len()).enumerate() {
        let at = g * ZEROS8.len();
        let old = before.map(|(bytes, counts)| (&bytes[at..][..group.len()], &counts[g * 8..]));
        if let Some((bytes, counts)) = old
            && bytes == group
        {
            out.extend_from_slice(&counts[..group.len() / 11]);
            continue;
        }
        if group == &ZEROS8[..] {
            out.extend_from_slice(&[0; 8]);
            continue;
        }
        for (k, f) in group.chunks_exact(11).enumerate() {
            let kept = old.and_then(|(bytes, counts)| {
                let was = bytes.get(k * 11..)?.first_chunk::<11>()?;
                (f.first_chunk::<11>() == Some(was)).then(|| counts[k])
            });
            if old.is_some() && kept.is_none() {
                moved += 1;
            }
            let Some(v) = kept.or_else(|| f.first_chunk::<11>().and_then(fixed_field)) else {
                out.truncate(first);
                return None;
            };
            out.push(v);
        }
        if moved > 16 && moved * 2 > out.len() - middle_first {
            before = None;
        }
    }
    if let Some(b) = whole {
        out.extend_from_slice(&b.counts[kept_from..]);
    }
    Some(kept_to..kept_from)
}

/// The same line in the previous sample, read as fixed-width fields.
#[derive(Clone, Copy)]
pub struct Before<'a> {
    /// Its `n * 11` field bytes, from the same `start`.
    pub bytes: &'a [u8],
    /// The counts read from them.
    pub counts: &'a [u64],
    /// How many of `bytes` are known to equal the new line's (compared
    /// already while pairing the lines).
    pub equal: usize,
    /// From which of `bytes` on they are all known to equal the new line's
    /// (`bytes.len()` when nothing is known).
    pub equal_from: usize,
}

/// Eight fields of `" %10u"` holding 0.
const ZEROS8: [u8; 88] = {
    let mut z = [b' '; 88];
    let mut k = 0;
    while k < 8 {
        z[k * 11 + 10] = b'0';
        k += 1;
    }
    z
};

/// The value of the word's first `run` bytes (1..=8), all ASCII digits.
#[inline]
fn value_of(word: u64, run: usize) -> u64 {
    // Digits to 0..9 (XOR: no borrow between bytes), and moved up so that the
    // `8 - run` missing leading digits are zero bytes.
    combine((word ^ (0x30 * ONES)) << (8 * (8 - run)))
}

/// The unsigned decimal number at the start of `bytes`: its value and how many
/// bytes it took. None when `bytes` does not start with a digit or the number
/// does not fit a u64.
#[inline]
pub fn leading_number(bytes: &[u8]) -> Option<(u64, usize)> {
    // The usual count: fewer than eight digits, one word, no overflow possible.
    if let Some(w) = bytes.first_chunk::<8>() {
        let word = u64::from_le_bytes(*w);
        let run = digit_run(word);
        if run == 0 {
            return None;
        }
        if run < 8 {
            return Some((value_of(word, run), run));
        }
    }
    leading_number_long(bytes)
}

const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// Eight digits or more, or the last bytes of a line.
fn leading_number_long(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    let mut len = 0;
    loop {
        let rest = bytes.get(len..).unwrap_or(&[]);
        let word = match rest.first_chunk::<8>() {
            Some(w) => u64::from_le_bytes(*w),
            None => {
                // The line's last few bytes: padded with spaces (not digits).
                let mut w = [b' '; 8];
                w[..rest.len()].copy_from_slice(rest);
                u64::from_le_bytes(w)
            }
        };
        let run = digit_run(word);
        if run == 0 {
            break;
        }
        value = value
            .checked_mul(POW10[run])?
            .checked_add(value_of(word, run))?;
        len += run;
        if run < 8 {
            break;
        }
    }
    (len > 0).then_some((value, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(bytes: &[u8]) -> Option<(u64, usize)> {
        let len = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        let s = std::str::from_utf8(&bytes[..len]).ok()?;
        s.parse::<u64>().ok().map(|v| (v, len))
    }

    /// What token-by-token parsing makes of `n` fields.
    fn tokens(line: &[u8], n: usize) -> Option<Vec<u64>> {
        let text = std::str::from_utf8(line).ok()?;
        let v: Vec<u64> = text
            .split_whitespace()
            .take(n)
            .map_while(|t| t.parse().ok())
            .collect();
        (v.len() == n).then_some(v)
    }

    #[test]
    fn fixed_width_fields_agree_with_tokens_or_decline() {
        let values = [
            0u64,
            7,
            42,
            1_234_567,
            12_345_678,
            99_999_999,
            100_000_000,
            4_294_967_295,
            9_999_999_999,
        ];
        let mut line = Vec::new();
        for v in values {
            line.extend(format!(" {v:>10}").bytes());
        }
        line.extend(b"  IR-PCI-MSI 1-edge");
        let mut out = Vec::new();
        assert_eq!(
            fixed_width_counts(&line, 0, values.len(), &mut out, None),
            Some(0..values.len())
        );
        assert_eq!(out, values);
        // Runs of zeros (taken eight at a time) around counts, and a bad
        // field after a zero run still declines the whole line.
        let mut zeros: Vec<u64> = vec![0; 20];
        zeros.insert(9, 5);
        zeros.push(0);
        let mut line = Vec::new();
        for v in &zeros {
            line.extend(format!(" {v:>10}").bytes());
        }
        let mut out = Vec::new();
        assert!(fixed_width_counts(&line, 0, zeros.len(), &mut out, None).is_some());
        assert_eq!(out, zeros);
        out.clear();
        line[11 * 17 + 10] = b'x';
        assert!(fixed_width_counts(&line, 0, zeros.len(), &mut out, None).is_none());
        assert!(out.is_empty());
        // Fields not laid out the kernel's way: declined, `out` untouched.
        out.clear();
        for bad in [
            &b"12345678901"[..], // no blank in front of the field
            b"  5 1234567",      // two numbers in one field
            b" 12345x7890",
            b"         5 ",  // not right-aligned
            b"          5x", // glued to the next text
            b"  5",          // too short
            b" 1 34567890",
            b" 1234 67890",
        ] {
            assert!(
                fixed_width_counts(bad, 0, 1, &mut out, None).is_none(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
            assert!(out.is_empty());
        }
        // Pseudo-random fields (xorshift): accepted ones agree with tokens.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut f = [b' '; 12];
            for (k, b) in f.iter_mut().enumerate().skip(1) {
                let r = (x >> (k * 5)) & 31;
                *b = match r {
                    0..=11 => b' ',
                    12..=29 => b'0' + (r % 10) as u8,
                    _ => b'x',
                };
            }
            f[11] = b' ';
            let mut got = Vec::new();
            if fixed_width_counts(&f, 0, 1, &mut got, None).is_some() {
                assert_eq!(
                    Some(got),
                    tokens(&f, 1),
                    "{:?}",
                    String::from_utf8_lossy(&f)
                );
            }
        }
    }

    #[test]
    fn agrees_with_str_parse() {
        let fixed: [&[u8]; 16] = [
            b"0",
            b"7 ",
            b"12345678",
            b"123456789",
            b"18446744073709551615",
            b"18446744073709551616",
            b"99999999999999999999",
            b"00000000000000000000000000042",
            b"12x",
            b"x12",
            b"",
            b" 5",
            b"1234567/",
            b"9876543:",
            b"55\xff\xfa",
            b"4294967296\t ",
        ];
        for b in fixed {
            assert_eq!(
                leading_number(b),
                reference(b),
                "{:?}",
                String::from_utf8_lossy(b)
            );
        }
        // Every byte value after a digit run of every length, and pseudo-random
        // tokens (xorshift: deterministic).
        for len in 0..=21usize {
            for next in 0..=255u8 {
                let mut b: Vec<u8> = (0..len).map(|k| b'0' + ((k * 7 + 3) % 10) as u8).collect();
                b.push(next);
                b.extend_from_slice(b"12");
                assert_eq!(leading_number(&b), reference(&b), "{b:?}");
            }
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let text = format!("{} {}", x >> (x % 64), x % 1000);
            let b = text.as_bytes();
            assert_eq!(leading_number(b), reference(b), "{text}");
        }
    }
}
