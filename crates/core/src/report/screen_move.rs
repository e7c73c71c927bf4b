//! How the host's screen moves off the card meant for the VM: the
//! firmware's primary-display setting, named as the board's maker names it,
//! then the cable, then a reboot — the step every passthrough guide starts
//! with (shared/research/gpu-choice-windows-gui-e2e.md §1). The app checks
//! that it happened: after the reboot the firmware's boot display
//! (`boot_vga`) is on the other GPU, and the next step binds the card.

use crate::host::HostSnapshot;
use crate::host::gpu_kind::{GpuKind, classify, cpu_has_igpu};

/// The board makers whose setting names we know, from DMI's board_vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Maker {
    Asus,
    Msi,
    Gigabyte,
    Asrock,
    Other,
}

fn maker(snap: &HostSnapshot) -> Maker {
    let v = snap
        .firmware
        .board_vendor
        .as_deref()
        .unwrap_or("")
        .to_ascii_lowercase();
    if v.contains("asustek") || v.starts_with("asus") {
        Maker::Asus
    } else if v.contains("micro-star") || v.starts_with("msi") {
        Maker::Msi
    } else if v.contains("gigabyte") {
        Maker::Gigabyte
    } else if v.contains("asrock") {
        Maker::Asrock
    } else {
        Maker::Other
    }
}

fn amd(snap: &HostSnapshot) -> bool {
    snap.cpu.vendor.as_deref() == Some("AuthenticAMD")
}

/// The primary-display setting's name on this board, in words.
fn primary_display_setting(snap: &HostSnapshot) -> String {
    let board = snap
        .firmware
        .board_vendor
        .as_deref()
        .map(|v| format!(" (this board: {v})"))
        .unwrap_or_default();
    let name = match (maker(snap), amd(snap)) {
        (Maker::Asus, false) => {
            "\"Primary Display\" set to IGFX (Advanced > System Agent (SA) Configuration > Graphics Configuration)"
        }
        (Maker::Asus, true) => {
            "\"Primary Video Device\" set to IGFX Video (Advanced > NB Configuration)"
        }
        (Maker::Msi, _) => {
            "\"Initiate Graphic Adapter\" set to IGD (Settings > Advanced > Integrated Graphics Configuration)"
        }
        (Maker::Gigabyte, _) => {
            "\"Initial Display Output\" set to IGD Video (Settings > IO Ports; older boards: \"Init Display First\")"
        }
        (Maker::Asrock, _) => {
            "\"Primary Graphics Adapter\" set to Onboard (Advanced > Chipset Configuration)"
        }
        (Maker::Other, _) => {
            "the primary display setting — \"Primary Display\", \"Primary Video Device\", \"Primary Graphics Adapter\", \"Initiate Graphic Adapter\" or \"Initial Display Output\", depending on the maker — set to the integrated graphics (IGD, IGFX, Onboard)"
        }
    };
    format!("{name}{board}")
}

/// "Ryzen 7000/9000: the iGPU may need …": what keeps the iGPU on while a
/// card is in a slot, for this CPU.
fn keep_igpu_on(snap: &HostSnapshot) -> Option<&'static str> {
    let model = snap.cpu.model_name.as_deref().unwrap_or("");
    let series = model
        .split_whitespace()
        .skip_while(|w| *w != "Ryzen")
        .nth(2)
        .and_then(|m| m.chars().next());
    if amd(snap) && matches!(series, Some('7' | '8' | '9')) {
        Some(
            "On Ryzen 7000/8000/9000 boards the firmware turns the integrated graphics off while a card is in a slot unless \"Integrated Graphics\" is set to Force (Advanced > AMD CBS > NBIO Common Options > GFX Configuration on many boards).",
        )
    } else if !amd(snap) && snap.cpu.vendor.as_deref() == Some("GenuineIntel") {
        Some(
            "On Intel boards \"IGD Multi-Monitor\" (or \"iGPU Multi-Monitor\") set to Enabled keeps the integrated graphics on while a card is in a slot.",
        )
    } else {
        None
    }
}

/// The firmware steps that move the host's screen to the GPU `to`, one
/// sentence each; then the cable and the reboot.
pub fn steps(snap: &HostSnapshot, to: &str) -> Vec<String> {
    let to_entry = snap.device(to);
    let name = to_entry.map_or_else(|| to.to_string(), |e| e.device.display_name());
    let integrated = to_entry.is_some_and(|e| {
        classify(snap.cpu.vendor.as_deref(), &e.device).kind == GpuKind::Integrated
    });
    let mut out = Vec::new();
    if integrated {
        out.push(format!(
            "In the firmware setup, set {}.",
            primary_display_setting(snap)
        ));
        out.extend(keep_igpu_on(snap).map(str::to_string));
        out.push(format!(
            "Plug the monitor into the motherboard's video output (the {name}), not the card."
        ));
    } else {
        out.push(format!(
            "In the firmware setup, choose the {name}'s slot as the primary display (\"Primary Display\", \"Initial Display Output\" or \"Primary Graphics Adapter\": the slot's name), or swap the two cards' slots."
        ));
        out.push(format!("Plug the monitor into the {name}."));
    }
    out.push("Reboot. The app then checks that the firmware showed the boot screen on it (boot_vga), and the next step binds the card.".into());
    out
}

/// The CPU's integrated graphics that the firmware turned off: the CPU has
/// one (by its model number) and no integrated GPU is visible. The reason,
/// in words, and how to turn it on.
pub fn igpu_switched_off(snap: &HostSnapshot) -> Option<String> {
    let model = snap.cpu.model_name.as_deref()?;
    let (has, reason) = cpu_has_igpu(model)?;
    let visible = snap
        .gpus()
        .any(|e| classify(snap.cpu.vendor.as_deref(), &e.device).kind == GpuKind::Integrated);
    if !has || visible {
        return None;
    }
    let force = if amd(snap) {
        " (Ryzen 7000/9000 boards: \"Integrated Graphics\" set to Force, under Advanced > AMD CBS > NBIO Common Options > GFX Configuration on many)"
    } else {
        " (\"Internal Graphics\" or \"iGPU\" set to Enabled, and \"IGD Multi-Monitor\" Enabled on Intel boards)"
    };
    Some(format!(
        "{reason}, but none shows on PCI: the firmware turned it off. Turn it on in the firmware setup{force}, then the host can keep a screen on it while the card goes to the VM."
    ))
}
