//! The storage step: the disk (named or created), the installer and driver ISOs.

use super::StepSpec;
use crate::domain::install_needs::NeedStep;
use crate::domain::template::DiskBus;
use crate::ui::app::Command;
use crate::ui::jobs::PickField;
use crate::ui::pages::WizardRuntime;
use crate::ui::theme::{self, WARN};
use crate::ui::vm_model::VmModel;
use crate::ui::wizard_state::{Step, WizardState};

pub const STEP: StepSpec = StepSpec {
    step: Step::Storage,
    title: "Storage",
    draw: |ui, cx| {
        let vcpus = super::vcpus_of(cx.board);
        storage_step(ui, (cx.w, cx.vm, vcpus), cx.rt, cx.live, cx.out)
    },
};

fn path_row(
    ui: &mut egui::Ui,
    label: &str,
    value: &mut String,
    hint: &str,
    field: PickField,
    out: &mut Vec<Command>,
) {
    ui.horizontal(|ui| {
        let l = ui.label(label);
        ui.add(
            egui::TextEdit::singleline(value)
                .hint_text(theme::hint(hint))
                .desired_width(420.0),
        )
        .labelled_by(l.id);
        if ui
            .button("Browse…")
            .on_hover_text(format!(
                "Choose the {} in a file dialog",
                label.to_lowercase()
            ))
            .clicked()
        {
            out.push(Command::PickFile(field));
        }
    });
}

/// "Install Windows for me": the account, its password (in memory until
/// Define puts it on the answer media) and the Looking Glass installer.
fn unattended_ui(
    ui: &mut egui::Ui,
    w: &WizardState,
    vm: &mut VmModel,
    rt: &WizardRuntime,
    out: &mut Vec<Command>,
) {
    ui.checkbox(&mut vm.unattended, "Install Windows for me")
        .on_hover_text("Define builds answer media beside the installer ISO: Windows installs with the virtio drivers, this host's language, keyboard and time zone, a local account, the guest tools, and MSI mode for the GPU, without questions.");
    if !vm.unattended {
        return;
    }
    // What the installer ISO holds, read once per path (a few reads of its
    // UDF tree and install.wim's XML, on a worker thread).
    let iso = vm.install_iso.trim().to_string();
    if !iso.is_empty() {
        match &rt.iso_seen {
            Some((p, said)) if *p == iso => match said {
                Ok(s) => {
                    ui.colored_label(theme::GOOD, s);
                }
                Err(e) => {
                    ui.colored_label(WARN, e);
                }
            },
            _ if rt.iso_job.is_busy() => {
                ui.weak("Reading the installer ISO…");
            }
            _ => out.push(Command::InspectIso { path: iso }),
        }
    }
    ui.horizontal(|ui| {
        let l = ui.label("Windows account");
        ui.add(
            egui::TextEdit::singleline(&mut vm.win_user)
                .hint_text(theme::hint("ada"))
                .desired_width(160.0),
        )
        .labelled_by(l.id);
        let l = ui.label("Password");
        ui.add(
            egui::TextEdit::singleline(&mut vm.win_password.0)
                .password(true)
                .desired_width(160.0),
        )
        .labelled_by(l.id);
    });
    ui.weak("The password goes only onto the answer media, which \"Take the install media out\" deletes; it is not saved with this app's settings.");
    if w.looking_glass {
        path_row(
            ui,
            "Looking Glass host installer",
            &mut vm.lg_installer,
            "looking-glass-host-setup.exe, the version of your client",
            PickField::LgInstaller,
            out,
        );
    }
    ui.weak("Left to you: the GPU's own driver (NVIDIA's or AMD's installer, inside Windows) and activation.");
}

fn storage_step(
    ui: &mut egui::Ui,
    (w, vm, vcpus): (&mut WizardState, &mut VmModel, u32),
    rt: &WizardRuntime,
    live: bool,
    out: &mut Vec<Command>,
) {
    ui.heading("Storage");
    ui.horizontal(|ui| {
        ui.radio_value(&mut w.create_disk, true, "Create a new disk image");
        ui.radio_value(
            &mut w.create_disk,
            false,
            "Use an image or block device I have",
        );
    });
    if w.create_disk {
        let name = vm.name.trim().to_string();
        if rt.place_asked.as_deref() != Some(name.as_str()) && !rt.place_job.is_busy() {
            out.push(Command::DiskPlace {
                vm_name: name.clone(),
            });
        }
        if w.disk.trim().is_empty()
            && let Some((n, p)) = &rt.place
            && *n == name
            && !p.path.is_empty()
        {
            w.disk = p.path.clone();
        }
        ui.horizontal(|ui| {
            let l = ui.label("New image");
            ui.add(
                egui::TextEdit::singleline(&mut w.disk)
                    .hint_text(theme::hint("/var/lib/libvirt/images/win11.qcow2"))
                    .desired_width(380.0),
            )
            .labelled_by(l.id);
            let l = ui.label("Size");
            ui.add(
                egui::DragValue::new(&mut w.disk_size_gib)
                    .range(1..=65536)
                    .suffix(" GiB"),
            )
            .labelled_by(l.id);
        });
        if let Some((_, p)) = &rt.place
            && let Some(free) = p.free_bytes
        {
            let fits = free >= w.disk_size_gib.saturating_mul(1 << 30);
            let text = format!(
                "{} free there{}",
                crate::report::storage::gib(free),
                p.pool
                    .as_ref()
                    .map(|n| format!(" (libvirt pool '{n}')"))
                    .unwrap_or_default()
            );
            if fits {
                ui.weak(text);
            } else {
                ui.colored_label(
                    WARN,
                    format!("{text}: not enough for {} GiB", w.disk_size_gib),
                );
            }
        }
        ui.horizontal(|ui| {
            let busy = rt.disk_job.is_busy();
            if ui
                .add_enabled(!busy && w.has_disk(), egui::Button::new("Create the image"))
                .on_hover_text("A qcow2 image with its metadata preallocated: it takes room only as Windows writes, and stays fast.")
                .clicked()
            {
                out.push(Command::CreateDisk {
                    path: w.disk.trim().to_string(),
                    size_gib: w.disk_size_gib,
                });
            }
            if busy {
                ui.spinner();
            }
            match &rt.disk_made {
                Some(Ok(p)) => {
                    ui.colored_label(theme::GOOD, format!("Created {p}."));
                }
                Some(Err(e)) => {
                    ui.colored_label(theme::BAD, e);
                }
                None => {}
            }
        });
        ui.weak("Not created yet? Validate says so, and the VM will not start until it is.");
    } else {
        path_row(
            ui,
            "Disk image or block device",
            &mut w.disk,
            "/var/lib/libvirt/images/win11.qcow2 or /dev/nvme1n1",
            PickField::Disk,
            out,
        );
    }
    if !w.has_disk() {
        ui.colored_label(
            WARN,
            "The VM needs a disk: name one or create one to go on.",
        );
    }
    path_row(
        ui,
        "Windows installer ISO",
        &mut vm.install_iso,
        "~/Downloads/Win11_English_x64.iso",
        PickField::InstallIso,
        out,
    );
    path_row(
        ui,
        "virtio-win driver ISO",
        &mut vm.virtio_iso,
        "~/Downloads/virtio-win.iso",
        PickField::VirtioIso,
        out,
    );
    super::virtio_source::virtio_source_ui(ui, vm, rt, live, out);
    unattended_ui(ui, w, vm, rt, out);
    for n in w
        .needs(vm, vcpus)
        .iter()
        .filter(|n| n.step == NeedStep::Storage)
    {
        ui.colored_label(WARN, n.what);
    }
    if let Some(n) = &rt.pick_note {
        ui.colored_label(WARN, n);
    }
    ui.weak(
        "Validate (on the Review step) checks that the files exist and that QEMU may open them.",
    );
    ui.label("Disk bus");
    ui.horizontal(|ui| {
        ui.radio_value(
            &mut w.disk_bus,
            None,
            "Automatic (virtio with the driver ISO, else SATA)",
        );
        ui.radio_value(&mut w.disk_bus, Some(DiskBus::Virtio), "virtio");
        ui.radio_value(&mut w.disk_bus, Some(DiskBus::Scsi), "virtio-scsi");
        ui.radio_value(&mut w.disk_bus, Some(DiskBus::Sata), "SATA");
    });
    ui.weak("virtio is the fast one; virtio-scsi also passes TRIM through and carries many disks. Windows setup sees either only with its driver (viostor / vioscsi) from the virtio-win ISO.");
}
