//! `/proc/interrupts`: per-CPU counts per interrupt source, x86 and ARM forms,
//! rows with fewer columns (`ERR:`), and excerpts without the `CPU0 …` header.
//! VFIO's own handlers name the passed-through device and the mode:
//! `vfio-intx(0000:06:00.0)`, `vfio-msi[0](…)`, `vfio-msix[3](…)`.

use super::digits::{Before, fixed_width_counts, leading_number};
use super::paired_lines::{Paired, PairedLines};
use serde::{Deserialize, Serialize};
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
    /// The count over all CPUs. Each count is a u64 the kernel wraps; their
    /// sum can pass u64 (hostile text, or a long-lived host): it stops at
    /// `u64::MAX` rather than wrap to a small, wrong total (or panic).
    pub fn total(&self) -> u64 {
        self.per_cpu.iter().fold(0u64, |a, b| a.saturating_add(*b))
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

/// `parse_interrupts`, reusing the rows of `prev` (parsed from `prev_text`)
/// whose line is byte-for-byte the same: between two samples most of a big
/// host's lines do not change, and comparing bytes is much cheaper than
/// parsing 256 numbers. A changed header (CPU hot-plug) disables the reuse.
pub fn parse_interrupts_reusing(text: &str, prev: Option<(&str, &Interrupts)>) -> Interrupts {
    let mut out = Interrupts::default();
    let ids = NEXT_ROW_IDS.fetch_add(IDS_PER_PARSE, Ordering::Relaxed);
    let mut columns: Option<usize> = None;
    let mut prev = prev;
    let lines = PairedLines::new(
        text.as_bytes(),
        prev.map(|(t, _)| t.as_bytes()),
        prev.filter(|(t, p)| t.len() == p.text_len)
            .map_or(&[], |(_, p)| p.line_ends.as_slice()),
    );
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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
mod tests;
