//! `/proc/interrupts`: per-CPU counts per interrupt source, x86 and ARM forms,
//! rows with fewer columns (`ERR:`), and excerpts without the `CPU0 …` header.
//! VFIO's own handlers name the passed-through device and the mode:
//! `vfio-intx(0000:06:00.0)`, `vfio-msi[0](…)`, `vfio-msix[3](…)`.

use super::digits::{Before, fixed_width_counts, leading_number};
use serde::Serialize;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
}

impl InterruptRow {
    pub fn total(&self) -> u64 {
        self.per_cpu.iter().sum()
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
}

/// The counts after `label:` on one line, and where the description starts.
/// A 256-CPU host has ~400k numbers per sample: they are read eight digits at
/// a time (`digits.rs`), not by `str::parse` per token. A token that is not
/// all digits (or overflows) ends the counts, as does reaching `columns`.
/// `before`: the same line in the previous sample (its bytes from the same
/// offset, and its counts), when those were read as fixed-width fields.
/// Returns the counts, where the description starts, and whether the counts
/// were fixed-width fields.
fn counts(
    line: &[u8],
    mut i: usize,
    columns: Option<usize>,
    before: Option<Before>,
) -> (Vec<u64>, usize, bool) {
    let mut per_cpu = Vec::with_capacity(columns.unwrap_or(8));
    // The kernel prints each count as " %10u": try that layout first.
    if let Some(n) = columns
        && n > 0
        && fixed_width_counts(line, i, n, &mut per_cpu, before)
    {
        i += 11 * n;
        while i < line.len() && (line[i] == b' ' || line[i] == b'\t') {
            i += 1;
        }
        return (per_cpu, i, true);
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
    (per_cpu, i, false)
}

pub fn parse_interrupts(text: &str) -> Interrupts {
    parse_interrupts_reusing(text, None)
}

/// The lines of `text` (without the `\n`), each with whether it is
/// byte-for-byte the line at the same index in `old`. One SIMD newline search
/// over the new text; the old text is only compared, not searched, while the
/// lines keep matching (the usual case: counts are padded to a fixed width).
struct PairedLines<'a> {
    new: &'a [u8],
    old: Option<&'a [u8]>,
    pos: usize,
    old_pos: usize,
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

impl Iterator for PairedLines<'_> {
    type Item = Paired;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.new.len() {
            return None;
        }
        let rest = &self.new[self.pos..];
        let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..len];
        let start = self.pos;
        self.pos += len + 1;
        let mut paired = Paired {
            start,
            end: start + len,
            old: None,
            same: false,
            equal_prefix: 0,
        };
        let Some(old) = self.old else {
            return Some(paired);
        };
        let old_start = self.old_pos;
        let old_rest = old.get(old_start..).unwrap_or(&[]);
        paired.equal_prefix = equal_prefix(old_rest, line);
        paired.same = paired.equal_prefix == len && matches!(old_rest.get(len), None | Some(b'\n'));
        if paired.same {
            self.old_pos += len + 1;
            paired.old = Some((old_start, old_start + len));
        } else if old_rest.is_empty() {
            self.old = None;
        } else {
            // The bytes before the first difference are the new line's (no
            // newline there): the old line's end is searched after it only.
            let p = paired.equal_prefix;
            let old_len = memchr::memchr(b'\n', &old_rest[p..]).map_or(old_rest.len(), |e| p + e);
            self.old_pos += old_len + 1;
            paired.old = Some((old_start, old_start + old_len));
        }
        Some(paired)
    }
}

/// `parse_interrupts`, reusing the rows of `prev` (parsed from `prev_text`)
/// whose line is byte-for-byte the same: between two samples most of a big
/// host's lines do not change, and comparing bytes is much cheaper than
/// parsing 256 numbers. A changed header (CPU hot-plug) disables the reuse.
pub fn parse_interrupts_reusing(text: &str, prev: Option<(&str, &Interrupts)>) -> Interrupts {
    let mut out = Interrupts::default();
    let mut columns: Option<usize> = None;
    let mut prev = prev;
    let lines = PairedLines {
        new: text.as_bytes(),
        old: prev.map(|(t, _)| t.as_bytes()),
        pos: 0,
        old_pos: 0,
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
        },
    ) in lines.enumerate()
    {
        let k = u32::try_from(k).unwrap_or(u32::MAX);
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
            let old_t = prev?.0.get(os..oe)?.trim();
            if old_t.get(..=colon)? != &t[..=colon] {
                return None;
            }
            let bytes = old_t
                .as_bytes()
                .get(colon + 1..)?
                .get(..r.per_cpu.len() * 11)?;
            Some(Before {
                bytes,
                counts: &r.per_cpu,
                equal: equal_prefix.saturating_sub(lead + colon + 1),
            })
        });
        let (per_cpu, desc_at, fixed_width) = counts(t.as_bytes(), colon + 1, columns, before);
        let rest = t.get(desc_at..).unwrap_or("");
        let description = if rest.contains("  ") || rest.contains('\t') {
            rest.split_whitespace().collect::<Vec<_>>().join(" ")
        } else {
            rest.to_string()
        };
        out.rows.push(Arc::new(InterruptRow {
            label: label.to_string(),
            per_cpu,
            description,
            fixed_width,
        }));
        out.row_lines.push(k);
    }
    out.columns = columns;
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
