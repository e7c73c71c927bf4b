//! The "press a key" picker (host::input::watch) on the live host's own
//! machinery: two candidate nodes (FIFOs standing in for
//! /dev/input/by-id/*-event-* — the same non-blocking reads and poll), one
//! of which gets real `struct input_event` records (a key press and release,
//! an autorepeat, a mouse move) from another thread while it is watched. The
//! one that reacted comes first with its counts; the silent one reacted to
//! nothing. A captured host refuses to be watched.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::io::Write;
use std::time::Duration;
use vfio_assistant::host::input::{WatchError, watch};
use vfio_assistant::sysroot::HostRoot;

fn event(kind: u16, code: u16, value: i32) -> Vec<u8> {
    let mut b = vec![0u8; 16];
    b.extend_from_slice(&kind.to_ne_bytes());
    b.extend_from_slice(&code.to_ne_bytes());
    b.extend_from_slice(&value.to_ne_bytes());
    b
}

fn fifo(path: &std::path::Path) {
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        path,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
}

#[test]
fn the_node_that_reacted_is_picked() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = dir.path().join("usb-Quiet_Board-event-kbd");
    let pressed = dir.path().join("usb-Pressed_Board-event-kbd");
    fifo(&quiet);
    fifo(&pressed);
    let p = pressed.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        let mut buf = Vec::new();
        // A press, a sync, an autorepeat (not counted), a release, a move.
        for (k, c, v) in [(1, 30, 1), (0, 0, 0), (1, 30, 2), (1, 30, 0), (2, 0, 5)] {
            buf.extend(event(k, c, v));
        }
        f.write_all(&buf).unwrap();
        // Held open until the watch is over, as a device is.
        std::thread::sleep(Duration::from_millis(1500));
    });
    let devices = vec![quiet.display().to_string(), pressed.display().to_string()];
    let r = watch(&HostRoot::live(), &devices, Duration::from_secs(2), &|| {
        false
    })
    .unwrap();
    writer.join().unwrap();
    assert_eq!(r[0].by_id, pressed.display().to_string(), "{r:?}");
    assert_eq!((r[0].keys, r[0].moves), (2, 1), "{r:?}");
    assert!(r[0].first_ms.is_some_and(|ms| ms >= 200), "{r:?}");
    assert_eq!(
        (r[1].keys, r[1].moves, r[1].first_ms),
        (0, 0, None),
        "{r:?}"
    );
}

#[test]
fn a_captured_host_and_a_missing_node_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let e = watch(
        &HostRoot::at(dir.path()),
        &["/dev/input/by-id/x-event-kbd".into()],
        Duration::from_millis(10),
        &|| false,
    )
    .unwrap_err();
    assert!(matches!(e, WatchError::NotLive), "{e}");
    let gone = dir.path().join("usb-Gone-event-kbd");
    let e = watch(
        &HostRoot::live(),
        &[gone.display().to_string()],
        Duration::from_millis(10),
        &|| false,
    )
    .unwrap_err();
    assert!(e.to_string().contains("usb-Gone-event-kbd"), "{e}");
    // Not there is said as not there (the permission is not the trouble),
    // and once.
    assert!(e.to_string().contains("unplugged"), "{e}");
    assert!(!e.to_string().contains("'input' group"), "{e}");
    assert_eq!(e.to_string().matches("No such file").count(), 1, "{e}");
}
