//! Benchmark: our full scan (PCI + IOMMU + SR-IOV + topology + kernel) against
//! `lspci -nnk` on the same tree, as ratios (the machine is shared and noisy).
//!
//! `cargo bench --bench scan_vs_lspci` prints:
//! * the live host and the largest captured fixture: median time of our scan in
//!   process, of `vfio-assistant scan --json` as a process, and of `lspci -nnk`;
//! * how the scan grows: a tree with 1x..8x the devices of a real X570 listing,
//!   and the real topologies from 5 to 128 CPUs (time per device / per CPU).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a bench may

#[allow(dead_code)] // the bench uses only the writer
#[path = "../tests/it/support/listing.rs"]
mod listing;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

fn median(mut f: impl FnMut(), runs: usize) -> Duration {
    f(); // warm the page cache
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn run_quiet(cmd: &mut Command) {
    let out = cmd.output().expect("command runs");
    assert!(
        out.status.success(),
        "{:?}: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn compare(label: &str, root: &Path, lspci_args: &[String], runs: usize) {
    let host = HostRoot::at(root);
    let devices = scan(&host).unwrap().pci_devices.len();
    let ours = median(|| drop(scan(&host).unwrap()), runs);
    let exe = env!("CARGO_BIN_EXE_vfio-assistant");
    let ours_cli = median(
        || {
            run_quiet(
                Command::new(exe)
                    .args(["scan", "--json", "--root"])
                    .arg(root),
            )
        },
        runs,
    );
    let lspci = median(|| run_quiet(Command::new("lspci").args(lspci_args)), runs);
    println!(
        "{label:<34} {devices:>4} devs  scan {:>7.2} ms  scan CLI {:>7.2} ms  lspci -nnk {:>7.2} ms  ratio scan/lspci {:>5.2}  CLI/lspci {:>5.2}",
        ms(ours),
        ms(ours_cli),
        ms(lspci),
        ours.as_secs_f64() / lspci.as_secs_f64(),
        ours_cli.as_secs_f64() / lspci.as_secs_f64()
    );
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn main() {
    let runs = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    if Command::new("lspci").arg("--version").output().is_err() {
        println!("lspci not installed (Debian: pciutils); nothing to compare");
        return;
    }
    println!("median of {runs} runs each\n");
    compare("live host", Path::new("/"), &["-nnk".into()], runs);
    // lspci -nnk reads 64 bytes of config space per device; we also read the
    // capability lists (256 bytes, 4 KiB on PCI Express), as `lspci -vv` does.
    let caps = median(|| run_quiet(Command::new("lspci").args(["-nnvvk"])), runs);
    let host = HostRoot::live();
    let ours = median(|| drop(scan(&host).unwrap()), runs);
    println!(
        "{:<34} same capability reads: lspci -nnvvk {:>7.2} ms, ratio scan/lspci-vv {:>5.2}",
        "live host",
        ms(caps),
        ours.as_secs_f64() / caps.as_secs_f64()
    );
    let server = fixture("topology/hwloc-32em64t-2n8c+dax+nvme+mic+dimms");
    let sysfs = format!("sysfs.path={}", server.join("sys/bus/pci").display());
    compare(
        "Dell DCS8000Z fixture (137 PCI fns)",
        &server,
        &[
            "-nnk".into(),
            "-A".into(),
            "linux-sysfs".into(),
            "-O".into(),
            sysfs,
        ],
        runs,
    );

    println!("\nGrowth with devices (a real X570 listing replicated over PCI domains):");
    let text = std::fs::read_to_string(fixture(
        "listings/gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt",
    ))
    .unwrap();
    let base = listing::parse_listing(&text);
    for copies in [1usize, 2, 4, 8] {
        let mut l = base.clone();
        l.devices.clear();
        for c in 0..copies {
            for d in &base.devices {
                let mut d = d.clone();
                d.address = format!("{c:04x}{}", &d.address[4..]);
                d.group = d.group.map(|g| g + 100 * c as u32);
                l.devices.push(d);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        listing::write_sysfs(&l, dir.path()).unwrap();
        let host = HostRoot::at(dir.path());
        let t = median(|| drop(scan(&host).unwrap()), runs);
        println!(
            "  {:>4} devices: {:>7.2} ms  ({:>6.1} us per device)",
            l.devices.len(),
            ms(t),
            t.as_secs_f64() * 1e6 / l.devices.len() as f64
        );
    }

    println!("\nGrowth with CPUs (real topologies):");
    for name in [
        "hwloc-5intel64-hybrid-lakefield",
        "utillinux-x86_64-64cpu-linux6.2",
        "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t",
        "hwloc-64amd64-4s2n4ca2co",
        "hwloc-memorysidecaches",
        "hwloc-128arm-2pa2n8cluster4co",
    ] {
        let host = HostRoot::at(fixture(&format!("topology/{name}")));
        let cpus = scan(&host).unwrap().topology.summary.cpus_present;
        let t = median(|| drop(scan(&host).unwrap()), runs);
        println!(
            "  {cpus:>4} CPUs ({name}): {:>7.2} ms  ({:>6.1} us per CPU)",
            ms(t),
            t.as_secs_f64() * 1e6 / cpus as f64
        );
    }
}
