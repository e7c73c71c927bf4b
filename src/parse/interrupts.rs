//! `/proc/interrupts`: per-CPU counts per interrupt source, x86 and ARM forms,
//! rows with fewer columns (`ERR:`), and excerpts without the `CPU0 …` header.
//! VFIO's own handlers name the passed-through device and the mode:
//! `vfio-intx(0000:06:00.0)`, `vfio-msi[0](…)`, `vfio-msix[3](…)`.

use super::digits::{Before, fixed_width_counts, leading_number};
use serde::Serialize;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, Serialize)]
pub struct InterruptRow {
    /// `16`, `NMI`, `LOC`, `IPI0`…
    pub label: String,
    /// Counts per CPU column (may be shorter than the CPU count: `ERR:`).
    pub per_cpu: Vec<u64>,
    /// The text after the counts: chip, hwirq-trigger, handler names.
    pub description: String,
    /// The counts were read as the kernel's fixed-width fields, so a changed
    /// line in the next sample may keep the counts of unchanged fields.
    #[serde(skip)]
    fixed_width: bool,
    /// This row's identity, unique for the life of the process (0: none).
    #[serde(skip)]
    id: u64,
    /// Read beside the row `base` of the previous sample: only the columns
    /// `start..end` can differ from it.
    #[serde(skip)]
    moved: Option<MovedSince>,
}

#[derive(Debug, Clone, Copy)]
struct MovedSince {
    base: u64,
    start: u32,
    end: u32,
}

/// Rows are equal when what they say is: not where they came from.
impl PartialEq for InterruptRow {
    fn eq(&self, other: &Self) -> bool {
        self.label == other.label
            && self.per_cpu == other.per_cpu
            && self.description == other.description
            && self.fixed_width == other.fixed_width
    }
}

impl Eq for InterruptRow {}

/// Row ids are handed out a block per parse (a line index within it).
static NEXT_ROW_IDS: AtomicU64 = AtomicU64::new(1);
const IDS_PER_PARSE: u64 = 1 << 24;

impl InterruptRow {
    pub fn total(&self) -> u64 {
        self.per_cpu.iter().sum()
    }

    /// The columns in which this row's counts can differ from `earlier`'s,
    /// when this row was read beside that one (the parse compared their
    /// bytes already); None when that is not known.
    pub fn may_differ_from(&self, earlier: &InterruptRow) -> Option<Range<usize>> {
        let m = self.moved?;
        let end = (m.end as usize).min(self.per_cpu.len());
        (earlier.id != 0 && m.base == earlier.id && earlier.per_cpu.len() == self.per_cpu.len())
            .then(|| (m.start as usize).min(end)..end)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Interrupts {
    /// CPU numbers of the columns (from the header; 0..n when there is none).
    pub cpus: Vec<u32>,
    /// Shared, so that a row whose line did not change between two samples is
    /// the same row (see `parse_interrupts_reusing`).
    pub rows: Vec<Arc<InterruptRow>>,
    /// The line (0-based, in the text parsed) each row came from: a row is
    /// reused only for the line at the same place.
    #[serde(skip)]
    row_lines: Vec<u32>,
    /// The header's column count (None without a header): a different one
    /// means nothing can be reused.
    #[serde(skip)]
    columns: Option<usize>,
    /// Where each line of the text parsed ends (its `\n` or the text's end):
    /// the next parse pairs its lines with these without searching again.
    #[serde(skip)]
    line_ends: Vec<u32>,
    /// The length of the text parsed: `line_ends` serve only text as long.
    #[serde(skip)]
    text_len: usize,
}

/// The counts after `label:` on one line, and where the description starts.
/// A 256-CPU host has ~400k numbers per sample: they are read eight digits at
/// a time (`digits.rs`), not by `str::parse` per token. A token that is not
/// all digits (or overflows) ends the counts, as does reaching `columns`.
/// `before`: the same line in the previous sample (its bytes from the same
/// offset, and its counts), when those were read as fixed-width fields.
/// Returns the counts, where the description starts, and when the counts
/// were fixed-width fields, those that may differ from `before`'s.
fn counts(
    line: &[u8],
    mut i: usize,
    columns: Option<usize>,
    before: Option<Before>,
) -> (Vec<u64>, usize, Option<Range<usize>>) {
    let mut per_cpu = Vec::with_capacity(columns.unwrap_or(8));
    // The kernel prints each count as " %10u": try that layout first.
    if let Some(n) = columns
        && n > 0
        && let Some(moved) = fixed_width_counts(line, i, n, &mut per_cpu, before)
    {
        i += 11 * n;
        while i < line.len() && (line[i] == b' ' || line[i] == b'\t') {
            i += 1;
        }
        return (per_cpu, i, Some(moved));
    }
    loop {
        while i < line.len() && (line[i] == b' ' || line[i] == b'\t') {
            i += 1;
        }
        if i >= line.len() || columns.is_some_and(|n| per_cpu.len() >= n) {
            break;
        }
        let Some((v, len)) = leading_number(&line[i..]) else {
            break;
        };
        let end = i + len;
        if !matches!(line.get(end), None | Some(b' ' | b'\t')) {
            break;
        }
        per_cpu.push(v);
        i = end;
    }
    (per_cpu, i, None)
}

pub fn parse_interrupts(text: &str) -> Interrupts {
    parse_interrupts_reusing(text, None)
}

/// The lines of `text` (without the `\n`), each with whether it is
/// byte-for-byte the line at the same index in `old`. The old text is not
/// searched: where its lines end was kept when it was parsed (`line_ends`).
/// A new line is first assumed to be as long as the old one (counts are
/// padded to a fixed width, so it usually is): comparing it with the old
/// line from both ends finds what changed and proves where it ends, and
/// only the changed middle is searched for a newline. Otherwise one SIMD
/// newline search finds its end.
struct PairedLines<'a> {
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
struct Paired {
    start: usize,
    end: usize,
    /// (start, end) of the old line, when there is one.
    old: Option<(usize, usize)>,
    /// Byte-for-byte the old line.
    same: bool,
    /// How many bytes from the start the two lines have in common.
    equal_prefix: usize,
    /// How many bytes at the end the two lines have in common, when they are
    /// equally long (0 otherwise, or when not compared).
    equal_suffix: usize,
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

/// `parse_interrupts`, reusing the rows of `prev` (parsed from `prev_text`)
/// whose line is byte-for-byte the same: between two samples most of a big
/// host's lines do not change, and comparing bytes is much cheaper than
/// parsing 256 numbers. A changed header (CPU hot-plug) disables the reuse.
pub fn parse_interrupts_reusing(text: &str, prev: Option<(&str, &Interrupts)>) -> Interrupts {
    let mut out = Interrupts::default();
    let ids = NEXT_ROW_IDS.fetch_add(IDS_PER_PARSE, Ordering::Relaxed);
    let mut columns: Option<usize> = None;
    let mut prev = prev;
    let lines = PairedLines {
        new: text.as_bytes(),
        old: prev.map(|(t, _)| t.as_bytes()),
        old_ends: prev
            .filter(|(t, p)| t.len() == p.text_len)
            .map_or(&[], |(_, p)| p.line_ends.as_slice()),
        pos: 0,
        old_pos: 0,
        index: 0,
    };
    // The old rows are walked alongside the lines: `old_at` is the first old
    // row whose line is not before the current one.
    let mut old_at = 0;
    let mut header_checked = false;
    for (
        k,
        Paired {
            start,
            end,
            old,
            same,
            equal_prefix,
            equal_suffix,
        },
    ) in lines.enumerate()
    {
        let k = u32::try_from(k).unwrap_or(u32::MAX);
        out.line_ends.push(u32::try_from(end).unwrap_or(u32::MAX));
        // Split at ASCII `\n`: always a char boundary (no second UTF-8 scan).
        let Some(line) = text.get(start..end) else {
            continue;
        };
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if columns.is_none() && t.starts_with("CPU") {
            if !same {
                prev = None;
            }
            out.cpus = t
                .split_whitespace()
                .filter_map(|c| c.strip_prefix("CPU").and_then(|n| n.parse().ok()))
                .collect();
            columns = Some(out.cpus.len());
            continue;
        }
        let Some(colon) = t.find(':') else {
            continue;
        };
        let label = &t[..colon];
        if label.contains(char::is_whitespace) {
            continue;
        }
        if !header_checked {
            header_checked = true;
            if prev.is_some_and(|(_, p)| p.columns != columns) {
                prev = None;
            }
        }
        // The old row of the old line at this place, if that line made one.
        let old_row = prev.and_then(|(_, p)| {
            while p.row_lines.get(old_at).is_some_and(|&l| l < k) {
                old_at += 1;
            }
            (p.row_lines.get(old_at) == Some(&k))
                .then(|| p.rows.get(old_at))
                .flatten()
                .filter(|r| r.label == label)
        });
        if same && let Some(row) = old_row {
            out.rows.push(Arc::clone(row));
            out.row_lines.push(k);
            continue;
        }
        // A changed line: its fields start where the old line's did (same
        // label, same indent), so unchanged fields keep their old counts.
        let lead = line.len() - line.trim_start().len();
        let before = old_row.filter(|r| r.fixed_width).and_then(|r| {
            let (os, oe) = old?;
            let old_line = prev?.0.get(os..oe)?;
            let old_t = old_line.trim();
            if old_t.get(..=colon)? != &t[..=colon] {
                return None;
            }
            let bytes = old_t
                .as_bytes()
                .get(colon + 1..)?
                .get(..r.per_cpu.len() * 11)?;
            let fields_at = lead + colon + 1;
            Some(Before {
                bytes,
                counts: &r.per_cpu,
                equal: equal_prefix.saturating_sub(fields_at),
                // The equal tail says where the fields are equal only when
                // they start at the same place in both lines.
                equal_from: if old_line.len() - old_line.trim_start().len() == lead {
                    (line.len() - equal_suffix.min(line.len())).saturating_sub(fields_at)
                } else {
                    bytes.len()
                },
            })
        });
        let base = before.and(old_row).map(|r| r.id);
        let (per_cpu, desc_at, fixed) = counts(t.as_bytes(), colon + 1, columns, before);
        let rest = t.get(desc_at..).unwrap_or("");
        let description = if rest.contains("  ") || rest.contains('\t') {
            rest.split_whitespace().collect::<Vec<_>>().join(" ")
        } else {
            rest.to_string()
        };
        let moved = base.zip(fixed.clone()).and_then(|(base, m)| {
            Some(MovedSince {
                base,
                start: u32::try_from(m.start).ok()?,
                end: u32::try_from(m.end).ok()?,
            })
        });
        out.rows.push(Arc::new(InterruptRow {
            label: label.to_string(),
            fixed_width: fixed.is_some(),
            per_cpu,
            description,
            id: if u64::from(k) < IDS_PER_PARSE {
                ids + u64::from(k)
            } else {
                0
            },
            moved,
        }));
        out.row_lines.push(k);
    }
    out.columns = columns;
    out.text_len = text.len();
    if out.cpus.is_empty() {
        let widest = out.rows.iter().map(|r| r.per_cpu.len()).max().unwrap_or(0);
        out.cpus = (0..u32::try_from(widest).unwrap_or(0)).collect();
    }
    out
}

/// How a passed-through device signals: legacy INTx or message-signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VfioIrqMode {
    Intx,
    Msi,
    Msix,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VfioIrq {
    pub irq: String,
    pub mode: VfioIrqMode,
    /// PCI address of the passed-through device.
    pub address: String,
    pub total: u64,
}

/// The VFIO handlers named in one row's description: (mode, device address).
/// A shared legacy line can carry more than one.
pub fn vfio_handlers(description: &str) -> impl Iterator<Item = (VfioIrqMode, &str)> {
    description.split_whitespace().filter_map(|word| {
        let (mode, rest) = if let Some(r) = word.strip_prefix("vfio-intx") {
            (VfioIrqMode::Intx, r)
        } else if let Some(r) = word.strip_prefix("vfio-msix") {
            (VfioIrqMode::Msix, r)
        } else if let Some(r) = word.strip_prefix("vfio-msi") {
            (VfioIrqMode::Msi, r)
        } else {
            return None;
        };
        let address = rest
            .rsplit_once('(')
            .map_or("", |(_, a)| a.trim_end_matches(')'));
        Some((mode, address))
    })
}

/// The VFIO rows: which device, which mode, how many interrupts so far.
pub fn vfio_irqs(interrupts: &Interrupts) -> Vec<VfioIrq> {
    let mut out = Vec::new();
    for row in &interrupts.rows {
        for (mode, address) in vfio_handlers(&row.description) {
            out.push(VfioIrq {
                irq: row.label.clone(),
                mode,
                address: address.to_string(),
                total: row.total(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/listings/");
        let text = std::fs::read_to_string(format!("{path}{name}")).unwrap_or_default();
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn unchanged_lines_reuse_their_rows() {
        let a = listing("intel-n100-minipc-proc-interrupts.txt");
        let pa = parse_interrupts(&a);
        // One line changes.
        let b = a.replace("Local timer interrupts", "Local timer interrupts!");
        assert_ne!(a, b);
        let pb = parse_interrupts_reusing(&b, Some((&a, &pa)));
        assert_eq!(pb, parse_interrupts(&b), "same result as a full parse");
        let shared = pa
            .rows
            .iter()
            .zip(&pb.rows)
            .filter(|(x, y)| Arc::ptr_eq(x, y))
            .count();
        assert_eq!(
            shared,
            pa.rows.len() - 1,
            "all rows but the changed one are reused"
        );
        // A different header (CPU hot-plug) parses everything again.
        let c = a.replacen("CPU3", "CPU4", 1);
        let pc = parse_interrupts_reusing(&c, Some((&a, &pa)));
        assert!(
            pc.rows
                .iter()
                .zip(&pa.rows)
                .all(|(x, y)| !Arc::ptr_eq(x, y))
        );
        assert_eq!(pc, parse_interrupts(&c));
    }

    #[test]
    fn equal_prefix_agrees_with_byte_by_byte() {
        let base: Vec<u8> = (0..700u32).map(|i| b'a' + (i * 7 % 26) as u8).collect();
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 130, 255, 256, 257, 300, 700] {
            for at in [
                0, 1, 7, 8, 63, 64, 65, 129, 200, 255, 256, 257, 299, 520, 699,
            ] {
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
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 130, 255, 256, 257, 300, 700] {
            for at in [
                0, 1, 7, 8, 63, 64, 65, 129, 200, 255, 256, 257, 299, 520, 699,
            ] {
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

    /// Lines are first assumed as long as before: a newline moved inside the
    /// changed bytes, a line that grew or shrank, and old line ends that do
    /// not belong to the old text all still give the full parse's answer.
    #[test]
    fn assumed_line_lengths_are_proven_or_dropped() {
        let a = "CPU0 CPU1\n 1:          5          7  x\n 2:          0          0  y\n";
        let pa = parse_interrupts(a);
        for b in [
            // Same length overall, but the first line is now two.
            "CPU0 CPU1\n 1:          5\n         7  x 2:          0          0  y\n",
            // The first line one byte longer, the second one shorter.
            "CPU0 CPU1\n 1:          5          7  xx\n 2:          0          0  \n",
            "CPU0 CPU1\n 1:          6          7  x\n 2:          0          0  y",
            "CPU0 CPU1\n 1:          6          7  x\n",
        ] {
            assert_eq!(
                parse_interrupts_reusing(b, Some((a, &pa))),
                parse_interrupts(b),
                "{b:?}"
            );
        }
        // An indent that changed by a field's width, the line as long as
        // before: the equal tail is not where the old fields were.
        let a2 = "CPU0 CPU1\n             1:          5          7  x";
        let b2 = "CPU0 CPU1\n  1:          9          5          7  x";
        assert_eq!(a2.len(), b2.len());
        let p2 = parse_interrupts(a2);
        assert_eq!(
            parse_interrupts_reusing(b2, Some((a2, &p2))),
            parse_interrupts(b2)
        );
        // Rows parsed from other text: wrong, but never a panic.
        let other = parse_interrupts(&listing("intel-n100-minipc-proc-interrupts.txt"));
        let _ = parse_interrupts_reusing(a, Some((a, &other)));
        let _ = parse_interrupts_reusing(a, Some(("", &other)));
        // Kept line ends of other text as long, one skipping a newline.
        let x = "C\nx\nA:          1  d";
        let y = "CPU\nA:          1  d";
        assert_eq!(x.len(), y.len());
        let _ = parse_interrupts_reusing(x, Some((x, &parse_interrupts(y))));
    }

    /// A kernel-format listing of `cpus` columns from `counts[line][cpu]`;
    /// `None` prints a field that is not a count.
    fn kernel_listing(counts: &[Vec<Option<u64>>]) -> String {
        let cpus = counts.first().map_or(0, Vec::len);
        let mut text: String = (0..cpus)
            .map(|c| format!("{:>11}", format!("CPU{c}")))
            .collect();
        for (l, row) in counts.iter().enumerate() {
            text.push_str(&format!("\n{l:>4}:"));
            for c in row {
                match c {
                    Some(v) => text.push_str(&format!(" {v:>10}")),
                    None => text.push_str("    1 2 3 4"),
                }
            }
            text.push_str(&format!("  IR-PCI-MSI {l}-edge      dev{l}"));
        }
        text
    }

    #[test]
    fn changed_lines_keep_unchanged_fields_and_agree_with_a_full_parse() {
        // 44 CPUs (groups of eight and a partial one), 30 lines; each step
        // bumps a few counts, sometimes spoils a field (token parsing) and
        // mends it later, every tenth step moves every count of one line (a
        // local timer: the comparison gives up and parses), and the samples
        // are chained like the monitor does.
        let mut counts: Vec<Vec<Option<u64>>> = (0..30)
            .map(|l| {
                (0..44)
                    .map(|c| Some(((l * 7 + c) % 5) as u64 * 1000))
                    .collect()
            })
            .collect();
        let mut text = kernel_listing(&counts);
        let mut parsed = parse_interrupts(&text);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for step in 0..300 {
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (l, c) = ((x % 30) as usize, ((x >> 8) % 44) as usize);
                counts[l][c] = match (x >> 16) % 9 {
                    0 => None,
                    1 => Some(4_294_967_295),
                    _ => Some(counts[l][c].unwrap_or(0) + (x >> 24) % 100_000),
                };
            }
            if step % 10 == 0 {
                for c in counts[step % 30].iter_mut().flatten() {
                    *c += 1 + step as u64;
                }
            }
            let next = kernel_listing(&counts);
            let reused = parse_interrupts_reusing(&next, Some((&text, &parsed)));
            assert_eq!(reused, parse_interrupts(&next), "step {step}");
            for (row, want) in reused.rows.iter().zip(&counts) {
                if want.iter().all(Option::is_some) {
                    let want: Vec<u64> = want.iter().flatten().copied().collect();
                    assert_eq!(row.per_cpu, want, "step {step}, line {}", row.label);
                }
            }
            (text, parsed) = (next, reused);
        }
    }

    #[test]
    fn reuse_needs_the_same_line_and_the_same_header() {
        let pairs = [
            // A line that makes no row before repeated labels: the old row of
            // the second `A` must not serve the first.
            (
                "CPU0\nx\n A:          1  p\n A:          2  q",
                "CPU0\n A:          7  p\n A:          1  q",
            ),
            ("CPU0\nx\n A:          1  p", "CPU0\n A:          1  p"),
            // The header went missing: the counts are not cut at one column.
            ("CPU0\n A: 1 2 desc", "#\n A: 1 2 desc"),
            (
                "CPU0 CPU1\n A:          1          2  d",
                "CPU0\n A:          1          2  d",
            ),
        ];
        for (a, b) in pairs {
            let pa = parse_interrupts(a);
            assert_eq!(
                parse_interrupts_reusing(b, Some((a, &pa))),
                parse_interrupts(b),
                "{a:?} then {b:?}"
            );
        }
    }

    #[test]
    fn reuse_survives_inserted_removed_and_widened_lines() {
        let a = listing("intel-n100-minipc-proc-interrupts.txt");
        let pa = parse_interrupts(&a);
        let lines: Vec<&str> = a.lines().collect();
        let mut inserted = lines.clone();
        inserted.insert(
            5,
            " 99:  1  2  3  4  IR-PCI-MSI 1-edge  vfio-msix[0](0000:01:00.0)",
        );
        let mut removed = lines.clone();
        removed.remove(7);
        let widened = a.replacen("       283 ", "   1234567283 ", 1);
        assert_ne!(widened, a);
        for b in [
            inserted.join("\n"),
            removed.join("\n"),
            widened,
            a.replace('\n', "\r\n"),
            format!("{a}\n\n"),
            String::new(),
        ] {
            assert_eq!(
                parse_interrupts_reusing(&b, Some((&a, &pa))),
                parse_interrupts(&b),
                "reuse gives the full parse's answer"
            );
        }
    }

    /// Counts the plain way: whitespace tokens after the label, up to the
    /// column count, while they are numbers.
    fn reference_counts(text: &str) -> Vec<Vec<u64>> {
        let mut columns = None;
        let mut out = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            if columns.is_none() && t.starts_with("CPU") {
                columns = Some(t.split_whitespace().count());
                continue;
            }
            let Some((label, rest)) = t.split_once(':') else {
                continue;
            };
            if label.is_empty() || label.contains(char::is_whitespace) {
                continue;
            }
            out.push(
                rest.split_whitespace()
                    .take(columns.unwrap_or(usize::MAX))
                    .map_while(|x| x.parse().ok())
                    .collect(),
            );
        }
        out
    }

    #[test]
    fn fixed_width_and_token_parsing_agree_on_real_text() {
        let mut texts: Vec<String> = [
            "intel-n100-minipc-proc-interrupts.txt",
            "apple-silicon-asahi-proc-interrupts.txt",
            "x86-128cpu-server-vfio-msix-interrupts-excerpt.txt",
        ]
        .iter()
        .map(|n| listing(n))
        .collect();
        // Counts past 8 and 10 digits (long-running hosts), laid out as the kernel does.
        texts.push(format!(
            "{:>9}{:>11}{:>11}\n LOC: {:>10} {:>10} {:>10}   Local timer interrupts\n  9: {:>10} {:>10} {:>10}   IR-IO-APIC    9-fasteoi   acpi\nERR: {:>10}\n",
            "CPU0", "CPU1", "CPU2", 123_456_789u64, 4_294_967_295u64, 0, 99_999_999_999u64, 12, 3, 7
        ));
        for text in &texts {
            let parsed: Vec<Vec<u64>> = parse_interrupts(text)
                .rows
                .iter()
                .map(|r| r.per_cpu.clone())
                .collect();
            assert_eq!(parsed, reference_counts(text), "{text}");
        }
    }

    #[test]
    fn x86_n100() {
        let i = parse_interrupts(&listing("intel-n100-minipc-proc-interrupts.txt"));
        assert_eq!(i.cpus, vec![0, 1, 2, 3]);
        let ish = i.rows.iter().find(|r| r.label == "26").unwrap();
        assert_eq!(ish.per_cpu, vec![0, 0, 283, 0]);
        assert!(ish.description.contains("intel_ish_ipc"));
        let err = i.rows.iter().find(|r| r.label == "ERR").unwrap();
        assert_eq!(err.per_cpu.len(), 1);
        assert!(i.rows.iter().all(|r| r.per_cpu.len() <= 4));
    }

    #[test]
    fn arm_asahi() {
        let i = parse_interrupts(&listing("apple-silicon-asahi-proc-interrupts.txt"));
        assert_eq!(i.cpus.len(), 8);
        let timer = i
            .rows
            .iter()
            .find(|r| r.description.contains("arch_timer"))
            .unwrap();
        assert_eq!(timer.per_cpu[0], 7755597);
        assert!(timer.description.starts_with("AIC-FIQ"));
        let ipi = i.rows.iter().find(|r| r.label == "IPI0").unwrap();
        assert_eq!(ipi.description, "Rescheduling interrupts");
    }

    #[test]
    fn excerpt_without_header_128_cpus() {
        let i = parse_interrupts(&listing(
            "x86-128cpu-server-vfio-msix-interrupts-excerpt.txt",
        ));
        assert_eq!(i.cpus.len(), 128);
        let v = vfio_irqs(&i);
        assert_eq!(v.len(), 5);
        assert!(
            v.iter()
                .all(|x| x.mode == VfioIrqMode::Msix && x.address == "0000:c8:00.0")
        );
    }

    #[test]
    fn intx_is_recognised_and_garbage_is_harmless() {
        let text = "           CPU0       CPU1\n  16:     120034          0   IO-APIC   16-fasteoi   vfio-intx(0000:06:00.0)\n  40:          5          7   PCI-MSI 524288-edge      vfio-msi[0](0000:01:00.0)\n";
        let v = vfio_irqs(&parse_interrupts(text));
        assert_eq!(v[0].mode, VfioIrqMode::Intx);
        assert_eq!(v[0].address, "0000:06:00.0");
        assert_eq!(v[0].total, 120034);
        assert_eq!(v[1].mode, VfioIrqMode::Msi);
        assert!(
            parse_interrupts("\u{0}\u{1} ::: garbage\nno colon here")
                .rows
                .len()
                <= 1
        );
        // Odd tokens end the counts; overflow is not a count.
        let odd = parse_interrupts(
            "CPU0 CPU1 CPU2\n 9: 12 34x 5 IO-APIC\n10: 99999999999999999999 1 acpi\nERR: 7\n",
        );
        assert_eq!(odd.rows[0].per_cpu, vec![12]);
        assert_eq!(odd.rows[0].description, "34x 5 IO-APIC");
        assert!(odd.rows[1].per_cpu.is_empty());
        assert_eq!(odd.rows[2].per_cpu, vec![7]);
        assert!(odd.rows[2].description.is_empty());
    }
}
