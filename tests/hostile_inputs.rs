//! Hostile inputs for every parser and reader: real inputs (the fixtures
//! under tests/fixtures/, and this machine's own files) mutated at random —
//! bits flipped, bytes and tokens inserted (huge numbers, multi-byte text, a
//! BOM, XML entities and DOCTYPEs, cpio and ROM magics), ranges cut, repeated
//! and spliced between inputs — plus plain random bytes. Each input must end
//! in a value or a clear error: never a panic, never more than a second or
//! two. A domain XML that parses must also come back byte for byte.
//!
//! `hostile_inputs_in_ci` runs 2000 inputs per parser (and 60 mutated host
//! trees through `scan`) in every `cargo test`. The long run is ignored:
//!
//! ```sh
//! cargo test --release --test hostile_inputs -- --ignored --nocapture
//! HOSTILE_INPUTS=100000 HOSTILE_TARGET=xml cargo test --release --test hostile_inputs -- --ignored
//! ```
//!
//! Recorded runs (release, on the 2-core development machine):
//!
//! * 2025-12, `hostile_inputs_a_million_each`: 1 000 000 inputs for each of
//!   the 26 parser targets below (26 000 000 in all) and 10 000 mutated host
//!   trees through `scan`; see the table printed by the test (and the report
//!   of the change) for the time per target. Found before it ran clean: the
//!   domain XML BOM panic, the ReadError cut inside a character, interrupt
//!   totals past u64, the fragmentation share overflow (all fixed with their
//!   own tests).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::BTreeMap;
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vfio_assistant::sysroot::{HostPath, HostRoot};

// ---------------------------------------------------------------- mutation

/// xorshift64*: reproducible from its seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const TOKENS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999",
    b"4294967295",
    b"0x",
    b"0xffffffffffffffff",
    b"\xff\xfe",
    "é".as_bytes(),
    "\u{feff}".as_bytes(),
    "𝄞".as_bytes(),
    b"\n",
    b"\r\n",
    b" ",
    b"\t",
    b":",
    b",",
    b"-",
    b"=",
    b"\"",
    b"'",
    b"<",
    b">",
    b"</",
    b"/>",
    b"<a>",
    b"&",
    b"&amp;",
    b"&#0;",
    b"&#x110000;",
    b"&lol;",
    b"<!DOCTYPE d [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;\">]>",
    b"<![CDATA[",
    b"<?xml version='1.0'?>",
    b"{",
    b"}",
    b"[",
    b"]",
    b"null",
    b"070701",
    b"TRAILER!!!",
    b"\x55\xaa",
    b"PCIR",
    b"\x00\x00\x00\x00\x00\x00\x00\x00",
    b"CPU0",
    b"processor\t: ",
    b"vfio-msix[0](0000:01:00.0)",
    b"Node 0, zone   Normal ",
    b"vcpu.0.",
];

/// Mutated copies of the seeds (at most `MAX_INPUT` bytes), and now and
/// then plain random bytes.
const MAX_INPUT: usize = 1 << 20;

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], out: &mut Vec<u8>) {
    out.clear();
    if seeds.is_empty() || rng.below(16) == 0 {
        let n = rng.below(512);
        out.extend((0..n).map(|_| rng.next() as u8));
        return;
    }
    let seed = &seeds[rng.below(seeds.len())];
    if rng.below(16) == 0 {
        // A short window of a seed: the cut-off starts parsers choke on.
        let from = rng.below(seed.len() + 1);
        out.extend_from_slice(&seed[from..(from + rng.below(32)).min(seed.len())]);
    } else {
        out.extend_from_slice(seed);
    }
    for _ in 0..1 + rng.below(8) {
        let len = out.len();
        // The edges a quarter of the time: a BOM goes first, a cut goes last.
        let at = match rng.below(8) {
            0 => 0,
            1 => len,
            _ => rng.below(len + 1),
        };
        match rng.below(10) {
            0 if len > 0 => out[at.min(len - 1)] ^= 1 << rng.below(8),
            1 if len > 0 => {
                out[at.min(len - 1)] = [0, 0xff, b'\n', b' ', b'9', b'<', 0x80][rng.below(7)]
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                out.splice(at..at, t.iter().copied());
            }
            3 => {
                let end = (at + rng.below(256)).min(len);
                out.drain(at..end);
            }
            4 if at < len => {
                // A range repeated: long lines, deep nesting, many entries.
                let end = (at + 1 + rng.below(64)).min(len);
                let chunk = out[at..end].to_vec();
                for _ in 0..rng.below(200) {
                    if out.len() + chunk.len() > MAX_INPUT {
                        break;
                    }
                    out.splice(at..at, chunk.iter().copied());
                }
            }
            5 => out.truncate(at),
            6 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                let to = (from + rng.below(4096)).min(other.len());
                out.splice(at..at, other[from..to].iter().copied());
            }
            7 => {
                let n = rng.below(32);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                out.splice(at..at, junk);
            }
            8 => {
                // The next number made huge.
                if let Some(p) = out[at..].iter().position(u8::is_ascii_digit) {
                    let p = at + p;
                    out.splice(p..p, b"9999999999999999999999".iter().copied());
                }
            }
            _ => {
                let t = ["é", "\u{feff}", "\u{0}", "ß", "中"][rng.below(5)];
                out.splice(at..at, t.bytes());
            }
        }
    }
    out.truncate(MAX_INPUT);
}

// ---------------------------------------------------------------- seeds

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every file under `dir` whose name `pick` accepts (links not followed).
fn files_named(dir: &Path, pick: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let name = e.file_name().to_string_lossy().into_owned();
        if ft.is_dir() {
            files_named(&e.path(), pick, out);
        } else if ft.is_file() && pick(&name) {
            out.push(e.path());
        }
    }
}

/// Up to `max` seeds: the fixture files `pick` accepts, at most `cap` bytes
/// each (a whole 128-CPU listing is slow to mutate a million times).
fn seeds_from(pick: &dyn Fn(&str) -> bool, max: usize, cap: usize) -> Vec<Vec<u8>> {
    let mut paths = Vec::new();
    files_named(&fixtures(), pick, &mut paths);
    paths.sort();
    // Spread over all of them, not the first few.
    let step = paths.len().div_ceil(max.max(1)).max(1);
    paths
        .iter()
        .step_by(step)
        .filter_map(|p| fs::read(p).ok())
        .filter(|b| !b.is_empty())
        .map(|mut b| {
            b.truncate(cap);
            b
        })
        .collect()
}

/// This machine's own file (through HostRoot), when it can be read.
fn live(path: HostPath) -> Vec<Vec<u8>> {
    let root = HostRoot::live();
    let text = if path.relative().starts_with("dev") {
        root.read_kmsg(&path)
    } else {
        root.read_text(&path)
    };
    match text {
        Ok(t) if !t.is_empty() => vec![t.into_bytes().into_iter().take(64 << 10).collect()],
        _ => Vec::new(),
    }
}

fn listing_text(name_part: &str) -> Vec<Vec<u8>> {
    let mut paths = Vec::new();
    files_named(
        &fixtures().join("listings"),
        &|n| n.contains(name_part) && n.ends_with(".txt"),
        &mut paths,
    );
    paths
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .map(|t| {
            t.lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes()
        })
        .collect()
}

fn with(mut seeds: Vec<Vec<u8>>, more: &[&str]) -> Vec<Vec<u8>> {
    seeds.extend(more.iter().map(|s| s.as_bytes().to_vec()));
    seeds
}

// ---------------------------------------------------------------- targets

struct Target {
    name: &'static str,
    seeds: Vec<Vec<u8>>,
    run: fn(&[u8]),
}

fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

fn targets() -> Vec<Target> {
    use vfio_assistant::parse::*;
    let xml = seeds_from(
        &|n| n.ends_with(".xml") && !n.contains("caps"),
        60,
        64 << 10,
    );
    vec![
        Target {
            name: "cmdline",
            seeds: with(
                seeds_from(&|n| n == "cmdline", 10, 4096),
                &[
                    "BOOT_IMAGE=/vmlinuz root=UUID=x ro quiet \"a b\" vfio-pci.ids=10de:1b80,10de:10f0 isolcpus=2-5",
                ],
            ),
            run: |b| {
                let c = cmdline::parse_cmdline(&text(b));
                let _ = c.value("vfio-pci.ids");
            },
        },
        Target {
            name: "cpulist",
            seeds: seeds_from(
                &|n| n.ends_with("_list") || n == "cpulist" || n == "online",
                40,
                4096,
            ),
            run: |b| {
                if let Ok(set) = cpulist::parse_cpulist(&text(b)) {
                    let _ = cpulist::format_cpulist(&set);
                }
            },
        },
        Target {
            name: "cpumask",
            seeds: seeds_from(&|n| n.ends_with("_cpus") || n == "cpumap", 40, 4096),
            run: |b| {
                let _ = cpulist::parse_cpumask(&text(b));
            },
        },
        Target {
            name: "cpuinfo summary",
            seeds: seeds_from(&|n| n == "cpuinfo", 13, 64 << 10),
            run: |b| {
                let s = vfio_assistant::host::cpu::parse_cpu_summary(&text(b));
                let _ = s.virtualization();
            },
        },
        Target {
            name: "interrupts",
            seeds: listing_text("interrupts")
                .into_iter()
                .map(|mut b| {
                    b.truncate(128 << 10);
                    b
                })
                .collect(),
            run: |b| {
                let t = text(b);
                let p = interrupts::parse_interrupts(&t);
                for r in &p.rows {
                    let _ = r.total();
                }
                let _ = interrupts::vfio_irqs(&p);
                // Read again beside itself with one line changed: the reuse path.
                let mut again = t.to_string();
                if let Some(i) = again.find('\n') {
                    again.insert(i, '7');
                }
                let q = interrupts::parse_interrupts_reusing(&again, Some((&t, &p)));
                for (r, old) in q.rows.iter().zip(&p.rows) {
                    let _ = r.may_differ_from(old);
                }
            },
        },
        Target {
            name: "modules",
            seeds: with(
                live(HostPath::proc("modules")),
                &[
                    "vfio_pci 16384 0 - Live 0x0000000000000000\nkvm_amd 155648 0 - Live 0x0\nkvm 1138688 1 kvm_amd, Live 0x0\n",
                ],
            ),
            run: |b| {
                let _ = modules::parse_modules(&text(b));
            },
        },
        Target {
            name: "procstat",
            seeds: with(
                live(HostPath::proc("stat")),
                &[
                    "cpu  4705 356 584 3699 23 23 0 0 0 0\ncpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0\nintr 1462898\n",
                ],
            ),
            run: |b| {
                for t in procstat::parse_cpu_times(&text(b)) {
                    let _ = t.total();
                }
            },
        },
        Target {
            name: "meminfo totals",
            seeds: with(
                live(HostPath::proc("meminfo")),
                &["MemTotal:       16384000 kB\nMemFree:  1 kB\nMemAvailable:   8000000 kB\n"],
            ),
            run: |b| {
                let _ = vfio_assistant::host::kernel::parse_meminfo_totals(&text(b));
            },
        },
        Target {
            name: "buddyinfo",
            seeds: with(
                live(HostPath::proc("buddyinfo")),
                &[
                    "Node 0, zone      DMA      1      1      1      0      2      1      1      0      1      1      3\nNode 0, zone   Normal   4221   1817    913    324    124     54     19      8      5      3     67\n",
                ],
            ),
            run: |b| {
                let _ = vfio_assistant::host::system::parse_buddyinfo(&text(b));
            },
        },
        Target {
            name: "mounts",
            seeds: with(
                live(HostPath::proc("mounts")),
                &["/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n/dev/sda1 /data\\040x xfs rw 0 0\n"],
            ),
            run: |b| {
                let _ = vfio_assistant::host::usage::parse_mounts(&text(b));
            },
        },
        Target {
            name: "iomem",
            seeds: with(
                Vec::new(),
                &[
                    "00000000-00000fff : Reserved\n  e0000000-efffffff : PCI Bus 0000:01\n    e0000000-e07e8fff : efifb\n    e0000000-efffffff : 0000:01:00.0\n",
                ],
            ),
            run: |b| {
                let _ = vfio_assistant::host::system::parse_iomem_framebuffers(&text(b));
            },
        },
        Target {
            name: "kmsg",
            seeds: with(
                live(HostPath::dev("kmsg")),
                &[
                    "6,1,0,-;Linux version 6.1.0\n6,2,5,-;AMD-Vi: Interrupt remapping enabled\n4,3,9,c;DMAR: IOMMU enabled\n SUBSYSTEM=pci\n",
                ],
            ),
            run: |b| {
                let _ = vfio_assistant::host::system::parse_kmsg(&text(b));
            },
        },
        Target {
            name: "grub default",
            seeds: with(
                Vec::new(),
                &[
                    "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash amd_iommu=on\"\nGRUB_CMDLINE_LINUX='iommu=pt'\n",
                ],
            ),
            run: |b| {
                let _ = vfio_assistant::host::system::grub_cmdline(&text(b));
            },
        },
        Target {
            name: "sysfs values",
            seeds: seeds_from(
                &|n| {
                    matches!(
                        n,
                        "vendor"
                            | "class"
                            | "numa_node"
                            | "current_link_speed"
                            | "size"
                            | "enabled"
                    )
                },
                40,
                256,
            ),
            run: |b| {
                let t = text(b);
                let _ = values::parse_hex_u32(&t);
                let _ = values::parse_hex_u16(&t);
                let _ = values::parse_i64(&t);
                let _ = values::parse_u64(&t);
                let _ = values::parse_bracket_choice(&t);
                let _ = values::parse_link_speed_gts(&t);
                let _ = values::parse_size_kib(&t);
                let _ = values::parse_memory_mib(&t);
            },
        },
        Target {
            name: "pci resource",
            seeds: seeds_from(&|n| n == "resource", 30, 4096),
            run: |b| {
                let _ = pci_resource::parse_resource(&text(b));
            },
        },
        Target {
            name: "pci config space",
            seeds: seeds_from(&|n| n == "config", 30, 4096),
            run: |b| {
                let _ = pci_config::parse_config(b);
                let _ = pci_config::mask_serial_number(b);
            },
        },
        Target {
            name: "option rom",
            seeds: seeds_from(&|n| n.ends_with(".rom") || n.ends_with(".bin"), 4, 1 << 20),
            run: |b| {
                if let Ok(r) = option_rom::parse_option_rom(b) {
                    let _ = (r.has_uefi_x64(), r.has_legacy());
                }
            },
        },
        Target {
            name: "cpio (bytes)",
            seeds: cpio_seeds(),
            run: |b| {
                let _ = cpio::read_newc(b, |n| n.ends_with(".conf"));
            },
        },
        Target {
            name: "cpio (stream)",
            seeds: cpio_seeds(),
            run: |b| {
                let _ = cpio::read_newc_stream(b, |n| n.ends_with(".conf"));
                let _ = cpio::read_newc_prefix(std::io::BufReader::with_capacity(64, b), |_| true);
            },
        },
        Target {
            name: "qmp",
            seeds: seeds_from(&|n| n.ends_with(".json"), 10, 64 << 10),
            run: |b| {
                let t = text(b);
                let _ = qmp::parse_cpus_fast(&t);
                let _ = qmp::parse_vcpu_stats(&t);
                let _ = qmp::parse_status(&t);
            },
        },
        Target {
            name: "task stat",
            seeds: seeds_from(&|n| n.starts_with("task-"), 10, 8192),
            run: |b| {
                let t = text(b);
                let _ = task::parse_task_stat(&t);
                let _ = task::parse_schedstat(&t);
                let _ = task::parse_ctxt_switches(&t);
            },
        },
        Target {
            name: "domstats",
            seeds: seeds_from(
                &|n| n.starts_with("vcpu-") && n.ends_with(".txt"),
                4,
                64 << 10,
            ),
            run: |b| {
                let p = domstats::parse_domstats_text(&text(b));
                let _ = domstats::kvm_counters_of(&p);
            },
        },
        Target {
            name: "domain xml",
            seeds: xml.clone(),
            run: |b| {
                let t = text(b);
                if let Ok(mut d) = vfio_assistant::domain::xml::Document::parse(&t) {
                    assert_eq!(
                        d.serialize(),
                        t,
                        "a parsed document comes back byte for byte"
                    );
                    use vfio_assistant::domain::inspect::*;
                    let _ = (
                        pinning_of(&d),
                        hyperv_on(&d),
                        code43_workarounds(&d),
                        pci_hostdevs(&d),
                    );
                    d.root
                        .append_child(vfio_assistant::domain::xml::Element::new("memballoon"));
                    d.indent_new_elements();
                    let _ = d.serialize();
                }
            },
        },
        Target {
            name: "domain tune",
            seeds: xml,
            run: |b| {
                use vfio_assistant::domain::tune::{TuneOptions, tune};
                if let Ok(mut d) = vfio_assistant::domain::xml::Document::parse(&text(b)) {
                    if tune(&mut d, &TuneOptions::default()).is_ok() {
                        let out = d.serialize();
                        assert!(
                            vfio_assistant::domain::xml::Document::parse(&out).is_ok(),
                            "tune writes XML that parses"
                        );
                    }
                }
            },
        },
        Target {
            name: "domcaps",
            seeds: seeds_from(&|n| n.ends_with(".xml") && n.contains("q35"), 4, 64 << 10),
            run: |b| {
                if let Ok(c) = vfio_assistant::libvirt::caps::DomainCaps::parse(&text(b)) {
                    let _ = (c.hyperv_supports("relaxed"), c.pick_loader(true));
                }
            },
        },
        Target {
            name: "pci address",
            seeds: with(Vec::new(), &["0000:01:00.0", "01:00.1", "ffff:ff:1f.7"]),
            run: |b| {
                let t = text(b);
                let _ = vfio_assistant::domain::hostdev::PciAddr::parse(&t);
                let _ =
                    vfio_assistant::domain::hostdev::cards(&[t.to_string(), "0000:01:00.1".into()]);
            },
        },
    ]
}

/// Real newc archives, as GNU cpio writes them, when it is installed; else
/// archives made here in the same layout.
fn cpio_seeds() -> Vec<Vec<u8>> {
    fn entry(name: &str, mode: u32, data: &[u8]) -> Vec<u8> {
        let mut v = format!(
            "070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}",
            1,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        )
        .into_bytes();
        v.extend_from_slice(name.as_bytes());
        v.push(0);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v.extend_from_slice(data);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }
    let mut early = entry(
        "kernel/x86/microcode/AuthenticAMD.bin",
        0o100644,
        b"microcode",
    );
    early.extend(entry("TRAILER!!!", 0, b""));
    early.resize(512, 0);
    let mut main = entry(
        "etc/modprobe.d/vfio.conf",
        0o100644,
        b"options vfio-pci ids=10de:1b80\n",
    );
    main.extend(entry(
        "usr/lib/modules/6.1.0/kernel/drivers/vfio/pci/vfio-pci.ko",
        0o100644,
        &[7; 300],
    ));
    main.extend(entry("usr/lib/modules", 0o040755, b""));
    main.extend(entry("TRAILER!!!", 0, b""));
    let mut both = early.clone();
    both.extend(&main);
    let mut then_zstd = both.clone();
    then_zstd.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd, 0, 0]);
    vec![early, main, both, then_zstd]
}

// ---------------------------------------------------------------- running

/// What one target's run saw.
struct Ran {
    inputs: usize,
    took: Duration,
    slowest: Duration,
}

thread_local! {
    static PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Panics are caught and reported by the harness with their input, not printed.
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("hostile:"))
            {
                let at = info.location().map(|l| l.to_string()).unwrap_or_default();
                PANIC.with(|p| *p.borrow_mut() = Some(format!("{info} at {at}")));
            } else {
                default(info);
            }
        }));
    });
}

/// Where a failing input is kept for a rerun.
fn keep_input(name: &str, input: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "hostile-{}.bin",
        name.replace([' ', '(', ')'], "_")
    ));
    let _ = fs::write(&p, input);
    p
}

/// Run `n` inputs through `t` on its own thread; a panic, a slow input or
/// a hang (no end within `budget`) fails the test with the input kept.
fn run_target(t: Target, n: usize, seed: u64, slow: Duration, budget: Duration) -> Ran {
    quiet_panics();
    let current: Arc<Mutex<Vec<u8>>> = Arc::default();
    let shared = Arc::clone(&current);
    let name = t.name;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("hostile:{name}"))
        .spawn(move || {
            let mut rng = Rng(seed | 1);
            let mut input = Vec::new();
            let start = Instant::now();
            let mut slowest = Duration::ZERO;
            for i in 0..n {
                mutate(&mut rng, &t.seeds, &mut input);
                if let Ok(mut c) = shared.lock() {
                    c.clone_from(&input);
                }
                let one = Instant::now();
                let r = catch_unwind(AssertUnwindSafe(|| (t.run)(&input)));
                let took = one.elapsed();
                slowest = slowest.max(took);
                if r.is_err() || took > slow {
                    let why = PANIC
                        .with(|p| p.borrow_mut().take())
                        .unwrap_or_else(|| format!("took {took:?}"));
                    let _ = tx.send(Err(format!(
                        "{name}: input {i} failed: {why}; kept in {}",
                        keep_input(name, &input).display()
                    )));
                    return;
                }
            }
            let _ = tx.send(Ok(Ran {
                inputs: n,
                took: start.elapsed(),
                slowest,
            }));
        })
        .unwrap();
    match rx.recv_timeout(budget) {
        Ok(Ok(ran)) => ran,
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => {
            let input = current.lock().map(|c| c.clone()).unwrap_or_default();
            panic!(
                "{name}: no end after {budget:?} (a hang?); the input is kept in {}",
                keep_input(name, &input).display()
            );
        }
    }
}

/// Every target, two at a time (the machine has two cores), in a table.
/// `HOSTILE_TARGET=xml` runs only the targets whose name contains it.
fn run_all(n: usize, slow: Duration, budget: Duration) -> BTreeMap<&'static str, Ran> {
    let only = std::env::var("HOSTILE_TARGET").unwrap_or_default();
    let all: Vec<Target> = targets()
        .into_iter()
        .filter(|t| t.name.contains(&only))
        .collect();
    for t in &all {
        assert!(!t.seeds.is_empty(), "{}: no seeds found", t.name);
    }
    let queue = Arc::new(Mutex::new(all.into_iter().enumerate().collect::<Vec<_>>()));
    let results = Arc::new(Mutex::new(BTreeMap::new()));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let queue = Arc::clone(&queue);
            let results = Arc::clone(&results);
            std::thread::spawn(move || {
                loop {
                    let next = queue.lock().unwrap().pop();
                    let Some((i, t)) = next else { break };
                    let name = t.name;
                    let ran = run_target(t, n, 0x9E37_79B9_7F4A_7C15 ^ i as u64, slow, budget);
                    results.lock().unwrap().insert(name, ran);
                }
            })
        })
        .collect();
    for w in workers {
        if let Err(e) = w.join() {
            std::panic::resume_unwind(e);
        }
    }
    let results = std::mem::take(&mut *results.lock().unwrap());
    for (name, r) in &results {
        eprintln!(
            "{name:>18}: {:>9} inputs in {:>8.1?} (slowest {:?})",
            r.inputs, r.took, r.slowest
        );
    }
    results
}

// ---------------------------------------------------------------- readers

/// A small real host tree, then `n` rounds of damage through `scan`: one
/// file's content mutated, or a file swapped for a FIFO, a link loop, a link
/// out of the root or a folder. Every round must be a scan (warnings are
/// fine), within `slow`.
fn mutated_trees(n: usize, seed: u64, slow: Duration) -> Duration {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let src = fixtures().join("topology/ghw-amd-ryzen5-1600");
    copy_tree(&src, dir.path());
    let mut files = Vec::new();
    files_named(dir.path(), &|_| true, &mut files);
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|f| fs::read(f).unwrap()).collect();
    let root = HostRoot::at(dir.path());
    let mut rng = Rng(seed | 1);
    let mut input = Vec::new();
    let start = Instant::now();
    for round in 0..n {
        let k = rng.below(files.len());
        let f = &files[k];
        let _ = fs::remove_file(f);
        let how = rng.below(10);
        match how {
            0 => {
                let _ = std::process::Command::new("mkfifo").arg(f).status();
            }
            1 => symlink(f.file_name().unwrap(), f).unwrap(),
            2 => symlink("/etc/passwd", f).unwrap(),
            3 => fs::create_dir(f).unwrap(),
            _ => {
                mutate(&mut rng, &seeds[k..=k], &mut input);
                fs::write(f, &input).unwrap();
            }
        }
        let one = Instant::now();
        let s = vfio_assistant::host::scan(&root);
        assert!(
            s.is_ok(),
            "round {round}, {} ({how}): {:?}",
            f.display(),
            s.err()
        );
        assert!(one.elapsed() < slow, "round {round}: {:?}", one.elapsed());
        // Put it back for the next round.
        if f.is_dir() && !f.is_symlink() {
            fs::remove_dir(f).unwrap();
        } else {
            fs::remove_file(f).unwrap();
        }
        fs::write(f, &seeds[k]).unwrap();
    }
    start.elapsed()
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let ft = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(e.path()).unwrap(), dest).unwrap();
        } else if ft.is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            fs::copy(e.path(), dest).unwrap();
        }
    }
}

// ---------------------------------------------------------------- tests

#[test]
fn hostile_inputs_in_ci() {
    let ran = run_all(2000, Duration::from_secs(5), Duration::from_secs(600));
    assert!(ran.len() >= 26 && ran.values().all(|r| r.inputs == 2000));
    let took = mutated_trees(60, 7, Duration::from_secs(20));
    eprintln!("{:>18}: {:>9} rounds in {took:>8.1?}", "scan (trees)", 60);
}

#[test]
#[ignore = "the long run: 10^6 inputs per parser (release: about an hour on two cores)"]
fn hostile_inputs_a_million_each() {
    let n = std::env::var("HOSTILE_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let start = Instant::now();
    let ran = run_all(n, Duration::from_secs(2), Duration::from_secs(6 * 3600));
    let total: usize = ran.values().map(|r| r.inputs).sum();
    let rounds = (n / 100).max(100);
    let took = mutated_trees(rounds, 11, Duration::from_secs(10));
    eprintln!(
        "{:>18}: {:>9} rounds in {took:>8.1?}",
        "scan (trees)", rounds
    );
    eprintln!(
        "{total} parser inputs and {rounds} trees in {:.1?}",
        start.elapsed()
    );
}

#[test]
fn xml_with_entities_doctypes_and_deep_nesting_is_an_answer() {
    use vfio_assistant::domain::xml::Document;
    let start = Instant::now();
    // Billion laughs: the DOCTYPE is kept as text, entities are not expanded.
    let laughs = "<?xml version='1.0'?>\n<!DOCTYPE d [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\"><!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">]>\n<domain><name>&d;</name></domain>\n";
    match Document::parse(laughs) {
        Ok(d) => assert!(d.root.child("name").unwrap().text().len() < 100),
        Err(e) => assert!(e.line >= 1, "{e}"),
    }
    // An external entity names a file: never read.
    let xxe =
        "<!DOCTYPE d [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><domain><name>&x;</name></domain>";
    if let Ok(d) = Document::parse(xxe) {
        assert!(!d.root.child("name").unwrap().text().contains("root:"));
    }
    // 100 000 levels, open and closed, and open only: an error, not a crash.
    for deep in [
        format!(
            "<domain>{}{}</domain>",
            "<a>".repeat(100_000),
            "</a>".repeat(100_000)
        ),
        format!("<domain>{}", "<a>".repeat(100_000)),
        "<a/>".repeat(100_000),
    ] {
        let _ = Document::parse(&deep);
    }
    let e = Document::parse(&format!(
        "{}{}",
        "<a>".repeat(100_000),
        "</a>".repeat(100_000)
    ))
    .unwrap_err();
    assert!(e.message.contains("nested more than"), "{e}");
    // The same through the CLI's `domain tune`, which indents what it adds.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("deep.xml");
    fs::write(
        &f,
        format!(
            "<domain type='kvm'><name>x</name>{}{}</domain>",
            "<metadata>".repeat(20_000),
            "</metadata>".repeat(20_000)
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["--demo", "domain", "tune"])
        .arg(&f)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("nested more than"), "{said}");
    assert!(start.elapsed() < Duration::from_secs(60));
}
