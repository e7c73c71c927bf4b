//! Overview: the host in words a newcomer understands — can this CPU do it, is
//! the IOMMU on, what the firmware and kernel say, and the GPUs with verdicts.

use crate::cli::text::human_kib;
use crate::host::HostSnapshot;
use crate::sysroot::HostPath;
use crate::ui::app::Command;
use crate::ui::widgets::badges::{badge_ui, verdict_color, verdict_label};
use egui::{Color32, RichText};

const GOOD: Color32 = Color32::from_rgb(40, 170, 90);
const BAD: Color32 = Color32::from_rgb(210, 60, 60);
const WARN: Color32 = Color32::from_rgb(220, 150, 30);

fn status_row(ui: &mut egui::Ui, ok: Option<bool>, title: &str, text: &str) {
    ui.horizontal_wrapped(|ui| {
        let (word, color) = match ok {
            Some(true) => ("OK", GOOD),
            Some(false) => ("NO", BAD),
            None => ("--", WARN),
        };
        badge_ui(ui, word, color);
        ui.label(RichText::new(title).strong());
        ui.label(text);
    });
}

fn card(ui: &mut egui::Ui, title: &str, add: impl FnOnce(&mut egui::Ui)) {
    egui::Frame::group(ui.style())
        .inner_margin(10)
        .show(ui, |ui| {
            ui.set_width(ui.available_width());
            ui.label(RichText::new(title).heading());
            ui.add_space(4.0);
            add(ui);
        });
    ui.add_space(8.0);
}

pub fn overview_ui(ui: &mut egui::Ui, s: &HostSnapshot, out: &mut Vec<Command>) {
    egui::ScrollArea::vertical().auto_shrink(false).show(ui, |ui| {
        card(ui, "Virtualization", |ui| {
            let cpu = &s.cpu;
            ui.label(format!(
                "{} — {}",
                cpu.model_name.as_deref().unwrap_or("unknown CPU"),
                cpu.vendor.as_deref().unwrap_or("unknown vendor")
            ));
            match cpu.virtualization() {
                Some(v) => status_row(ui, Some(true), v, "The CPU can run virtual machines with hardware help."),
                None if cpu.hypervisor => status_row(ui, Some(false), "No VT-x/AMD-V", "This machine is itself a VM without nested virtualization, so KVM cannot use the CPU's help."),
                None => status_row(ui, Some(false), "No VT-x/AMD-V", "The CPU does not offer hardware virtualization: it is missing or switched off in the firmware (look for Intel VT-x / AMD SVM in the BIOS)."),
            }
            status_row(
                ui,
                Some(s.firmware.dev_kvm),
                &HostPath::dev("kvm").to_string(),
                if s.firmware.dev_kvm { "KVM is available to run fast VMs." } else { "KVM is not available: load kvm_intel or kvm_amd, or enable virtualization in the firmware." },
            );
            status_row(ui, Some(cpu.pdpe1gb), "1 GiB pages", if cpu.pdpe1gb { "The CPU supports 1 GiB hugepages for VM memory." } else { "Only 2 MiB hugepages are possible." });
        });
        card(ui, "IOMMU (device isolation)", |ui| {
            if s.iommu.active {
                status_row(ui, Some(true), "Active", &format!("{} IOMMU groups. A group is the smallest set of devices that can be handed to a VM.", s.iommu.groups));
            } else {
                let why = if s.firmware.acpi_dmar || s.firmware.acpi_ivrs {
                    "The firmware announces an IOMMU (ACPI DMAR/IVRS), but the kernel has not turned it on. Add intel_iommu=on (Intel) to the kernel command line, or check amd_iommu is not off, and reboot."
                } else {
                    "No IOMMU groups exist, so no device can be passed through yet. Enable VT-d (Intel) or AMD-Vi/IOMMU (AMD) in the firmware; the kernel then creates groups at boot."
                };
                status_row(ui, Some(false), "Not active", why);
            }
            let tables = s.firmware.acpi_dmar || s.firmware.acpi_ivrs;
            // Groups exist, so the firmware did announce an IOMMU: an unseen table
            // only means this capture does not hold it.
            let tables_ok = if tables { Some(true) } else if s.iommu.active { None } else { Some(false) };
let tables_text = if tables {
                format!(
                    "ACPI DMAR (Intel VT-d): {}; ACPI IVRS (AMD-Vi): {}.",
                    if s.firmware.acpi_dmar { "present" } else { "absent" },
                    if s.firmware.acpi_ivrs { "present" } else { "absent" }
                )
            } else if s.iommu.active {
                "No DMAR/IVRS table in what was read, but IOMMU groups exist, so the firmware does announce an IOMMU.".to_string()
            } else {
                "No ACPI DMAR (Intel VT-d) or IVRS (AMD-Vi) table: the firmware has the IOMMU switched off.".to_string()
            };
            status_row(ui, tables_ok, "Firmware tables", &tables_text);
            status_row(ui, None, "Boot", if s.firmware.efi_boot { "Booted with UEFI (needed for OVMF-friendly GPU ROMs)." } else { "Booted in legacy BIOS mode (or unknown)." });
        });
        card(ui, "GPUs", |ui| {
            let gpus: Vec<_> = s.gpus().collect();
            if gpus.is_empty() {
                ui.label("No display controller found.");
            }
            for e in gpus {
                ui.horizontal_wrapped(|ui| {
                    badge_ui(ui, verdict_label(e.passthrough.verdict), verdict_color(e.passthrough.verdict));
                    if ui.link(format!("{}  {}", e.device.address, e.device.display_name())).clicked() {
                        out.push(Command::ShowDevice(e.device.address.clone()));
                    }
                });
                ui.label(RichText::new(&e.passthrough.reason).weak());
                ui.add_space(4.0);
            }
        });
        card(ui, "This host", |ui| {
            let t = &s.topology.summary;
            ui.label(format!(
                "{} PCI functions in {} IOMMU groups; {} package(s), {} NUMA node(s), {} L3 group(s), {} cores, {} CPUs online{}.",
                s.pci_devices.len(),
                s.iommu.groups,
                t.packages,
                t.numa_nodes,
                t.l3_groups,
                t.cores,
                t.cpus_online,
                if t.cpus_offline > 0 { format!(" ({} offline)", t.cpus_offline) } else { String::new() }
            ));
            let k = &s.kernel;
            ui.label(format!("Kernel {}", k.release.as_deref().unwrap_or("(release unknown)")));
            if let Some(c) = &k.cmdline {
                ui.label(RichText::new(format!("Command line: {}", c.raw)).monospace().small());
            }
            let pools: Vec<String> = k.hugepages.iter().map(|p| format!("{}: {} of {} free", human_kib(p.size_kib), p.free, p.total)).collect();
            ui.label(format!(
                "Transparent hugepages: {}; hugepages: {}; clocksource: {}",
                k.thp_enabled.as_deref().unwrap_or("unknown"),
                if pools.is_empty() { "none".into() } else { pools.join(", ") },
                k.clocksource.as_deref().unwrap_or("unknown")
            ));
            if !s.warnings.is_empty() {
                ui.label(RichText::new(format!("{} file(s) could not be read; the rest is shown.", s.warnings.len())).color(WARN))
                    .on_hover_text(s.warnings.iter().take(20).map(|w| format!("{}: {}", w.path, w.message)).collect::<Vec<_>>().join("\n"));
            }
        });
    });
}
