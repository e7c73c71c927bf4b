//! `/proc/interrupts`: per-CPU counts per interrupt source, x86 and ARM forms,
//! rows with fewer columns (`ERR:`), and excerpts without the `CPU0 …` header.
//! VFIO's own handlers name the passed-through device and the mode:
//! `vfio-intx(0000:06:00.0)`, `vfio-msi[0](…)`, `vfio-msix[3](…)`.

use serde::Serialize;

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
    pub rows: Vec<InterruptRow>,
}

pub fn parse_interrupts(text: &str) -> Interrupts {
    let mut out = Interrupts::default();
    let mut columns: Option<usize> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if columns.is_none() && t.starts_with("CPU") {
            out.cpus = t
                .split_whitespace()
                .filter_map(|c| c.strip_prefix("CPU").and_then(|n| n.parse().ok()))
                .collect();
            columns = Some(out.cpus.len());
            continue;
        }
        let Some((label, rest)) = t.split_once(':') else {
            continue;
        };
        if label.contains(char::is_whitespace) {
            continue;
        }
        let mut per_cpu = Vec::new();
        let mut tokens = rest.split_whitespace().peekable();
        while let Some(tok) = tokens.peek() {
            if columns.is_some_and(|n| per_cpu.len() >= n) {
                break;
            }
            match tok.parse::<u64>() {
                Ok(v) => {
                    per_cpu.push(v);
                    tokens.next();
                }
                Err(_) => break,
            }
        }
        let description = tokens.collect::<Vec<_>>().join(" ");
        out.rows.push(InterruptRow {
            label: label.to_string(),
            per_cpu,
            description,
        });
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

/// The VFIO rows: which device, which mode, how many interrupts so far.
pub fn vfio_irqs(interrupts: &Interrupts) -> Vec<VfioIrq> {
    let mut out = Vec::new();
    for row in &interrupts.rows {
        for word in row.description.split_whitespace() {
            let (mode, rest) = if let Some(r) = word.strip_prefix("vfio-intx") {
                (VfioIrqMode::Intx, r)
            } else if let Some(r) = word.strip_prefix("vfio-msix") {
                (VfioIrqMode::Msix, r)
            } else if let Some(r) = word.strip_prefix("vfio-msi") {
                (VfioIrqMode::Msi, r)
            } else {
                continue;
            };
            let address = rest
                .rsplit_once('(')
                .map(|(_, a)| a.trim_end_matches(')').to_string())
                .unwrap_or_default();
            out.push(VfioIrq {
                irq: row.label.clone(),
                mode,
                address,
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
    }
}
