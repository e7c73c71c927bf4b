//! The host's keyboards and mice as libvirt's evdev passthrough takes them:
//! the stable names udev gives under `/dev/input/by-id` (`…-event-kbd`,
//! `…-event-mouse`; gaming gear has several, `-if01-event-kbd`), each with
//! the event node it points at and the device's own name from sysfs. Only
//! `event` nodes work (libvirt: "is not an evdev device"); a `-mouse` node
//! without `event` is the legacy mousedev interface and is left out.
//!
//! `watch` is the "press a key on the keyboard you want to give the VM"
//! picker: it reads input events from the candidates for a few seconds and
//! says which reacted, so the user never has to guess among four nodes of
//! one keyboard. It reads the live host only (a captured root has no
//! devices to press).

use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    Keyboard,
    Mouse,
    Joystick,
    Other,
}

impl InputKind {
    pub fn word(self) -> &'static str {
        match self {
            InputKind::Keyboard => "keyboard",
            InputKind::Mouse => "mouse",
            InputKind::Joystick => "joystick",
            InputKind::Other => "input device",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputDevice {
    /// The stable path libvirt's `<source dev=…>` takes
    /// (`/dev/input/by-id/usb-Logitech_G915-event-kbd`).
    pub by_id: String,
    /// The node it points at now (`/dev/input/event3`): changes at replug.
    pub event_node: Option<String>,
    pub kind: InputKind,
    /// The device's name (`/sys/class/input/eventN/device/name`).
    pub name: Option<String>,
    /// USB interface number from the name (`-if01-`), `None` for the first.
    pub interface: Option<String>,
}

/// Kind and interface from a by-id name (`…-if01-event-kbd`).
pub fn classify(name: &str) -> Option<(InputKind, Option<String>)> {
    let (rest, kind) = if let Some(r) = name.strip_suffix("-event-kbd") {
        (r, InputKind::Keyboard)
    } else if let Some(r) = name.strip_suffix("-event-mouse") {
        (r, InputKind::Mouse)
    } else if let Some(r) = name.strip_suffix("-event-joystick") {
        (r, InputKind::Joystick)
    } else if name.contains("-event-") || name.ends_with("-event") {
        (name, InputKind::Other)
    } else {
        return None;
    };
    let interface = rest
        .rsplit_once("-if")
        .map(|(_, i)| i.to_string())
        .filter(|i| i.len() == 2 && i.chars().all(|c| c.is_ascii_hexdigit()));
    Some((kind, interface))
}

/// Every evdev device under `/dev/input/by-id`, keyboards first.
pub fn read_input_devices(root: &HostRoot) -> Vec<InputDevice> {
    let dir = HostPath::dev("input/by-id");
    let Ok(names) = root.list_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<InputDevice> = names
        .iter()
        .filter_map(|n| {
            let (kind, interface) = classify(n)?;
            let link = dir.join(n);
            let event = root
                .resolve_link(&link)
                .ok()
                .flatten()
                .and_then(|t| t.file_name());
            let name = event.as_ref().and_then(|e| {
                root.read_attr(&HostPath::sys(&format!("class/input/{e}/device/name")))
                    .ok()
            });
            Some(InputDevice {
                by_id: link.to_string(),
                event_node: event.map(|e| format!("/dev/input/{e}")),
                kind,
                name,
                interface,
            })
        })
        .collect();
    out.sort_by(|a, b| (a.kind, &a.by_id).cmp(&(b.kind, &b.by_id)));
    out
}

/// What one candidate did while it was watched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Reaction {
    pub by_id: String,
    /// Key presses and releases (EV_KEY).
    pub keys: u32,
    /// Relative motion and wheel events (EV_REL).
    pub moves: u32,
    /// Milliseconds from the start of the watch to its first event.
    pub first_ms: Option<u64>,
}

/// What to do about a node that would not open: the permission, or a
/// device that is not there (unplugged, or a mistyped path).
fn open_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            " (reading input devices needs root or the 'input' group)"
        }
        std::io::ErrorKind::NotFound => " (no such device now: unplugged, or see `input list`)",
        _ => "",
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("the devices of a captured host cannot be pressed: watch the live host")]
    NotLive,
    // Not `source`: the words are said once, here, not again as a cause.
    #[error("{path}: {err}{}", open_hint(err))]
    Open { path: String, err: std::io::Error },
    #[error("no keyboards or mice under /dev/input/by-id to watch")]
    Nothing,
}

// struct input_event on 64-bit Linux: a timeval (16 bytes), type (u16),
// code (u16), value (i32).
const EVENT_SIZE: usize = 24;
const EV_KEY: u16 = 1;
const EV_REL: u16 = 2;

/// Count one buffer of input events into `r`.
pub fn count_events(buf: &[u8], r: &mut Reaction, at_ms: u64) {
    for ev in buf.chunks_exact(EVENT_SIZE) {
        let kind = u16::from_ne_bytes([ev[16], ev[17]]);
        let value = i32::from_ne_bytes([ev[20], ev[21], ev[22], ev[23]]);
        match kind {
            // Autorepeat (2) is not a press of the user's.
            EV_KEY if value != 2 => r.keys += 1,
            EV_REL => r.moves += 1,
            _ => continue,
        }
        r.first_ms.get_or_insert(at_ms);
    }
}

/// Watch `devices` (their by-id paths) for `duration`, or until `stop`
/// says so: which reacted, those that did first, most events first.
pub fn watch(
    root: &HostRoot,
    devices: &[String],
    duration: Duration,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Reaction>, WatchError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if !root.is_live() {
        return Err(WatchError::NotLive);
    }
    if devices.is_empty() {
        return Err(WatchError::Nothing);
    }
    let mut open = Vec::new();
    for d in devices {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(d)
            .map_err(|err| WatchError::Open {
                path: d.clone(),
                err,
            })?;
        open.push((
            f,
            Reaction {
                by_id: d.clone(),
                keys: 0,
                moves: 0,
                first_ms: None,
            },
        ));
    }
    let start = Instant::now();
    let mut buf = vec![0u8; EVENT_SIZE * 64];
    while start.elapsed() < duration && !stop() {
        let mut fds: Vec<rustix::event::PollFd> = open
            .iter()
            .map(|(f, _)| rustix::event::PollFd::new(f, rustix::event::PollFlags::IN))
            .collect();
        let timeout = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        if rustix::event::poll(&mut fds, Some(&timeout)).is_err() {
            continue;
        }
        let ready: Vec<bool> = fds.iter().map(|p| !p.revents().is_empty()).collect();
        drop(fds);
        let at_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        for ((f, r), ready) in open.iter_mut().zip(ready) {
            if !ready {
                continue;
            }
            // A device unplugged while watched reads an error: it stops.
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 {
                    break;
                }
                count_events(&buf[..n], r, at_ms);
            }
        }
    }
    let mut out: Vec<Reaction> = open.into_iter().map(|(_, r)| r).collect();
    out.sort_by_key(|r| {
        (
            std::cmp::Reverse(r.keys + r.moves > 0),
            r.first_ms.unwrap_or(u64::MAX),
            std::cmp::Reverse(r.keys + r.moves),
        )
    });
    Ok(out)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_node_that_would_not_open_says_what_to_do() {
        use std::io::{Error, ErrorKind};
        assert!(open_hint(&Error::from(ErrorKind::PermissionDenied)).contains("'input' group"));
        assert!(open_hint(&Error::from(ErrorKind::NotFound)).contains("unplugged"));
    }

    use super::*;

    #[test]
    fn by_id_names_say_kind_and_interface() {
        assert_eq!(
            classify("usb-Logitech_G915_TKL-event-kbd"),
            Some((InputKind::Keyboard, None))
        );
        assert_eq!(
            classify("usb-Razer_Razer_DeathAdder_V2-if01-event-kbd"),
            Some((InputKind::Keyboard, Some("01".into())))
        );
        assert_eq!(
            classify("usb-Logitech_USB_Receiver-if02-event-mouse"),
            Some((InputKind::Mouse, Some("02".into())))
        );
        // The legacy mousedev node is not an evdev device.
        assert_eq!(classify("usb-Logitech_USB_Receiver-if02-mouse"), None);
    }

    #[test]
    fn presses_and_moves_are_counted_repeats_are_not() {
        let ev = |kind: u16, value: i32| {
            let mut b = vec![0u8; 16];
            b.extend_from_slice(&kind.to_ne_bytes());
            b.extend_from_slice(&30u16.to_ne_bytes());
            b.extend_from_slice(&value.to_ne_bytes());
            b
        };
        let mut buf = Vec::new();
        for (k, v) in [(1, 1), (0, 0), (1, 2), (1, 0), (2, 5), (4, 7)] {
            buf.extend(ev(k, v));
        }
        let mut r = Reaction {
            by_id: "x".into(),
            keys: 0,
            moves: 0,
            first_ms: None,
        };
        count_events(&buf, &mut r, 40);
        assert_eq!((r.keys, r.moves, r.first_ms), (2, 1, Some(40)));
        // A torn read (not a whole event) counts nothing.
        count_events(&buf[..10], &mut r, 50);
        assert_eq!((r.keys, r.moves), (2, 1));
    }
}
