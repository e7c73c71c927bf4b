//! The live pages on another machine (a real sshd on 127.0.0.1; "there" is
//! this machine itself, logged into over SSH): its monitor runs there and
//! streams its samples over one session, a refused one ends with why; its
//! latency probe runs there; and the app's Monitor page shows that
//! machine's samples and runs its probe there.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{harness, wait_for};
use crate::support::sshd::{Sshd, script, sshd};
use egui_kittest::kittest::Queryable;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use vfio_assistant::remote::{SshTarget, Via};
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

fn ours() -> &'static str {
    env!("CARGO_BIN_EXE_vfio-assistant")
}

/// This machine itself, over SSH, its program there `program`.
fn there(s: &Sshd, program: &str) -> SshTarget {
    let mut t = SshTarget::parse(&s.target(None)).unwrap();
    t.via = Via {
        ssh: Some(s.ssh("client", &s.known_hosts())),
        program: Some(program.into()),
        helper: None,
    };
    t
}

fn online_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    vfio_assistant::parse::cpulist::parse_cpulist(text.trim())
        .unwrap()
        .len()
}

/// Processes running our monitor with this interval (their command lines).
fn monitors_with(interval: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| {
            let w: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            w.contains(&b"monitor".as_slice()) && w.contains(&interval.as_bytes())
        })
        .count()
}

#[test]
fn the_monitor_runs_there_and_streams_its_samples() {
    let s = sshd();
    let t = there(&s, ours());
    let stop = Arc::new(AtomicBool::new(false));
    let rx = t
        .spawn_monitor(None, Duration::from_millis(190), stop.clone(), || {})
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        let u = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(u.ended, None, "{:?}", u.ended);
        got.push(u);
    }
    for u in &got {
        assert_eq!(u.rates.irq_per_cpu.len(), online_cpus(), "{u:?}");
        assert_eq!(u.rates.cpu_use.len(), online_cpus(), "{u:?}");
    }
    assert!(got[2].t_s > got[0].t_s, "one session, its clock going on");
    assert_eq!(
        monitors_with("190"),
        1,
        "one monitor there, not one per sample"
    );
    // Stopped from here: the session ends, and the monitor there with it.
    stop.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    while rx.recv_timeout(Duration::from_secs(10)).is_ok() {
        assert!(t0.elapsed() < Duration::from_secs(10), "the feed ended");
    }
    while monitors_with("190") > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the monitor there ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stopped while nothing comes (a sample every 5 s, stopped before the
/// first): the feed ends at once, not at the next sample, and the monitor
/// there ends at its next write (no terminal there to hang up).
#[test]
fn a_silent_monitor_is_stopped_at_once() {
    let s = sshd();
    let t = there(&s, ours());
    let stop = Arc::new(AtomicBool::new(false));
    let rx = t
        .spawn_monitor(None, Duration::from_millis(4_950), stop.clone(), || {})
        .unwrap();
    let t0 = Instant::now();
    while monitors_with("4950") == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the monitor there started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    assert!(rx.recv_timeout(Duration::from_secs(4)).is_err());
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "the feed ended at once: {:?}",
        t0.elapsed()
    );
    while monitors_with("4950") > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the monitor there ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_monitor_that_cannot_run_there_says_why() {
    let s = sshd();
    let t = there(&s, "/nonexistent/vfio-assistant");
    let rx = t
        .spawn_monitor(
            None,
            Duration::from_secs(1),
            Arc::new(AtomicBool::new(false)),
            || {},
        )
        .unwrap();
    let u = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let why = u.ended.unwrap();
    assert!(
        why.contains("has no vfio-assistant") && why.contains("Install the same package"),
        "{why}"
    );
}

#[test]
fn the_latency_probe_runs_there() {
    let s = sshd();
    let t = there(&s, ours());
    let (stats, held) = t.latency(&[0], 1, true).unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].cpu, 0);
    assert!(stats[0].summary.samples > 100, "{:?}", stats[0]);
    // Shallow idle states need root there: as root it is measured, else
    // refused in words.
    match held.unwrap() {
        Ok(h) => {
            assert!(rustix::process::geteuid().is_root());
            assert_eq!(h[0].cpu, 0);
        }
        Err(e) => {
            assert!(!rustix::process::geteuid().is_root(), "{e}");
            assert!(e.to_string().contains("needs root there"), "{e}");
        }
    }
}

#[test]
fn the_monitor_page_shows_the_other_machine_and_probes_there() {
    let s = sshd();
    let t = there(&s, ours());
    let state = State {
        page: Page::Overview,
        ..State::default()
    };
    let app = App::with_remote(t, state, || {});
    let mut h = harness(app, [1280.0, 1600.0]);
    wait_for(&mut h, 120, |a| {
        (a.snapshot.is_some() || a.error.is_some()) && !a.is_scanning()
    });
    assert!(h.state().error.is_none(), "{:?}", h.state().error);
    h.state_mut().state.page = Page::Monitor;
    wait_for(&mut h, 60, |a| {
        a.monitor.irq_total.len() >= 2 || a.monitor.ended.is_some()
    });
    assert_eq!(h.state().monitor.ended, None);
    let last = h.state().monitor.last.clone().unwrap();
    assert_eq!(last.rates.irq_per_cpu.len(), online_cpus());
    h.get_by_label_contains("its monitor runs there");
    // Not the captured-host warning: that machine is live.
    assert!(h.query_by_label_contains("A captured host").is_none());
    h.state_mut().state.latency_cpus = "0".into();
    h.step();
    h.get_by_label("Run the probe (5 s)").click();
    wait_for(&mut h, 60, |a| a.monitor.latency.is_some());
    let stats = h.state().monitor.latency.clone().unwrap().unwrap();
    assert_eq!(stats[0].cpu, 0);
    assert!(stats[0].summary.samples > 1000, "{:?}", stats[0]);
    // Leaving the page ends the session there.
    h.get_by_label("Overview").click();
    h.step();
    assert!(!h.state().is_monitoring());
}

/// eframe's storage, in memory.
#[derive(Default)]
struct Memory(std::collections::HashMap<String, String>);

impl eframe::Storage for Memory {
    fn get_string(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }
    fn set_string(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), value);
    }
    fn remove_string(&mut self, key: &str) {
        self.0.remove(key);
    }
    fn flush(&mut self) {}
}

/// Another machine's choices are kept under its machine id (the key the
/// app running there uses), whatever address reached it: the ones saved
/// before are taken up once its snapshot says who it is.
#[test]
fn the_choices_follow_the_machine_not_the_address() {
    let s = sshd();
    let t = there(&s, ours());
    let id = std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| t.len() == 32 && t.chars().all(|c| c.is_ascii_hexdigit()));
    let machine_key = id
        .as_ref()
        .map(|id| vfio_assistant::ui::state::state_key(&format!("live:{id}")));
    let mut storage = Memory::default();
    if let Some(k) = &machine_key {
        let saved = State {
            monitor_domain: "chosen-on-that-machine".into(),
            ..State::default()
        };
        eframe::set_value(&mut storage, k, &saved);
    }
    let app = App::with_remote(
        t,
        State {
            page: Page::Cpu,
            ..State::default()
        },
        || {},
    );
    let address_key = app.state_key().to_string();
    assert!(address_key.contains("ssh:ssh://"), "{address_key}");
    let mut h = egui_kittest::Harness::builder()
        .with_size([1000.0, 800.0])
        .build_ui_state(
            move |ui, app: &mut App| {
                app.logic_with(Some(&mut storage));
                app.ui_content(ui);
            },
            app,
        );
    wait_for(&mut h, 120, |a| {
        (a.snapshot.is_some() || a.error.is_some()) && !a.is_scanning()
    });
    assert!(h.state().error.is_none(), "{:?}", h.state().error);
    match machine_key {
        Some(k) => {
            assert_eq!(h.state().state_key(), k);
            assert_eq!(h.state().state.monitor_domain, "chosen-on-that-machine");
            assert_eq!(h.state().state.page, Page::Cpu, "the page shown stays");
        }
        // A machine without an id keeps the address's key.
        None => assert_eq!(h.state().state_key(), address_key),
    }
}

/// A feed that ends (the program there fails) is said on the page, and the
/// page does not start it again by itself: "Connect again" does.
#[test]
fn the_monitor_page_says_when_the_feed_ended() {
    let s = sshd();
    let wrapper = s.dir.path().join("monitor-fails");
    script(
        &wrapper,
        &format!(
            "#!/bin/sh\ncase \"$*\" in *monitor*) echo 'monitor: cannot read /proc/interrupts' >&2; exit 3;; esac\nexec {} \"$@\"\n",
            ours()
        ),
    );
    let t = there(&s, wrapper.to_str().unwrap());
    let app = App::with_remote(
        t,
        State {
            page: Page::Overview,
            ..State::default()
        },
        || {},
    );
    let mut h = harness(app, [1280.0, 1000.0]);
    wait_for(&mut h, 120, |a| {
        (a.snapshot.is_some() || a.error.is_some()) && !a.is_scanning()
    });
    assert!(h.state().error.is_none(), "{:?}", h.state().error);
    h.state_mut().state.page = Page::Monitor;
    wait_for(&mut h, 60, |a| a.monitor.ended.is_some());
    let why = h.state().monitor.ended.clone().unwrap();
    assert!(why.contains("cannot read /proc/interrupts"), "{why}");
    h.get_by_label_contains("The feed ended: ");
    for _ in 0..20 {
        h.step();
    }
    assert!(!h.state().is_monitoring(), "not started again by itself");
    h.get_by_label("Connect again").click();
    h.step();
    assert!(h.state().monitor.ended.is_none());
    wait_for(&mut h, 60, |a| a.monitor.ended.is_some());
}

fn input_event(kind: u16, code: u16, value: i32) -> Vec<u8> {
    let mut b = vec![0u8; 16];
    b.extend_from_slice(&kind.to_ne_bytes());
    b.extend_from_slice(&code.to_ne_bytes());
    b.extend_from_slice(&value.to_ne_bytes());
    b
}

/// The "press a key" picker runs there: of two nodes on that machine (FIFOs
/// standing in for event nodes), the one that gets a key press and a move
/// while it is watched comes back first with its counts.
#[test]
fn the_picker_watches_that_machines_keyboards() {
    use std::io::Write;
    let s = sshd();
    let t = there(&s, ours());
    let dir = tempfile::tempdir().unwrap();
    let quiet = dir.path().join("usb-Quiet_Board-event-kbd");
    let pressed = dir.path().join("usb-Pressed_Board-event-kbd");
    for p in [&quiet, &pressed] {
        rustix::fs::mkfifoat(rustix::fs::CWD, p, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
    }
    let p = pressed.clone();
    let writer = std::thread::spawn(move || {
        // Opened once the watch there has opened it (a FIFO's writer waits).
        let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        let mut buf = Vec::new();
        for (k, c, v) in [(1, 30, 1), (0, 0, 0), (1, 30, 0), (2, 0, 5)] {
            buf.extend(input_event(k, c, v));
        }
        f.write_all(&buf).unwrap();
        std::thread::sleep(Duration::from_secs(4));
    });
    let nodes = vec![quiet.display().to_string(), pressed.display().to_string()];
    let r = t.watch_input(&nodes, 3).unwrap_or_else(|e| {
        // The writer waits for a reader: given one, then the failure said.
        let _ = std::fs::File::open(&pressed);
        panic!("{e}")
    });
    writer.join().unwrap();
    assert_eq!(r[0].by_id, pressed.display().to_string(), "{r:?}");
    assert_eq!((r[0].keys, r[0].moves), (2, 1), "{r:?}");
    assert_eq!((r[1].keys, r[1].moves), (0, 0), "{r:?}");
}
