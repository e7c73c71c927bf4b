//! The monitor per CPU: interrupts on the VM's isolated CPUs flagged, and
//! frequencies and governors per CPU.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::monitor::{bump, listing};
use std::collections::BTreeMap;
use vfio_assistant::monitor::rates::rates;
use vfio_assistant::monitor::sample::{Sample, VmThreads, clocks_note, freq_every_ns, read_host};
use vfio_assistant::sysroot::HostRoot;

/// Interrupts on CPUs isolated with isolcpus/nohz_full are flagged even
/// without a VM to follow; the sets are read from sysfs with the first sample.
#[test]
fn interrupts_on_isolated_cpus_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let put = |rel: &str, text: &str| crate::support::hosts::put(dir.path(), rel, text);
    let text = listing("intel-n100-minipc-proc-interrupts.txt");
    put("proc/interrupts", &text);
    put("proc/stat", "cpu0 1 0 1 100 0 0 0 0 0 0\n");
    put("sys/devices/system/cpu/isolated", "2-3\n");
    put("sys/devices/system/cpu/nohz_full", "3\n");
    let root = HostRoot::at(dir.path());
    let first = read_host(&root);
    assert_eq!(first.isolated, vec![2, 3]);
    // Carried over, not read again (they change only at boot).
    put("sys/devices/system/cpu/isolated", "garbage\n");
    put(
        "proc/interrupts",
        &bump(
            &bump(&bump(&text, "LOC", 2, 500), "26", 2, 100),
            "16",
            1,
            10,
        ),
    );
    let later = vfio_assistant::monitor::sample::read_host_after(&root, Some(&first));
    assert_eq!(later.isolated, vec![2, 3]);
    let r = rates(
        &first,
        &Sample {
            t_ns: first.t_ns + 1_000_000_000,
            ..later.clone()
        },
        None,
    );
    // The timer ticks there too: counted, but a tick is not a device to move.
    let loc = r.sources.iter().find(|s| s.label == "LOC").unwrap();
    assert_eq!(loc.on_isolated_cpus, vec![2]);
    assert_eq!(loc.misplaced(), None);
    let ish = r.sources.iter().find(|s| s.label == "26").unwrap();
    assert_eq!(ish.misplaced().as_deref(), Some("isolated CPUs [2]"));
    let sixteen = r.sources.iter().find(|s| s.label == "16").unwrap();
    assert_eq!(sixteen.misplaced(), None, "CPU 1 is the host's");
    // A VM pinned to CPU 2: said once, as the VM's.
    let vm = VmThreads {
        pins: BTreeMap::from([(0, vec![2])]),
        ..VmThreads::default()
    };
    let r = rates(
        &first,
        &Sample {
            t_ns: first.t_ns + 1_000_000_000,
            ..later
        },
        Some(&vm),
    );
    let ish = r.sources.iter().find(|s| s.label == "26").unwrap();
    assert_eq!(ish.misplaced().as_deref(), Some("VM CPUs [2]"));
    // Unreadable or garbage files: nothing isolated, nothing flagged.
    put("sys/devices/system/cpu/nohz_full", "(null)\n");
    assert!(read_host(&root).isolated.is_empty());
}

/// Frequencies and governors per CPU, read with the first sample and again
/// every second (frequencies) or five (governors), carried over between: a
/// governor switched by a libvirt hook when the VM starts shows within five
/// seconds. A garbage governor file is no governor; a CPU without cpufreq (a
/// VM) has neither.
#[test]
fn frequencies_and_governors_per_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let put = |rel: &str, text: &str| crate::support::hosts::put(dir.path(), rel, text);
    put(
        "proc/interrupts",
        &listing("intel-n100-minipc-proc-interrupts.txt"),
    );
    put(
        "proc/stat",
        "cpu  4 0 4 400 0 0 0 0 0 0\ncpu0 1 0 1 100 0 0 0 0 0 0\ncpu1 1 0 1 100 0 0 0 0 0 0\ncpu2 1 0 1 100 0 0 0 0 0 0\ncpu3 1 0 1 100 0 0 0 0 0 0\n",
    );
    let cpufreq = |cpu: u32, file: &str| format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/{file}");
    for (cpu, khz, gov) in [
        (0, "3400000\n", "performance\n"),
        (1, "800000\n", "powersave\n"),
        (2, "garbage\n", "power save; rm -rf\n"),
    ] {
        put(&cpufreq(cpu, "scaling_cur_freq"), khz);
        put(&cpufreq(cpu, "scaling_governor"), gov);
    }
    let root = HostRoot::at(dir.path());
    let first = read_host(&root);
    assert_eq!(first.freq_khz, vec![(0, 3_400_000), (1, 800_000)]);
    let govs = |s: &Sample| {
        s.governors
            .iter()
            .map(|g| (g.governor.clone(), g.cpus.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        govs(&first),
        vec![
            ("performance".into(), vec![0]),
            ("powersave".into(), vec![1])
        ]
    );
    // The hook switches CPU 1 and the clock moves: neither is read again at
    // once...
    put(&cpufreq(1, "scaling_governor"), "performance\n");
    put(&cpufreq(1, "scaling_cur_freq"), "3000000\n");
    let soon = vfio_assistant::monitor::sample::read_host_after(&root, Some(&first));
    assert_eq!(govs(&soon), govs(&first));
    assert_eq!(soon.freq_khz, first.freq_khz);
    // ...the clock after a second, the governor after five.
    // (Each previous sample says its clock read was instant: how long the
    // real read took is the machine's business, not this test's.)
    let after = |secs: u64, freq: bool| {
        let back = secs * 1_000_000_000;
        let aged = Sample {
            freq_t_ns: first.freq_t_ns.saturating_sub(if freq { back } else { 0 }),
            governors_t_ns: first.governors_t_ns.saturating_sub(back),
            freq_cost_ns: 0,
            ..first.clone()
        };
        vfio_assistant::monitor::sample::read_host_after(&root, Some(&aged))
    };
    let second = after(2, true);
    assert_eq!(second.freq_khz, vec![(0, 3_400_000), (1, 3_000_000)]);
    assert_eq!(govs(&second), govs(&first));
    // A kernel that asks each CPU in turn (10 ms each): read rarer, and said.
    assert_eq!(freq_every_ns(300_000), 1_000_000_000);
    assert_eq!(freq_every_ns(100_000_000), 5_000_000_000);
    assert_eq!(clocks_note(19_000_000), None);
    assert!(clocks_note(100_000_000).is_some_and(|n| n.contains("every 5 s")));
    let slow = vfio_assistant::monitor::sample::read_host_after(
        &root,
        Some(&Sample {
            freq_t_ns: first.freq_t_ns.saturating_sub(2_000_000_000),
            freq_cost_ns: 100_000_000,
            ..first.clone()
        }),
    );
    assert_eq!(slow.freq_khz, first.freq_khz, "not read again after 2 s");
    assert!(
        slow.problems
            .iter()
            .any(|p| p.contains("took 100 ms") && p.contains("every 5 s")),
        "{:?}",
        slow.problems
    );
    let fifth = after(6, false);
    assert_eq!(fifth.freq_khz, first.freq_khz, "read a moment ago");
    assert_eq!(govs(&fifth), vec![("performance".into(), vec![0, 1])]);
    let r = rates(
        &first,
        &Sample {
            t_ns: first.t_ns + 1_000_000_000,
            ..soon
        },
        None,
    );
    assert_eq!(r.freq_mhz, vec![(0, 3400.0), (1, 800.0)]);
    assert_eq!(r.governors_text(), "performance on 0, powersave on 1");
    let block = vfio_assistant::cli::monitor::render(&vfio_assistant::monitor::sampler::Update {
        t_s: 1.0,
        rates: r,
        vm: None,
        vm_problem: None,
        ended: None,
    });
    assert!(
        block.contains("MHz per CPU           0:3400 1:800"),
        "{block}"
    );
    assert!(
        block.contains("governor              performance on 0, powersave on 1"),
        "{block}"
    );
}
