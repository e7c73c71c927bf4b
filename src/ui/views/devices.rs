//! Devices: IOMMU groups as collapsible cards with device names, drivers,
//! badges, what the host uses, and the passthrough verdict; a search box; for
//! graphics cards, a ROM check (UEFI GOP present?) run off the UI thread.

use crate::checks::model::Finding;
use crate::host::{HostSnapshot, PciEntry};
use crate::report::device::device_details;
use crate::report::text::badges;
use crate::ui::app::Command;
use crate::ui::state::State;
use crate::ui::theme;
use crate::ui::views::findings::finding_list_ui;
use crate::ui::widgets::badges::{badge_color, badge_ui, verdict_color, verdict_label};
use egui::RichText;
use std::collections::BTreeMap;

fn matches(e: &PciEntry, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    let d = &e.device;
    let hay = format!(
        "{} {} {} {}:{} {} {} {}",
        d.address,
        d.display_name(),
        d.kind_name(),
        d.vendor_id,
        d.device_id,
        d.driver.as_deref().unwrap_or(""),
        d.subsystem_name.as_deref().unwrap_or(""),
        d.iommu_group
            .map(|g| format!("group {g}"))
            .unwrap_or_default()
    )
    .to_lowercase();
    needle
        .to_lowercase()
        .split_whitespace()
        .all(|w| hay.contains(w))
}

/// The ROM checks run from this page.
pub struct RomView<'a> {
    /// Address -> the `device.rom` finding of its last read.
    pub findings: &'a BTreeMap<String, Finding>,
    /// A job runs: the button waits.
    pub busy: bool,
}

/// A GPU's ROM: the button that reads it, and what the last read said.
fn rom_ui(ui: &mut egui::Ui, e: &PciEntry, rom: &RomView<'_>, out: &mut Vec<Command>) {
    let d = &e.device;
    ui.horizontal(|ui| {
        let clicked = ui
            .add_enabled(!rom.busy, egui::Button::new("Check its ROM").small())
            .on_hover_text("Reads the card's ROM (needs root: the kernel enables it for the read and this switches it off again) and says whether it carries the UEFI GOP driver OVMF needs to show a picture before Windows loads its driver.")
            .clicked();
        if clicked {
            out.push(Command::ReadRom {
                addr: d.address.clone(),
                card: crate::checks::rom::Card::of(d),
            });
        }
    });
    if let Some(f) = rom.findings.get(&d.address) {
        finding_list_ui(ui, std::slice::from_ref(f));
    }
}

/// Draw one device; its verdict only when `explain` (one per passthrough set).
fn device_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    e: &PciEntry,
    focused: bool,
    explain: bool,
    rom: &RomView<'_>,
    out: &mut Vec<Command>,
) {
    let d = &e.device;
    let bridge = d.is_host_bridge() || d.is_pci_bridge();
    let resp = ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(d.address.strip_prefix("0000:").unwrap_or(&d.address)).monospace());
        let name = RichText::new(d.display_name());
        ui.label(if bridge { name.weak() } else { name.strong() });
        ui.label(
            RichText::new(format!("[{}:{}]", d.vendor_id, d.device_id))
                .monospace()
                .weak(),
        );
        for b in badges(e) {
            badge_ui(ui, &b, badge_color(&b));
        }
    });
    if focused {
        resp.response.scroll_to_me(Some(egui::Align::Center));
    }
    ui.indent(("dev", &d.address), |ui| {
        ui.label(
            RichText::new(format!(
                "{} · driver: {}{}{}",
                d.kind_name(),
                d.driver.as_deref().unwrap_or("none"),
                d.numa_node
                    .map(|n| format!(" · NUMA node {n}"))
                    .unwrap_or_default(),
                d.physical_slot
                    .as_ref()
                    .map(|s| format!(" · slot {s}"))
                    .unwrap_or_default(),
            ))
            .small(),
        );
        if !d.host_usage.is_empty() {
            ui.label(RichText::new(format!("Host uses: {}", d.host_usage.summary())).small());
        }
        if !bridge && explain {
            ui.horizontal_wrapped(|ui| {
                badge_ui(
                    ui,
                    verdict_label(e.passthrough.verdict),
                    verdict_color(e.passthrough.verdict),
                );
                ui.label(RichText::new(&e.passthrough.reason).small());
            });
            for n in &e.passthrough.notes {
                ui.label(RichText::new(format!("- {n}")).small().weak());
            }
        }
        if d.is_gpu() {
            rom_ui(ui, e, rom, out);
        }
        if !bridge {
            details_ui(ui, s, e, focused, out);
        }
    });
}

/// The device's details (IDs, driver, group, link, BARs, reset,
/// capabilities, host use, SR-IOV) and what can be done with it.
fn details_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    e: &PciEntry,
    focused: bool,
    out: &mut Vec<Command>,
) {
    let d = &e.device;
    let mut header = egui::CollapsingHeader::new("Details")
        .id_salt(("details", &d.address))
        .default_open(false);
    if focused {
        header = header.open(Some(true));
    }
    header.show(ui, |ui| {
        egui::Grid::new(("detail_grid", &d.address))
            .num_columns(2)
            .spacing([12.0, 4.0])
            .striped(true)
            .show(ui, |ui| {
                for r in device_details(s, e) {
                    ui.label(RichText::new(r.label).strong());
                    ui.add(egui::Label::new(theme::detail(r.value)).wrap());
                    ui.end_row();
                }
            });
        ui.horizontal_wrapped(|ui| {
            let on_vfio = d.driver.as_deref() == Some("vfio-pci");
            if !on_vfio
                && e.passthrough.verdict != crate::host::iommu::VerdictKind::NoIommu
                && ui
                    .button("Bind to vfio-pci…")
                    .on_hover_text("Opens the Tuning page with vfio-pci at boot (and now) for this device's whole passthrough set: you see every file it writes before anything changes, and can undo it.")
                    .clicked()
            {
                out.push(Command::OpenTuning {
                    focus: vec!["vfio-boot".into()],
                    gpus: vec![d.address.clone()],
                    memory_gib: None,
                });
            }
            if !on_vfio
                && d.is_gpu()
                && crate::tuning::shared_gpu::misfit(s, &d.address).is_none()
                && ui
                    .button("Share it with the desktop…")
                    .on_hover_text("Opens the Tuning page in shared mode: the card stays the desktop's (games, CUDA, render offload) while the VM is off; a hook lends it to the VM at its start and gives it back at its stop, without a reboot.")
                    .clicked()
            {
                out.push(Command::OpenSharedTuning {
                    gpu: d.address.clone(),
                });
            }
            if on_vfio
                && ui
                    .button("Give it back to the host…")
                    .on_hover_text("Opens the Tuning page: its journal undoes the change that bound it (in a terminal: `sudo vfio-assistant tune undo ID`, `tune list` names it).")
                    .clicked()
            {
                out.push(Command::ShowPage(crate::ui::state::Page::Tuning));
            }
            if ui
                .button("Pass through in a new VM")
                .on_hover_text("Opens the New VM page with this device (and its passthrough set) chosen.")
                .clicked()
            {
                out.push(Command::NewVmWith(d.address.clone()));
            }
        });
    });
}

pub fn devices_ui(
    ui: &mut egui::Ui,
    s: &HostSnapshot,
    state: &mut State,
    focus: Option<String>,
    rom: &RomView<'_>,
    out: &mut Vec<Command>,
) {
    ui.horizontal(|ui| {
        let l = ui.label("Search:");
        ui.add(
            egui::TextEdit::singleline(&mut state.device_filter)
                .hint_text("name, address, vendor:device, driver…")
                .desired_width(320.0),
        )
        .labelled_by(l.id);
        if ui
            .small_button("Clear")
            .on_hover_text("Clear the search")
            .clicked()
        {
            state.device_filter.clear();
        }
        ui.checkbox(&mut state.show_bridges, "Show bridges");
    });
    if s.pci_devices.is_empty() {
        ui.colored_label(
            crate::ui::theme::WARN,
            "No PCI devices could be read on this host: a container, or a capture without /sys/bus/pci. Run the app on the host itself, or capture it again.",
        );
    } else if !s.iommu.active {
        ui.colored_label(
            crate::ui::theme::WARN,
            "This host has no active IOMMU: no device can be passed through until VT-d / AMD-Vi is enabled in the firmware (and the kernel). The devices are listed without groups.",
        );
    }
    ui.separator();
    let filter = state.device_filter.trim().to_string();
    let show_bridges = state.show_bridges;
    egui::ScrollArea::vertical()
        .auto_shrink(false)
        .show(ui, |ui| {
            let visible = |e: &PciEntry| {
                (show_bridges || !(e.device.is_host_bridge() || e.device.is_pci_bridge()))
                    && matches(e, &filter)
            };
            if !s.iommu.active {
                for e in s.pci_devices.iter().filter(|e| visible(e)) {
                    device_ui(
                        ui,
                        s,
                        e,
                        focus.as_deref() == Some(e.device.address.as_str()),
                        true,
                        rom,
                        out,
                    );
                    ui.add_space(4.0);
                }
                return;
            }
            let mut shown = 0;
            for g in &s.iommu_groups {
                let members: Vec<&PciEntry> =
                    g.devices.iter().filter_map(|a| s.device(a)).collect();
                let visible_members: Vec<&PciEntry> =
                    members.iter().copied().filter(|e| visible(e)).collect();
                if visible_members.is_empty() {
                    continue;
                }
                shown += 1;
                let lead = members
                    .iter()
                    .find(|e| !(e.device.is_host_bridge() || e.device.is_pci_bridge()))
                    .or(members.first());
                let title = match lead {
                    Some(e) => format!(
                        "Group {} — {} ({} device{})",
                        g.id,
                        e.device.display_name(),
                        members.len(),
                        if members.len() == 1 { "" } else { "s" }
                    ),
                    None => format!("Group {}", g.id),
                };
                let has_focus = focus.as_ref().is_some_and(|f| g.devices.contains(f));
                let open_default = lead.is_some_and(|e| e.device.is_gpu()) || !filter.is_empty();
                let lead_verdict = lead
                    .filter(|e| !(e.device.is_host_bridge() || e.device.is_pci_bridge()))
                    .map(|e| e.passthrough.verdict);
                let mut job = egui::text::LayoutJob::default();
                RichText::new(title).strong().append_to(
                    &mut job,
                    ui.style(),
                    egui::FontSelection::Default,
                    egui::Align::Center,
                );
                if let Some(v) = lead_verdict {
                    RichText::new(format!("   {}", verdict_label(v)))
                        .color(verdict_color(v))
                        .append_to(
                            &mut job,
                            ui.style(),
                            egui::FontSelection::Default,
                            egui::Align::Center,
                        );
                }
                let mut header = egui::CollapsingHeader::new(job)
                    .id_salt(("group", g.id))
                    .default_open(open_default);
                if has_focus {
                    header = header.open(Some(true));
                }
                egui::Frame::group(ui.style()).show(ui, |ui| {
                    ui.set_width(ui.available_width());
                    header.show(ui, |ui| {
                        let mut explained: Vec<Vec<String>> = Vec::new();
                        for e in &visible_members {
                            let mut set = e.passthrough.set.clone();
                            set.sort();
                            let explain = !explained.contains(&set);
                            if explain {
                                explained.push(set);
                            }
                            let focused = focus.as_deref() == Some(e.device.address.as_str());
                            device_ui(ui, s, e, focused, explain, rom, out);
                            ui.add_space(4.0);
                        }
                    });
                });
            }
            if shown == 0 {
                ui.label("No device matches the search.");
            }
        });
}
