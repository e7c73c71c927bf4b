//! `/proc/interrupts`: per-CPU counts per interrupt source, x86 and ARM forms,
//! rows with fewer columns (`ERR:`), and excerpts without the `CPU0 …` header.
//! VFIO's own handlers name the passed-through device and the mode:
//! `vfio-intx(0000:06:00.0)`, `vfio-msi[0](…)`, `vfio-msix[3](…)`.

use super::digits::{fixed_width_counts, leading_number};
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
}

/// The counts after `label:` on one line, and where the description starts.
/// A 256-CPU host has ~400k numbers per sample: they are read eight digits at
/// a time (`digits.rs`), not by `str::parse` per token. A token that is not
/// all digits (or overflows) ends the counts, as does reaching `columns`.
fn counts(line: &[u8], mut i: usize, columns: Option<usize>) -> (Vec<u64>, usize) {
    let mut per_cpu = Vec::with_capacity(columns.unwrap_or(8));
    // The kernel prints each count as " %10u": try that layout first.
    if let Some(n) = columns
        && n > 0
        && fixed_width_counts(line, i, n, &mut per_cpu)
    {
        i += 11 * n;
        while i < line.len() && (line[i] == b' ' || line[i] == b'\t') {
            i += 1;
        }
        return (per_cpu, i);
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
    (per_cpu, i)
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

impl Iterator for PairedLines<'_> {
    /// (start, end) of the line in the new text, and whether it is unchanged.
    type Item = (usize, usize, bool);

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.new.len() {
            return None;
        }
        let rest = &self.new[self.pos..];
        let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..len];
        let start = self.pos;
        self.pos += len + 1;
        let Some(old) = self.old else {
            return Some((start, start + len, false));
        };
        let old_rest = old.get(self.old_pos..).unwrap_or(&[]);
        let same =
            old_rest.get(..len) == Some(line) && matches!(old_rest.get(len), None | Some(b'\n'));
        if same {
            self.old_pos += len + 1;
        } else if old_rest.is_empty() {
            self.old = None;
        } else {
            self.old_pos += memchr::memchr(b'\n', old_rest).map_or(old_rest.len(), |e| e + 1);
        }
        Some((start, start + len, same))
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
    for (start, end, same) in lines {
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
        if same
            && let Some(row) = prev
                .and_then(|(_, p)| p.rows.get(out.rows.len()))
                .filter(|r| r.label == label)
        {
            out.rows.push(Arc::clone(row));
            continue;
        }
        let (per_cpu, desc_at) = counts(t.as_bytes(), colon + 1, columns);
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
        }));
    }
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
