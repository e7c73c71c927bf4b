//! The keyboard and mouse list and the USB map read off a real booted
//! Debian 12 host (tests/fixtures/hosts/e2e-debian12-grub, captured by the
//! real-host run: QEMU's xHCI with a USB keyboard and mouse): the evdev
//! nodes by their stable names with the kernel's device names, the legacy
//! mousedev node left out; the controller by its PCI address with what is
//! plugged into each port; passing that controller refused, because it
//! holds the host's only keyboard.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::path::Path;
use vfio_assistant::host::input::{InputKind, read_input_devices};
use vfio_assistant::host::usb::{holds_only_keyboard, read_usb};
use vfio_assistant::sysroot::HostRoot;

fn host() -> HostRoot {
    HostRoot::at(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/e2e-debian12-grub"),
    )
}

#[test]
fn keyboard_and_mouse_by_id_with_their_names() {
    let d = read_input_devices(&host());
    let kinds: Vec<(InputKind, &str, Option<&str>, Option<&str>)> = d
        .iter()
        .map(|x| {
            (
                x.kind,
                x.by_id.as_str(),
                x.event_node.as_deref(),
                x.name.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (
                InputKind::Keyboard,
                "/dev/input/by-id/usb-QEMU_QEMU_USB_Keyboard_68284-0000:00:1c.1:00.0-1-event-kbd",
                Some("/dev/input/event2"),
                Some("QEMU QEMU USB Keyboard"),
            ),
            (
                InputKind::Mouse,
                "/dev/input/by-id/usb-QEMU_QEMU_USB_Mouse_89126-0000:00:1c.1:00.0-2-event-mouse",
                Some("/dev/input/event3"),
                Some("QEMU QEMU USB Mouse"),
            ),
        ]
    );
}

#[test]
fn the_usb_map_and_the_only_keyboard() {
    let root = host();
    let c = read_usb(&root);
    assert_eq!(c.len(), 1, "{c:#?}");
    let x = &c[0];
    assert_eq!(x.pci_address.as_deref(), Some("0000:02:00.0"));
    assert_eq!(x.buses, vec![1, 2]);
    let plugged: Vec<(&str, bool, bool, Option<u16>)> = x
        .devices
        .iter()
        .map(|d| (d.path.as_str(), d.keyboard, d.mouse, d.vendor))
        .collect();
    assert_eq!(
        plugged,
        vec![
            ("1-1", true, false, Some(0x0627)),
            ("1-2", false, true, Some(0x0627))
        ]
    );
    let why = holds_only_keyboard(&c, "0000:02:00.0").expect("refused");
    assert!(why.contains("keyboard"), "{why}");
    assert!(holds_only_keyboard(&c, "0000:01:00.0").is_none());
}
