//! The hostile-input harness's targets: every parser, each with its real
//! seeds (fixtures under tests/fixtures/, this machine's own files through
//! HostRoot, and a few real lines where neither has the file).

use std::fs;
use std::path::{Path, PathBuf};
use vfio_assistant::sysroot::{HostPath, HostRoot};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every file under `dir` whose name `pick` accepts (links not followed).
pub fn files_named(dir: &Path, pick: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
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

pub struct Target {
    pub name: &'static str,
    pub seeds: Vec<Vec<u8>>,
    pub run: fn(&[u8]),
}

fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

pub fn targets() -> Vec<Target> {
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
                if let Ok(mut d) = vfio_assistant::domain::xml::Document::parse(&text(b))
                    && tune(&mut d, &TuneOptions::default()).is_ok()
                {
                    let out = d.serialize();
                    assert!(
                        vfio_assistant::domain::xml::Document::parse(&out).is_ok(),
                        "tune writes XML that parses"
                    );
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
