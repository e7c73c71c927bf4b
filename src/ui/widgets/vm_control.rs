//! Start, Shut down and Force off for one libvirt domain, with its state
//! read live, and when a start fails the reason and the fix from libvirt's
//! error and the QEMU log (`report::lifecycle::start`). Used on the
//! wizard's last step and on the Troubleshoot page.

use crate::libvirt::DomainState;
use crate::ui::app::Command;
use crate::ui::app::VmPage;
use crate::ui::jobs::{VmAction, VmDone};
use crate::ui::pages::VmControl;
use crate::ui::theme;
use egui::RichText;

fn state_word(s: &Option<Result<DomainState, String>>) -> (String, egui::Color32) {
    match s {
        None => ("…".into(), theme::MUTED),
        Some(Err(e)) => (e.clone(), theme::MUTED),
        Some(Ok(DomainState::Running)) => ("running".into(), theme::GOOD),
        Some(Ok(DomainState::Crashed)) => ("crashed".into(), theme::BAD),
        Some(Ok(DomainState::Paused)) => ("paused".into(), theme::WARN),
        Some(Ok(s)) => (s.label().into(), theme::MUTED),
    }
}

/// What a VM button asks for, on `page`.
fn vm_command(page: VmPage, name: &str, action: VmAction) -> Command {
    Command::Vm {
        page,
        name: name.to_string(),
        action,
    }
}

/// An unattended install's two buttons: how far it is (the guest agent
/// answers once Windows runs its first logon), and the media taken out.
pub fn install_row(
    ui: &mut egui::Ui,
    page: VmPage,
    name: &str,
    busy: bool,
    out: &mut Vec<Command>,
) {
    ui.horizontal(|ui| {
        ui.label("Unattended install");
        let mut push = |action| out.push(vm_command(page, name, action));
        if ui
            .add_enabled(!busy, egui::Button::new("How far is it?"))
            .on_hover_text("Asks the VM's guest agent whether Windows has finished its first logon (guest tools, Looking Glass, MSI mode).")
            .clicked()
        {
            push(VmAction::InstallStatus);
        }
        if ui
            .add_enabled(!busy, egui::Button::new("Take the install media out"))
            .on_hover_text("When Windows is installed: removes the installer, driver and answer CDs from the VM and deletes the answer media, which holds the account's password.")
            .clicked()
        {
            push(VmAction::InstallDone);
        }
    });
}

pub fn vm_control_ui(
    ui: &mut egui::Ui,
    page: VmPage,
    vm: &VmControl,
    name: &str,
    install: bool,
    out: &mut Vec<Command>,
) {
    let running = matches!(vm.state, Some(Ok(s)) if s.is_active());
    let known = vm.name.as_deref() == Some(name);
    let busy = vm.action.is_busy();
    ui.horizontal(|ui| {
        ui.label(RichText::new(format!("VM '{name}'")).strong());
        if known {
            let (word, color) = state_word(&vm.state);
            crate::ui::widgets::badges::badge_ui(ui, &word, color);
        }
        let mut push = |action| out.push(vm_command(page, name, action));
        if ui
            .add_enabled(!busy && !running, egui::Button::new("Start"))
            .on_hover_text("Starts it (and the libvirt network it plugs into, if that is down). If it does not start, the reason and the fix show here.")
            .clicked()
        {
            push(VmAction::Start);
        }
        if ui
            .add_enabled(!busy && running, egui::Button::new("Shut down"))
            .on_hover_text("Presses the VM's power button (ACPI): the guest shuts down by itself.")
            .clicked()
        {
            push(VmAction::Shutdown);
        }
        if ui
            .add_enabled(!busy && running, egui::Button::new("Force off"))
            .on_hover_text("Pulls the plug: unsaved work in the guest is lost.")
            .clicked()
        {
            push(VmAction::ForceOff);
        }
        if busy {
            ui.spinner();
        }
    });
    if install {
        install_row(ui, page, name, busy, out);
    }
    if !known {
        return;
    }
    match &vm.done {
        Some(Ok(VmDone::Started(o))) => {
            for n in &o.networks_started {
                ui.label(format!("Started the network '{n}' it plugs into."));
            }
            for (n, why) in &o.networks_failed {
                ui.colored_label(
                    theme::BAD,
                    format!("Could not start the network '{n}' it plugs into: {why}"),
                );
            }
            if o.started {
                ui.colored_label(theme::GOOD, "It is running.");
                match &o.install_keys {
                    Some(Ok(n)) => {
                        ui.label(format!("Unattended install: pressed Enter {n} times for the installer's \"Press any key to boot from CD\"; Windows Setup goes on by itself."));
                    }
                    Some(Err(e)) => {
                        ui.colored_label(theme::WARN, format!("Unattended install: no key could be pressed ({}): open the VM's screen and press a key at \"Press any key to boot from CD\".", e.message));
                    }
                    None => {}
                }
            } else {
                ui.colored_label(
                    theme::BAD,
                    format!("It did not start: {}", o.message.as_deref().unwrap_or("")),
                );
                for c in &o.causes {
                    egui::Frame::group(ui.style()).show(ui, |ui| {
                        ui.label(RichText::new(&c.title).strong());
                        ui.label(theme::mono(&c.evidence));
                        ui.label(theme::detail(format!("Why: {}", c.why)));
                        ui.label(theme::detail(format!("Fix: {}", c.fix)).strong());
                    });
                }
                if o.causes.is_empty() {
                    ui.label(theme::detail(format!(
                        "No known cause in {}. The whole log: /var/log/libvirt/qemu/{}.log (root).",
                        if o.log_read {
                            "libvirt's message or the QEMU log"
                        } else {
                            "libvirt's message (the QEMU log is root's)"
                        },
                        o.name
                    )));
                }
            }
        }
        Some(Ok(VmDone::Stopped(m))) | Some(Ok(VmDone::Install(m))) => {
            ui.label(m);
        }
        Some(Err(e)) => {
            ui.colored_label(theme::BAD, e);
        }
        None => {}
    }
}
