//! The interrupt parser's tests, on real listings and on generated ones.

use super::*;

fn listing(name: &str) -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/listings/"
    );
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

#[test]
fn counts_that_sum_past_u64_saturate() {
    // Found by fuzzing: two counts near u64::MAX overflowed the total (a panic
    // in debug builds, a wrapped small total in release).
    let text = "           CPU0       CPU1\n 40: 18446744073709551615 18446744073709551615  PCI-MSIX vfio-msix[0](0000:01:00.0)\n";
    let p = parse_interrupts(text);
    assert_eq!(p.rows[0].per_cpu, vec![u64::MAX, u64::MAX]);
    assert_eq!(p.rows[0].total(), u64::MAX);
    let v = vfio_irqs(&p);
    assert_eq!(v[0].total, u64::MAX);
}
