//! Decimal numbers eight bytes at a time (SWAR: one 64-bit word holds eight
//! ASCII bytes). A 256-CPU `/proc/interrupts` holds ~400k counts; digit by
//! digit, `v = v * 10 + d` is a chain of dependent multiplies, and that chain
//! was most of a full parse. Here up to eight digits cost three multiplies.

const ONES: u64 = 0x0101_0101_0101_0101;

/// How many of the word's bytes, lowest (first in memory) first, are ASCII
/// digits before the first byte that is not.
#[inline]
fn digit_run(word: u64) -> usize {
    let hi = word & (0xF0 * ONES);
    // Low nibble >= 10 sets 0x10 in its own byte; no carry leaves a byte.
    let over = ((word & (0x0F * ONES)) + 0x06 * ONES) & (0xF0 * ONES);
    let not_digit = (hi ^ (0x30 * ONES)) | over;
    // Bit 7 of each byte: set when that byte is non-zero (no cross-byte carry).
    let flags = (((not_digit & (0x7F * ONES)) + 0x7F * ONES) | not_digit) & (0x80 * ONES);
    (flags.trailing_zeros() / 8) as usize
}

/// The value of the word's first `run` bytes (1..=8), all ASCII digits.
#[inline]
fn value_of(word: u64, run: usize) -> u64 {
    // Digits to 0..9 (XOR: no borrow between bytes), and moved up so that the
    // `8 - run` missing leading digits are zero bytes.
    let d = (word ^ (0x30 * ONES)) << (8 * (8 - run));
    // Pairs, then quads, then all eight: the first byte is the most significant.
    let d = (d.wrapping_mul(10) + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
    let d = (d.wrapping_mul(100) + (d >> 16)) & 0x0000_FFFF_0000_FFFF;
    (d.wrapping_mul(10_000) + (d >> 32)) & 0xFFFF_FFFF
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
