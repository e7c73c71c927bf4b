//! The Monitor page on this machine through the accessibility tree: the heat
//! strip names each CPU's interrupt rate, the busiest sources are listed, and
//! with a real guest (2 vCPUs pinned to CPUs 0 and 1; skipped where there is no
//! KVM, required in CI) the page follows it and shows each vCPU on its pin.
//! Leaving the page stops the sampler.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use std::time::{Duration, Instant};
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

fn live_monitor(domain: &str) -> Harness<'static, App> {
    let state = State {
        page: Page::Monitor,
        monitor_domain: domain.into(),
        ..State::default()
    };
    let app = App::with_source(Source::Live, state, || {});
    crate::support::gui::harness(app, [1200.0, 900.0])
}

/// Step the UI (the sampler is on its own thread) until `done` or the deadline.
fn wait_for(h: &mut Harness<'static, App>, secs: u64, done: impl Fn(&App) -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end && !done(h.state()) {
        h.step();
        std::thread::sleep(Duration::from_millis(50));
    }
    h.step();
}

#[test]
fn host_interrupts_per_cpu_and_sources() {
    let mut h = live_monitor("");
    wait_for(&mut h, 20, |a| a.monitor.irq_total.len() >= 2);
    assert!(h.state().is_monitoring());
    // Heat over the topology drawing (the default), then as a compact strip.
    h.get_by_label_contains("CPU 0: ");
    h.get_by_label("Package 0");
    h.get_by_label("compact strip").click();
    h.step();
    h.step();
    assert!(h.state().state.monitor_strip);
    assert!(h.query_by_label("Package 0").is_none());
    h.get_by_label_contains("CPU 0: ");
    h.get_by_label("Busiest interrupt sources");
    h.get_by_label_contains("Host only: name a running VM");
    // Leaving the page stops the sampler.
    h.get_by_label("Overview").click();
    h.step();
    assert!(!h.state().is_monitoring());
}

#[test]
fn follows_a_real_guest_and_shows_its_vcpus_on_their_pins() {
    let Some(hv) = crate::support::vm::system() else {
        return;
    };
    if !crate::support::vm::kvm_guest_possible(2) {
        return;
    }
    let guest = crate::support::vm::running_guest(&hv, "gui", &[0, 1]);
    let name = guest.1.clone();
    let mut h = live_monitor(&name);
    wait_for(&mut h, 30, |a| {
        a.monitor
            .last
            .as_ref()
            .is_some_and(|u| u.vm.is_some() && u.rates.vcpus.len() == 2)
    });
    h.get_by_label_contains(&format!("Following {name}"));
    h.get_by_label_contains("vCPU 0 on CPU 0 (pinned [0])");
    h.get_by_label_contains("vCPU 1 on CPU 1 (pinned [1])");
    // On the topology drawing, the VM's CPUs are named as such.
    assert_eq!(
        h.get_all_by_label_contains("a VM CPU").count(),
        2,
        "CPUs 0 and 1 are marked as the VM's"
    );
    h.get_by_label("KVM exits by kind");
    assert!(h.query_by_label_contains("not on its pinned CPU").is_none());
}

#[test]
fn the_latency_probe_runs_from_the_page() {
    let mut h = live_monitor("");
    wait_for(&mut h, 20, |a| a.monitor.irq_total.len() >= 2);
    h.state_mut().state.latency_cpus = "0".into();
    h.step();
    h.get_by_label("Run the probe (5 s)").click();
    wait_for(&mut h, 30, |a| a.monitor.latency.is_some());
    let stats = h.state().monitor.latency.clone().unwrap().unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].cpu, 0);
    assert!(stats[0].summary.samples > 1000, "{:?}", stats[0]);
    h.get_by_label_contains("CPU 0: min ");
    assert_eq!(
        stats[0].summary.timeline_us.len(),
        50,
        "5 s in 100 ms windows"
    );
    // A new sampler keeps the probe's answer.
    assert!(h.state().is_monitoring());
}

/// The probe run twice from the page: as configured and with every CPU kept
/// to shallow idle states (as root; otherwise the page says why not).
#[test]
fn the_probe_compares_with_deep_idle_held_off() {
    let mut h = live_monitor("");
    wait_for(&mut h, 20, |a| a.monitor.irq_total.len() >= 2);
    h.state_mut().state.latency_cpus = "0".into();
    h.step();
    h.get_by_label("and with shallow idle states only").click();
    h.step();
    h.step();
    assert!(h.state().state.latency_compare_idle);
    h.get_by_label("Run the probe (2 x 5 s)").click();
    wait_for(&mut h, 40, |a| a.monitor.latency.is_some());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match h.state().monitor.latency_held.clone() {
        Some(Ok(held)) => {
            assert!(root);
            assert_eq!(held[0].cpu, 0);
            assert!(held[0].summary.samples > 1000, "{:?}", held[0]);
            h.get_by_label_contains("µs as configured, ");
        }
        Some(Err(e)) => {
            assert!(!root, "{e}");
            h.get_by_label_contains("With shallow idle states only: not measured");
        }
        None => panic!("the second run was asked for"),
    }
}

/// With the field empty the probe goes where it is useful and harmless: the
/// housekeeping CPUs while a VM runs, the board's pins before it starts, the
/// isolated CPUs otherwise. On the real Ryzen 5 1600 topology (12 CPUs).
#[test]
fn the_probe_defaults_to_the_right_cpus() {
    use std::collections::BTreeSet;
    use vfio_assistant::ui::views::monitor::default_probe_cpus;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/topology/ghw-amd-ryzen5-1600");
    let t = vfio_assistant::host::scan(&vfio_assistant::sysroot::HostRoot::at(&root))
        .unwrap()
        .topology;
    let mut state = State::default();
    assert_eq!(default_probe_cpus(&t, &state, &BTreeSet::new()), None);
    state.board.pins = [(0, 4), (1, 10), (2, 5)].into_iter().collect();
    let (cpus, why) = default_probe_cpus(&t, &state, &BTreeSet::new()).unwrap();
    assert_eq!(cpus, vec![4, 5, 10]);
    assert!(why.contains("before the VM starts"));
    // A running VM on 2-5 and 8-11: never probe under it.
    let vm: BTreeSet<u32> = [2, 3, 4, 5, 8, 9, 10, 11].into();
    let (cpus, why) = default_probe_cpus(&t, &state, &vm).unwrap();
    assert_eq!(cpus, vec![0, 1, 6, 7]);
    assert!(why.contains("housekeeping"));
    let all: BTreeSet<u32> = (0..12).collect();
    assert_eq!(
        default_probe_cpus(&t, &state, &all),
        None,
        "nothing left for the host"
    );
    // No board, no VM: the CPUs isolated on the kernel command line.
    let dir = tempfile::tempdir().unwrap();
    crate::support::hosts::copy_tree(&root, dir.path());
    std::fs::write(
        dir.path().join("sys/devices/system/cpu/isolated"),
        "3-5,9-11\n",
    )
    .unwrap();
    let t = vfio_assistant::host::scan(&vfio_assistant::sysroot::HostRoot::at(dir.path()))
        .unwrap()
        .topology;
    let (cpus, why) = default_probe_cpus(&t, &State::default(), &BTreeSet::new()).unwrap();
    assert_eq!(cpus, vec![3, 4, 5, 9, 10, 11]);
    assert!(why.contains("isolated"));
}

#[test]
fn the_page_says_where_an_empty_probe_field_runs() {
    let state = State {
        page: Page::Monitor,
        board: vfio_assistant::pinning::board::Board {
            vcpus: 1,
            pins: [(0, 1)].into_iter().collect(),
            ..Default::default()
        },
        ..State::default()
    };
    let app = App::with_source(Source::Live, state, || {});
    let mut h = crate::support::gui::harness(app, [1200.0, 900.0]);
    wait_for(&mut h, 20, |a| a.monitor.last.is_some());
    h.get_by_label_contains("An empty field probes the CPUs the CPU page pins the vCPUs to");
    assert!(h.query_by_label("Run the probe (5 s)").is_some());
    // Nothing pinned, no VM: the page asks for CPUs (unless this machine
    // isolates some, which then are the default).
    let app = App::with_source(
        Source::Live,
        State {
            page: Page::Monitor,
            ..State::default()
        },
        || {},
    );
    let mut h = crate::support::gui::harness(app, [1200.0, 900.0]);
    wait_for(&mut h, 20, |a| a.monitor.last.is_some());
    assert!(
        h.query_by_label_contains("Type the CPUs to measure")
            .is_some()
            || h.query_by_label_contains("An empty field probes the isolated CPUs")
                .is_some()
    );
}

#[test]
fn troubleshoot_reads_a_real_guest() {
    let Some(hv) = crate::support::vm::system() else {
        return;
    };
    if !crate::support::vm::kvm_guest_possible(2) {
        return;
    }
    let guest = crate::support::vm::running_guest(&hv, "tsh", &[0, 1]);
    let state = State {
        page: Page::Troubleshoot,
        symptom: Some("stutter".into()),
        doctor_domain: guest.1.clone(),
        ..State::default()
    };
    let app = App::with_source(Source::Live, state, || {});
    let mut h = crate::support::gui::harness(app, [1200.0, 1400.0]);
    wait_for(&mut h, 30, |a| a.snapshot.is_some());
    h.get_by_label("Read the VM").click();
    wait_for(&mut h, 30, |a| {
        a.troubleshoot.vm_findings.is_some() && !a.is_busy()
    });
    let found = h.state().troubleshoot.vm_findings.clone().unwrap().unwrap();
    assert!(found.iter().any(|f| f.id == "vm.pinning"), "{found:#?}");
    h.get_by_label_contains("findings about the VM included");
    // vCPU 0 on CPU 0: a likely cause, shown with the host's findings.
    assert!(
        h.get_all_by_label_contains("The pinning has 1 problem(s)")
            .next()
            .is_some()
    );
    // Its buttons, with the state read live: force it off, see it off.
    use vfio_assistant::libvirt::DomainState;
    wait_for(&mut h, 30, |a| {
        matches!(a.troubleshoot.vm.state, Some(Ok(DomainState::Running)))
    });
    h.get_by_label("running");
    h.get_by_label("Force off").click();
    wait_for(&mut h, 30, |a| {
        matches!(a.troubleshoot.vm.state, Some(Ok(DomainState::Shutoff))) && !a.is_busy()
    });
    h.get_by_label_contains("is off (forced)");
    h.get_by_label("shut off");
    // And start it again from the same page.
    h.get_by_label("Start").click();
    wait_for(&mut h, 60, |a| {
        matches!(a.troubleshoot.vm.state, Some(Ok(DomainState::Running))) && !a.is_busy()
    });
    h.get_by_label("It is running.");
}

/// A captured host with cpufreq: each CPU says its clock and governor, and
/// the page says which governor runs where.
#[test]
fn the_page_says_clock_and_governor_per_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let put = |rel: &str, text: &str| crate::support::hosts::put(dir.path(), rel, text);
    put(
        "proc/interrupts",
        "           CPU0       CPU1\n  0:         10          0   IO-APIC   2-edge      timer\nLOC:        500        400   Local timer interrupts\n",
    );
    put(
        "proc/stat",
        "cpu  2 0 2 200 0 0 0 0 0 0\ncpu0 1 0 1 100 0 0 0 0 0 0\ncpu1 1 0 1 100 0 0 0 0 0 0\n",
    );
    for (cpu, khz, gov) in [(0, "3400000", "performance"), (1, "800000", "powersave")] {
        let d = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        put(&format!("{d}/scaling_cur_freq"), khz);
        put(&format!("{d}/scaling_governor"), gov);
    }
    // CPUs given: on the live host the probe button would be offered.
    let state = State {
        page: Page::Monitor,
        monitor_strip: true,
        latency_cpus: "0".into(),
        ..State::default()
    };
    let app = App::with_source(Source::Root(dir.path().into()), state, || {});
    let mut h = crate::support::gui::harness(app, [1200.0, 900.0]);
    wait_for(&mut h, 20, |a| a.monitor.last.is_some());
    h.get_by_label_contains("CPU frequency governor: performance on 0, powersave on 1");
    h.get_by_label_contains("3400 MHz, governor performance");
    h.get_by_label_contains("800 MHz, governor powersave");
    // A captured host: said at the top, and the probe (which would measure
    // this machine) is not offered.
    h.get_by_label_contains("A captured host (a snapshot or the demo)");
    assert!(
        h.get_by_label("Run the probe (5 s)")
            .accesskit_node()
            .is_disabled()
    );
}

/// The page holds still while samples come in: the probe's controls and
/// the plot stay where they are across 10 frames a second apart (the list
/// of busiest sources is padded to its rows), and the heat legend says
/// what red means.
#[test]
fn the_controls_do_not_move_across_frames() {
    let mut h = live_monitor("");
    wait_for(&mut h, 20, |a| a.monitor.irq_total.len() >= 2);
    h.get_by_label_contains("red: 10 000/s or more");
    let place = |h: &Harness<'static, App>| {
        let probe = h.get_by_label_contains("Run the probe").rect();
        let idle = h.get_by_label("and with shallow idle states only").rect();
        (probe, idle)
    };
    let first = place(&h);
    for i in 0..10 {
        let seen = h.state().monitor.irq_total.len();
        wait_for(&mut h, 5, |a| a.monitor.irq_total.len() > seen);
        assert_eq!(place(&h), first, "frame {i}: the controls moved");
    }
}
