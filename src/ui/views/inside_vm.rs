//! The Overview's "Inside the VM" card: the shared VM's in-guest checks
//! (report::guest through its guest agent: Windows' build, the GPU's
//! driver and problem code, MSI mode, the power plan, the timer, Looking
//! Glass's service), read on a button and shown with the same finding rows
//! as the host's checks. The read is the Troubleshoot page's VM probe, so
//! both pages show the same answer.

use crate::checks::model::Finding;
use crate::ui::app::Command;

/// What the card shows: the VM's name, the last read (if it was this VM's)
/// and whether one is under way.
pub struct InsideVm<'a> {
    pub name: &'a str,
    pub read: Option<&'a Result<Vec<Finding>, String>>,
    pub busy: bool,
}

pub fn inside_vm_ui(ui: &mut egui::Ui, vm: &InsideVm<'_>, out: &mut Vec<Command>) {
    let name = vm.name.trim();
    if name.is_empty() {
        ui.label("No VM yet: the New VM page writes one.");
        return;
    }
    ui.horizontal(|ui| {
        if ui
            .add_enabled(!vm.busy, egui::Button::new(format!("Look inside '{name}'")))
            .on_hover_text("Asks the running VM's guest agent: Windows' build, the GPU's driver and any problem code (Code 43), MSI mode, the power plan, the timer, Looking Glass's service.")
            .clicked()
        {
            out.push(Command::ProbeVm(name.to_string()));
        }
        if vm.busy {
            ui.spinner();
        }
    });
    match vm.read {
        None => {
            ui.weak(
                "Not read yet: the VM must be running, with the guest tools installed in Windows.",
            );
        }
        Some(Err(e)) => {
            ui.colored_label(crate::ui::theme::BAD, e);
        }
        Some(Ok(all)) => {
            let inside: Vec<Finding> = all
                .iter()
                .filter(|f| f.id.starts_with("guest."))
                .cloned()
                .collect();
            if inside.is_empty() {
                ui.label(format!(
                    "'{name}' is not running: start it, then look again (the Troubleshoot page has its host-side checks)."
                ));
            } else {
                super::findings::findings_ui(ui, &inside, Some(out));
            }
        }
    }
}

/// An unattended install's state for the Monitor page: the VM, the last
/// answer of its buttons (the wizard's VM control runs them), and whether
/// one is under way.
pub struct InstallView<'a> {
    pub name: &'a str,
    pub said: Option<&'a str>,
    pub busy: bool,
}

/// The Monitor's install row: the VM's boot order while installing (disk,
/// then the installer; the drivers' and answer discs read by Setup), how
/// far it is, and the media taken out.
pub fn install_ui(ui: &mut egui::Ui, v: &InstallView<'_>, out: &mut Vec<Command>) {
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.label(egui::RichText::new(format!("Unattended install of '{}'", v.name)).strong());
        ui.weak("Boots the disk first, then the Windows installer; Setup reads the drivers and its answers from the two other CDs. The start pressed Enter through \"Press any key to boot from CD\".");
        crate::ui::widgets::vm_control::install_row(ui, crate::ui::app::VmPage::Wizard, v.name, v.busy, out);
        if let Some(said) = v.said {
            ui.label(said);
        }
    });
}
