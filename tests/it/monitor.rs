//! The monitor. Rates on real /proc/interrupts text (Intel N100, a 128-CPU
//! host's vfio-msix rows) with counters moved by hand: per CPU and per source,
//! VFIO modes, interrupts on the VM's CPUs flagged, resets counted as zero. And
//! a real VM: a tiny guest with 2 vCPUs pinned to CPUs 0 and 1 under KVM, whose
//! vCPU threads the monitor must find on their pinned CPUs with KVM exit
//! counters moving (skipped with a message where there is no KVM; required in
//! CI). Only the domain this test created is touched.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use vfio_assistant::monitor::rates::rates;
use vfio_assistant::monitor::sample::{Sample, VmThreads, read_host};
use vfio_assistant::monitor::sampler::{MonitorConfig, Series, spawn};
use vfio_assistant::monitor::vm::{
    KvmSource, WHOLE_VM, debugfs_counters, find_vm, kvm_counters, pins_of,
};
use vfio_assistant::parse::interrupts::{VfioIrqMode, parse_interrupts};
use vfio_assistant::parse::procstat::parse_cpu_times;
use vfio_assistant::sysroot::HostRoot;

pub(crate) fn listing(name: &str) -> String {
    let p = format!(
        "{}/tests/fixtures/listings/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The same text with every count of row `label` on CPU column `col` raised by `by`.
pub(crate) fn bump(text: &str, label: &str, col: usize, by: i64) -> String {
    let mut i = parse_interrupts(text);
    for r in &mut i.rows {
        if r.label == label {
            let r = std::sync::Arc::make_mut(r);
            r.per_cpu[col] = (r.per_cpu[col] as i64 + by) as u64;
        }
    }
    let mut out = format!(
        "{}\n",
        i.cpus
            .iter()
            .map(|c| format!("CPU{c}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for r in &i.rows {
        let counts: Vec<String> = r.per_cpu.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "{}: {} {}\n",
            r.label,
            counts.join(" "),
            r.description
        ));
    }
    out
}

pub(crate) fn sample(t_ns: u64, interrupts: &str, stat: &str) -> Sample {
    Sample {
        t_ns,
        interrupts: Some(parse_interrupts(interrupts)),
        cpu_times: parse_cpu_times(stat),
        ..Sample::default()
    }
}

#[test]
fn interrupt_rates_per_cpu_and_source_on_a_real_n100() {
    let text = listing("intel-n100-minipc-proc-interrupts.txt");
    let later = bump(&bump(&text, "LOC", 2, 500), "26", 1, 100);
    let stat_a = "cpu0 100 0 50 1000 0 0 0 0 0 0\ncpu1 100 0 50 1000 0 5 5 0 0 0\n";
    let stat_b = "cpu0 150 0 50 1050 0 0 0 0 0 0\ncpu1 100 0 50 1100 0 5 5 0 0 0\n";
    let vm = VmThreads {
        pins: BTreeMap::from([(0, vec![1]), (1, vec![3])]),
        ..VmThreads::default()
    };
    let r = rates(
        &sample(1_000_000_000, &text, stat_a),
        &sample(1_500_000_000, &later, stat_b),
        Some(&vm),
    );
    assert!((r.dt_s - 0.5).abs() < 1e-9);
    assert_eq!(
        r.irq_per_cpu,
        vec![(0, 0.0), (1, 200.0), (2, 1000.0), (3, 0.0)]
    );
    assert_eq!(r.sources[0].label, "LOC");
    assert_eq!(r.sources[0].per_s, 1000.0);
    assert!(r.sources[0].on_vm_cpus.is_empty(), "CPU 2 is not the VM's");
    let ish = &r.sources[1];
    assert_eq!((ish.label.as_str(), ish.per_s), ("26", 200.0));
    assert_eq!(ish.on_vm_cpus, vec![1], "CPU 1 runs vCPU 0");
    assert!(ish.description.contains("intel_ish_ipc"));
    assert_eq!(r.cpu_use[0].cpu, 0);
    assert!((r.cpu_use[0].busy - 0.5).abs() < 1e-9, "{:?}", r.cpu_use[0]);
    assert!(r.cpu_use[1].busy.abs() < 1e-9);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn vfio_rows_on_128_cpus_and_counter_resets() {
    let text = listing("x86-128cpu-server-vfio-msix-interrupts-excerpt.txt");
    let i = parse_interrupts(&text);
    let vfio_label = i
        .rows
        .iter()
        .find(|r| r.description.contains("vfio-msix"))
        .unwrap()
        .label
        .clone();
    let later = bump(&text, &vfio_label, 100, 30);
    let r = rates(
        &sample(0, &text, ""),
        &sample(1_000_000_000, &later, ""),
        None,
    );
    assert_eq!(r.irq_per_cpu.len(), 128);
    assert_eq!(r.irq_per_cpu[100], (100, 30.0));
    assert_eq!(r.sources.len(), 1);
    assert_eq!(r.sources[0].vfio, Some(VfioIrqMode::Msix));
    // A counter that went backwards: zero, and said so.
    let earlier = bump(&text, &vfio_label, 100, 10);
    let back = rates(
        &sample(0, &later, ""),
        &sample(1_000_000_000, &earlier, ""),
        None,
    );
    assert!(back.sources.is_empty());
    assert!(
        back.problems.iter().any(|p| p.contains("went backwards")),
        "{:?}",
        back.problems
    );
    // A 32-bit count that wrapped around 2^32 (a busy line after months of
    // uptime): the interrupts across the wrap are counted, not dropped.
    let near_top = bump(&text, &vfio_label, 100, 4_294_967_000);
    let wrapped = bump(&text, &vfio_label, 100, 200);
    let w = rates(
        &sample(0, &near_top, ""),
        &sample(1_000_000_000, &wrapped, ""),
        None,
    );
    assert_eq!(w.sources.len(), 1, "{:?}", w.problems);
    assert_eq!(w.irq_per_cpu[100], (100, 496.0));
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    // Near the top but back to a small number far beyond what one second
    // could hold: a reset after all.
    let reset = rates(
        &sample(0, &bump(&text, &vfio_label, 100, 3_000_000_000), ""),
        &sample(1_000_000_000, &wrapped, ""),
        None,
    );
    assert!(reset.sources.is_empty());
    assert!(reset.problems.iter().any(|p| p.contains("went backwards")));
    // Same instant: no rates, no division by zero.
    let same = rates(&sample(5, &text, ""), &sample(5, &later, ""), None);
    assert!(same.sources.is_empty() && !same.problems.is_empty());
    // Sources that cannot be read leave a reason, not a stop.
    let empty = tempfile::tempdir().unwrap();
    let s = read_host(&HostRoot::at(empty.path()));
    assert!(
        s.interrupts.is_none() && s.problems.len() == 2,
        "{:?}",
        s.problems
    );
}

#[test]
fn series_are_bounded_and_pins_come_from_the_domain() {
    let mut s = Series::new(3);
    for i in 0..10 {
        s.push(f64::from(i), f64::from(i * 2));
    }
    assert_eq!(s.len(), 3);
    assert_eq!(s.last(), Some(18.0));
    let pins = pins_of(
        "<domain><cputune><vcpupin vcpu='0' cpuset='2,8'/><vcpupin vcpu='1' cpuset='3-4'/><emulatorpin cpuset='0'/></cputune></domain>",
    );
    assert_eq!(pins, BTreeMap::from([(0, vec![2, 8]), (1, vec![3, 4])]));
    assert!(pins_of("not xml").is_empty());
}

#[test]
fn a_real_guest_is_found_on_its_pinned_cpus_with_kvm_exits() {
    let Some(hv) = crate::support::vm::system() else {
        return;
    };
    if !crate::support::vm::kvm_guest_possible(2) {
        return;
    }
    let guest = crate::support::vm::running_guest(&hv, "mon", &[0, 1]);
    let name = guest.1.clone();

    let root = HostRoot::live();
    let vm = find_vm(&hv, &root, &name).unwrap();
    assert_eq!(vm.vcpus.len(), 2, "{vm:?}");
    assert_eq!(vm.pins, BTreeMap::from([(0, vec![0]), (1, vec![1])]));
    // libvirt 9 + QEMU 7.2 (Debian 12) pass KVM's counters on in the domain
    // stats: the first source. QMP query-stats, asked directly, agrees.
    let exits_of = |c: &[(u32, String, u64)], vcpu: u32| -> u64 {
        c.iter()
            .filter(|(v, n, _)| *v == vcpu && n == "exits")
            .map(|(_, _, x)| *x)
            .sum()
    };
    let (source, first) = kvm_counters(&hv, &root, &vm, None).unwrap();
    assert_eq!(source, KvmSource::Libvirt, "{first:?}");
    let (qsource, via_qmp) = kvm_counters(&hv, &root, &vm, Some(KvmSource::Qmp)).unwrap();
    assert_eq!(qsource, KvmSource::Qmp);
    // vCPU 0 runs SeaBIOS; vCPU 1 (an AP) may still sit in wait-for-SIPI.
    assert!(exits_of(&first, 0) > 0, "vCPU 0 has KVM exits: {first:?}");
    for vcpu in [0, 1] {
        let (a, b) = (exits_of(&first, vcpu), exits_of(&via_qmp, vcpu));
        assert!(
            a <= b,
            "QMP, read later, has at least libvirt's count: {a} vs {b}"
        );
    }
    // debugfs: read when permitted; otherwise a reason, not a panic.
    match debugfs_counters(&root, vm.pid) {
        Ok(c) => assert!(c.iter().all(|(v, _, _)| *v == WHOLE_VM)),
        Err(e) => assert!(!e.to_string().is_empty()),
    }

    // The monitor thread, following the domain.
    let stop = Arc::new(AtomicBool::new(false));
    let rx = spawn(
        MonitorConfig {
            root,
            uri: Some("qemu:///system".into()),
            connect: Some(vfio_assistant::libvirt::connect),
            domain: Some(name.clone()),
            interval: Duration::from_millis(200),
            only_changes: false,
        },
        stop.clone(),
        || {},
    )
    .unwrap();
    let mut seen_vcpus = 0;
    let mut exits_rate = 0.0;
    let mut kvm_source = None;
    let mut keys = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let u = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        // What `monitor --json --domain` prints for it: documented field by field.
        crate::support::json::key_paths(&serde_json::to_value(&u).unwrap(), "", &mut keys);
        let Some(vm) = &u.vm else { continue };
        assert_eq!(vm.name, name);
        seen_vcpus = u.rates.vcpus.len();
        kvm_source = kvm_source.or(u.rates.kvm_source);
        for v in &u.rates.vcpus {
            assert_eq!(
                v.on_pin,
                Some(true),
                "vCPU {} ran on CPU {} but is pinned to {:?}",
                v.vcpu,
                v.cpu,
                v.pinned
            );
        }
        exits_rate += u
            .rates
            .kvm
            .iter()
            .find(|k| k.name == "exits")
            .map_or(0.0, |k| k.per_s);
    }
    stop.store(true, Ordering::Relaxed);
    assert!(keys.contains("rates.vcpus[].on_pin") && keys.contains("vm.pins.N"));
    let missing = crate::support::json::undocumented(&keys, "monitor-json.md");
    assert!(
        missing.is_empty(),
        "missing from docs/monitor-json.md: {missing:#?}"
    );
    assert_eq!(seen_vcpus, 2);
    assert_eq!(kvm_source, Some(KvmSource::Libvirt));
    assert!(exits_rate > 0.0, "KVM exits move while the guest runs");
}

#[test]
fn kvm_debugfs_whole_vm_counters_become_totals() {
    // The layout KVM's debugfs has (seen on this project's machine, see
    // tests/fixtures/domstats/SOURCE.md): one directory per VM named
    // `<qemu pid>-<vm fd>`, one file per counter summed over the vCPUs.
    let dir = tempfile::tempdir().unwrap();
    let vm_dir = dir.path().join("sys/kernel/debug/kvm/4242-17");
    std::fs::create_dir_all(vm_dir.join("vcpu0")).unwrap();
    std::fs::create_dir_all(dir.path().join("sys/kernel/debug/kvm/999-3")).unwrap();
    for (name, v) in [
        ("exits", "1000\n"),
        ("io_exits", "300\n"),
        ("mmio_exits", "junk"),
    ] {
        std::fs::write(vm_dir.join(name), v).unwrap();
    }
    std::fs::write(vm_dir.join("vcpu0/guest_mode"), "0\n").unwrap();
    let root = HostRoot::at(dir.path());
    let c = debugfs_counters(&root, 4242).unwrap();
    assert_eq!(
        c,
        vec![
            (WHOLE_VM, "exits".to_string(), 1000),
            (WHOLE_VM, "io_exits".to_string(), 300)
        ],
        "garbage is skipped, missing files are not errors"
    );
    assert!(matches!(
        debugfs_counters(&root, 1).unwrap_err(),
        vfio_assistant::monitor::vm::VmError::NoDebugfsVm { pid: 1, .. }
    ));
    let empty = HostRoot::at(tempfile::tempdir().unwrap().path());
    let e = debugfs_counters(&empty, 4242).unwrap_err();
    assert!(e.to_string().contains("debugfs"), "{e}");

    // As rates: totals only, no per-vCPU split.
    let mk = |t_ns: u64, exits: u64| Sample {
        t_ns,
        kvm: vec![(WHOLE_VM, "exits".into(), exits)],
        kvm_source: Some(KvmSource::Debugfs),
        ..Sample::default()
    };
    let r = rates(&mk(0, 1000), &mk(500_000_000, 1600), None);
    assert_eq!(r.kvm.len(), 1);
    assert!((r.kvm[0].per_s - 1200.0).abs() < 1e-9);
    assert!(r.kvm[0].per_vcpu.is_empty());
    assert_eq!(r.kvm_source, Some(KvmSource::Debugfs));

    // Nanosecond totals (libvirt passes `halt_wait_ns` on) are not exits.
    let ns = |t_ns: u64, v: u64| Sample {
        t_ns,
        kvm: vec![(0, "halt_wait_ns".into(), v), (0, "exits".into(), v / 1000)],
        ..Sample::default()
    };
    let r = rates(&ns(0, 0), &ns(1_000_000_000, 900_000_000), None);
    assert_eq!(
        r.kvm.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
        vec!["exits"]
    );
}

/// The wake-up count once it reaches `at_least` (each wake follows its sends,
/// so a busy machine may count it a little after the sample arrived), or
/// what it is after 5 s.
fn woken_after(woken: &std::sync::atomic::AtomicUsize, at_least: usize) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while woken.load(Ordering::Relaxed) < at_least && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    woken.load(Ordering::Relaxed)
}

/// The app's sampler sends (and wakes the window) only when what the page
/// shows changed; the CLI's sends every sample.
#[test]
fn the_app_is_woken_only_when_something_moved() {
    let dir = tempfile::tempdir().unwrap();
    let proc = dir.path().join("proc");
    std::fs::create_dir_all(&proc).unwrap();
    let n100 = listing("intel-n100-minipc-proc-interrupts.txt");
    std::fs::write(proc.join("interrupts"), &n100).unwrap();
    std::fs::write(proc.join("stat"), "cpu0 1 0 1 100 0 0 0 0 0 0\n").unwrap();
    // A clock and a governor, carried between reads: no news either.
    let cpufreq = dir.path().join("sys/devices/system/cpu/cpu0/cpufreq");
    std::fs::create_dir_all(&cpufreq).unwrap();
    std::fs::write(cpufreq.join("scaling_cur_freq"), "2400000\n").unwrap();
    std::fs::write(cpufreq.join("scaling_governor"), "schedutil\n").unwrap();
    let run = |only_changes: bool| {
        let stop = Arc::new(AtomicBool::new(false));
        let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = woken.clone();
        let rx = spawn(
            MonitorConfig {
                root: HostRoot::at(dir.path()),
                uri: None,
                connect: None,
                domain: None,
                interval: Duration::from_millis(50),
                only_changes,
            },
            stop.clone(),
            move || {
                w.fetch_add(1, Ordering::Relaxed);
            },
        )
        .unwrap();
        (rx, stop, woken)
    };
    // A captured host: nothing moves after the first update.
    let (rx, stop, woken) = run(true);
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        rx.try_recv().is_err(),
        "no second update when nothing moved"
    );
    assert_eq!(woken_after(&woken, 1), 1);
    // An interrupt arrives: the next sample is sent. (Written aside and
    // renamed: the sampler never reads half a file.)
    std::fs::write(proc.join("interrupts.new"), bump(&n100, "LOC", 2, 50)).unwrap();
    std::fs::rename(proc.join("interrupts.new"), proc.join("interrupts")).unwrap();
    // First the last quiet sample held back (the plot stays flat up to the
    // change), then the one that moved, with one wake-up for both.
    let quiet = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(quiet.rates.sources.is_empty(), "{:?}", quiet.rates.sources);
    let u = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(u.t_s > quiet.t_s);
    assert!(u.rates.sources.iter().any(|s| s.label == "LOC"));
    // The rate falls back to nothing on the next sample: that is news too
    // (the page must stop showing LOC as busy), and then it is quiet again.
    let calm = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(calm.rates.sources.is_empty(), "{:?}", calm.rates.sources);
    std::thread::sleep(Duration::from_millis(500));
    assert!(rx.try_recv().is_err(), "quiet again after the fall");
    // One wake-up for the held sample and the change together, one for the
    // fall (each follows its sends, so it is counted after the sleep).
    assert_eq!(woken_after(&woken, 3), 3);
    stop.store(true, Ordering::Relaxed);
    // The CLI's sampler: every sample.
    let (rx, stop, _) = run(false);
    for _ in 0..4 {
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
}
