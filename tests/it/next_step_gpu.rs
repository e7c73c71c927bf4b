//! The one next step names the GPU the host does not show its screen on,
//! whatever the PCI order: on the most common desktop (the first card or
//! the iGPU for the host, a second card for the VM) it must never propose
//! the card with the console. Found from what the host says (boot_vga,
//! connected displays), on a real X570 listing with two NVIDIA cards.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{base_host, put};
use vfio_assistant::host::scan;
use vfio_assistant::report::findings::{FindingsRequest, host_findings};
use vfio_assistant::report::next_step::{NextAction, next_step};
use vfio_assistant::sysroot::HostRoot;

fn device_named(boot_vga_on: &str) -> Option<String> {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let r = dir.path();
    for (gpu, vga) in [("0000:0b:00.0", "0"), ("0000:0c:00.0", "0")] {
        let v = if gpu == boot_vga_on { "1" } else { vga };
        put(
            r,
            &format!("sys/devices/pci0000:00/{gpu}/boot_vga"),
            &format!("{v}\n"),
        );
        crate::support::hosts::bind(r, gpu, "nouveau");
    }
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let findings = host_findings(&root, &snap, &FindingsRequest::default());
    match next_step(&snap, &findings).action {
        NextAction::Tuning {
            change: "vfio-boot",
            device,
        } => device,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_next_step_never_names_the_card_with_the_console() {
    // The console on the first card in PCI order: the second one goes.
    assert_eq!(
        device_named("0000:0b:00.0").as_deref(),
        Some("0000:0c:00.0")
    );
    // On the second: the first goes.
    assert_eq!(
        device_named("0000:0c:00.0").as_deref(),
        Some("0000:0b:00.0")
    );
}
