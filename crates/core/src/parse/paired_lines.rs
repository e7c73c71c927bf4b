//! Two versions of a text, line by line: each line of the new one with the
//! line at the same place in the old one, whether it is the same, and how
//! far from each end the two agree. `/proc/interrupts` between two samples
//! is the use: most lines repeat, a changed one differs in a field or two.

/// The lines of `new` (without the `\n`), each with whether it is
/// byte-for-byte the line at the same index in `old`. The old text is not
/// searched: where its lines end is given (`Interrupts` keeps them from the
/// parse).
/// A new line is first assumed to be as long as the old one (counts are
/// padded to a fixed width, so it usually is): comparing it with the old
/// line from both ends finds what changed and proves where it ends, and
/// only the changed middle is searched for a newline. Otherwise one SIMD
/// newline search finds its end.
pub struct PairedLines<'a> {
    new: &'a [u8],
    old: Option<&'a [u8]>,
    /// Where each line of `old` ends (its `\n`, or the end of the text);
    /// where they are missing or do not fit the text the old text is searched
    /// instead. Ends from other text of the same length give wrong lines,
    /// never a panic.
    old_ends: &'a [u32],
    pos: usize,
    old_pos: usize,
    index: usize,
}

/// One line of the new text: where it is, and the line at the same index in
/// the old text.
pub struct Paired {
    pub start: usize,
    pub end: usize,
    /// (start, end) of the old line, when there is one.
    pub old: Option<(usize, usize)>,
    /// Byte-for-byte the old line.
    pub same: bool,
    /// How many bytes from the start the two lines have in common.
    pub equal_prefix: usize,
    /// How many bytes at the end the two lines have in common, when they are
    /// equally long (0 otherwise, or when not compared).
    pub equal_suffix: usize,
}

/// How many leading bytes `a` and `b` have in common: 256-byte blocks
/// compared at once (a vectorised `bcmp`: an unchanged line costs a handful
/// of calls), the differing block eight bytes at a time.
fn equal_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while let (Some(x), Some(y)) = (
        a.get(i..).and_then(|r| r.first_chunk::<8>()),
        b.get(i..).and_then(|r| r.first_chunk::<8>()),
    ) {
        let diff = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        if diff != 0 {
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// How many trailing bytes `a` and `b` have in common, `equal_prefix` from
/// the other end.
fn equal_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = n;
    while i >= BLOCK && a[i - BLOCK..i] == b[i - BLOCK..i] {
        i -= BLOCK;
    }
    while i >= 8 {
        let (Some(x), Some(y)) = (
            a[i - 8..i].first_chunk::<8>(),
            b[i - 8..i].first_chunk::<8>(),
        ) else {
            break;
        };
        // The last byte in memory is the word's most significant one.
        let diff = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        if diff != 0 {
            return n - i + (diff.leading_zeros() / 8) as usize;
        }
        i -= 8;
    }
    while i > 0 && a[i - 1] == b[i - 1] {
        i -= 1;
    }
    n - i
}

impl<'a> PairedLines<'a> {
    /// The lines of `new`, each paired with the line at the same index in
    /// `old`, whose line ends (as `Interrupts` keeps them) are `old_ends`.
    pub fn new(new: &'a [u8], old: Option<&'a [u8]>, old_ends: &'a [u32]) -> Self {
        PairedLines {
            new,
            old,
            old_ends,
            pos: 0,
            old_pos: 0,
            index: 0,
        }
    }
}

impl PairedLines<'_> {
    /// Where the old line at `old_start` (the `index`th) ends: the kept end
    /// when it is one (a `\n` or the end of the text), else searched.
    fn old_end(&self, old: &[u8], old_start: usize) -> usize {
        let kept = self.old_ends.get(self.index).map(|&e| e as usize);
        match kept {
            Some(e)
                if e >= old_start && e <= old.len() && matches!(old.get(e), None | Some(b'\n')) =>
            {
                e
            }
            _ => {
                let rest = old.get(old_start..).unwrap_or(&[]);
                old_start + memchr::memchr(b'\n', rest).unwrap_or(rest.len())
            }
        }
    }
}

impl Iterator for PairedLines<'_> {
    type Item = Paired;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.new.len() {
            return None;
        }
        let rest = &self.new[self.pos..];
        let start = self.pos;
        let mut paired = Paired {
            start,
            end: start,
            old: None,
            same: false,
            equal_prefix: 0,
            equal_suffix: 0,
        };
        let old = self.old.filter(|o| self.old_pos < o.len());
        let Some(old) = old else {
            // No old text (left): every line is new.
            self.old = None;
            let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            self.pos += len + 1;
            paired.end = start + len;
            return Some(paired);
        };
        let old_start = self.old_pos;
        let old_end = self.old_end(old, old_start);
        let old_line = &old[old_start..old_end];
        let n = old_line.len();
        self.old_pos = old_end + 1;
        self.index += 1;
        paired.old = Some((old_start, old_end));
        // As long as the old line? Its bytes before the first difference and
        // after the last one are the old line's (no newline there).
        let mut len = None;
        if rest.len() == n || rest.get(n) == Some(&b'\n') {
            let p = equal_prefix(old_line, &rest[..n]);
            if p == n {
                paired.same = true;
                len = Some(n);
            } else {
                let s = equal_suffix(&old_line[p..], &rest[p..n]);
                if memchr::memchr(b'\n', &rest[p..n - s]).is_none() {
                    (paired.equal_prefix, paired.equal_suffix) = (p, s);
                    len = Some(n);
                }
            }
        }
        let len = len.unwrap_or_else(|| {
            let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            paired.equal_prefix = equal_prefix(old_line, &rest[..len]);
            paired.same = paired.equal_prefix == len && len == n;
            len
        });
        if paired.same {
            paired.equal_prefix = len;
            paired.equal_suffix = len;
        }
        self.pos += len + 1;
        paired.end = start + len;
        Some(paired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Line lengths and the byte changed in them: around the eight-byte
    /// words and the 256-byte blocks the compares step by.
    const LENS: [usize; 14] = [0, 1, 7, 8, 9, 63, 64, 65, 130, 255, 256, 257, 300, 700];
    const CHANGED_AT: [usize; 15] = [
        0, 1, 7, 8, 63, 64, 65, 129, 200, 255, 256, 257, 299, 520, 699,
    ];

    #[test]
    fn equal_prefix_agrees_with_byte_by_byte() {
        let base: Vec<u8> = (0..700u32).map(|i| b'a' + (i * 7 % 26) as u8).collect();
        for len in LENS {
            for at in CHANGED_AT {
                let a = &base[..len];
                let mut b = base.clone();
                if at < b.len() {
                    b[at] = b'#';
                }
                for b in [&b[..], &b[..len.min(at)]] {
                    let want = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                    assert_eq!(equal_prefix(a, b), want, "len {len}, at {at}");
                    assert_eq!(equal_prefix(b, a), want, "len {len}, at {at}");
                }
            }
        }
    }

    #[test]
    fn equal_suffix_agrees_with_byte_by_byte() {
        let base: Vec<u8> = (0..700u32).map(|i| b'a' + (i * 11 % 26) as u8).collect();
        for len in LENS {
            for at in CHANGED_AT {
                let a = &base[..len];
                let mut b = a.to_vec();
                if at < b.len() {
                    b[at] = b'#';
                }
                // Equally long, and one cut short at the front.
                for b in [&b[..], &b[len.min(at)..]] {
                    let want = a
                        .iter()
                        .rev()
                        .zip(b.iter().rev())
                        .take_while(|(x, y)| x == y)
                        .count();
                    assert_eq!(equal_suffix(a, b), want, "len {len}, at {at}");
                    assert_eq!(equal_suffix(b, a), want, "len {len}, at {at}");
                }
            }
        }
    }
}
