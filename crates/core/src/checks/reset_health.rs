//! Whether a card came back: after a VM stops (or a shared GPU is given
//! back to the desktop), a card whose reset failed answers all ones from its
//! config space, sits in D3cold with no driver, or left the kernel's words
//! in its log ("not ready … after FLR; giving up", "Unable to change power
//! state from D3cold to D0, device inaccessible"). Said per GPU (with
//! `--device`, for that one, with a pass when it answers), with the fixes
//! that exist for its family: vendor-reset for the AMD cards it knows
//! (Polaris, Vega, Navi 10/12/14), `reset_method`'s choices, vfio-pci's
//! `disable_idle_d3`, and a plain sentence where nothing does
//! (shared/research/lend-gpu.md §4).

use super::model::{Finding, Status};
use crate::host::{HostSnapshot, PciEntry};

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "reset_health",
    ids: &[super::CheckId("device.came_back")],
    run: Some(check),
};

const ID: &str = "device.came_back";

/// What the kernel says when a function does not come back.
const GONE: &[&str] = &[
    "not ready",
    "Unable to change power state",
    "Refused to change power state",
    "can't change power state",
    "device inaccessible",
    "stuck in D3",
];

/// The AMD families gnif/vendor-reset resets (device id ranges): Polaris
/// 10/11/12, Vega 10 and 20, Navi 10, 12 and 14.
const VENDOR_RESET: &[(u16, u16, &str)] = &[
    (0x67c0, 0x67ff, "Polaris 10/11"),
    (0x6980, 0x699f, "Polaris 12"),
    (0x6860, 0x687f, "Vega 10"),
    (0x66a0, 0x66af, "Vega 20"),
    (0x7310, 0x731f, "Navi 10"),
    (0x7360, 0x7362, "Navi 12"),
    (0x7340, 0x734f, "Navi 14"),
];

/// The fix that exists for this card's family, in words.
pub fn family_fix(e: &PciEntry) -> String {
    let d = &e.device;
    let methods = if d.reset.methods.is_empty() {
        "none listed".to_string()
    } else {
        d.reset.methods.join(", ")
    };
    let choose = format!(
        "Its reset methods ({methods}): another can be chosen, e.g. `echo bus | sudo tee /sys/bus/pci/devices/{}/reset_method`.",
        d.address
    );
    match d.vendor_id.0 {
        0x1002 => {
            if let Some((_, _, fam)) = VENDOR_RESET
                .iter()
                .find(|(lo, hi, _)| (*lo..=*hi).contains(&d.device_id.0))
            {
                format!(
                    "An AMD {fam}: its reset is broken in hardware and vendor-reset (gnif/vendor-reset, DKMS) fixes it — load it at boot and set `reset_method` to device_specific (its udev rule does). {choose}"
                )
            } else {
                format!(
                    "An AMD card vendor-reset does not cover (RDNA2 and newer): nothing on the host fixes a failed reset. What helps: shut the guest down cleanly (never force it off), RadeonResetBugFix in the guest, `disable_idle_d3=1` for vfio-pci so it never idles into D3; else a reboot gives the card back. {choose}"
                )
            }
        }
        0x10de => format!(
            "An NVIDIA card resets with FLR or a bus reset; when it stays in D3, `options vfio-pci disable_idle_d3=1` keeps it awake while the VM is off. {choose}"
        ),
        _ => format!(
            "When it stays in D3, `options vfio-pci disable_idle_d3=1` keeps it awake while the VM is off; else a reboot gives the card back. {choose}"
        ),
    }
}

fn check(s: &HostSnapshot, device: Option<&str>, out: &mut Vec<Finding>) {
    let wanted: Vec<&PciEntry> = match device {
        Some(a) => s
            .device(&crate::host::pci::full_address(a))
            .into_iter()
            .collect(),
        None => s.gpus().collect(),
    };
    for e in wanted {
        out.extend(came_back(s, e, device.is_some()));
    }
}

/// The finding for one card; with `pass`, also when it answers.
fn came_back(s: &HostSnapshot, e: &PciEntry, pass: bool) -> Option<Finding> {
    let d = &e.device;
    let a = &d.address;
    let log: Vec<&String> = s
        .system
        .kernel_log
        .lines
        .iter()
        .filter(|l| l.contains(a.as_str()) && GONE.iter().any(|g| l.contains(g)))
        .collect();
    let dead = d.config.as_ref().is_some_and(|c| c.dead);
    let d3cold = d.power_state.as_deref() == Some("D3cold") && d.driver.is_none();
    let why = "A card the VM had must come back from its reset before the host or the next start can use it; one that did not answers nothing (all ones), and the next start hangs or shows a black screen.";
    let f = if dead {
        Finding::new(
            ID,
            format!("{a} does not answer: its config space reads all ones"),
            Status::Fail,
        )
        .evidence(super::devices::dev_path(a, "config"), "ffffffff")
    } else if d3cold {
        Finding::new(
            ID,
            format!("{a} has no driver and is stuck in D3cold"),
            Status::Fail,
        )
        .evidence(super::devices::dev_path(a, "power_state"), "D3cold")
    } else if let Some(last) = log.last() {
        let fail = last.contains("giving up") || last.contains("inaccessible");
        Finding::new(
            ID,
            format!("{a} did not come back cleanly from a reset or power state"),
            if fail { Status::Fail } else { Status::Warn },
        )
        .evidence(
            "kernel log",
            log.iter()
                .rev()
                .take(3)
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join(" | "),
        )
    } else if pass {
        return Some(
            Finding::new(
                ID,
                format!(
                    "{a} answers: config space readable, power state {}",
                    d.power_state.as_deref().unwrap_or("not said")
                ),
                Status::Pass,
            )
            .device(a)
            .why(why),
        );
    } else {
        return None;
    };
    Some(f.device(a).why(why).fix(family_fix(e)))
}
