//! New VM: a step-by-step wizard for a tuned Windows passthrough domain. The
//! domain is rebuilt from the choices every frame (it takes well under a
//! millisecond), so every step shows what it changes. The storage step names
//! or creates the disk (the VM needs one to go on); the review step runs the
//! one preflight (`report::preflight`, the CLI's `domain validate`): what
//! was adapted to this host and what would stop the start, then defines it
//! (an update keeps an existing domain's identity) and starts, shuts down or
//! forces it off with its state live.

use super::findings::finding_list_with;
use crate::domain::from_host::prepare;
use crate::domain::template::{DiskBus, NewDomain, new_windows};
use crate::host::HostSnapshot;
use crate::host::iommu::VerdictKind;
use crate::ui::app::{Command, VmPage};
use crate::ui::jobs::PickField;
use crate::ui::pages::WizardRuntime;
use crate::ui::theme::{self, WARN};
use crate::ui::widgets::vm_control::vm_control_ui;
use crate::ui::wizard_state::{HugeChoice, NetChoice, Step, WizardState};
use egui::RichText;

/// `live`: the host shown is a running machine (this one, or another over
/// SSH), whose keyboards can be pressed for the input picker.
pub fn wizard_ui(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    w: &mut WizardState,
    rt: &WizardRuntime,
    live: bool,
    out: &mut Vec<Command>,
) {
    // The VM's name on every step, editable where it is shown.
    ui.horizontal(|ui| {
        let l = ui.label(RichText::new("New VM:").strong());
        ui.add(egui::TextEdit::singleline(&mut w.name).desired_width(200.0))
            .labelled_by(l.id);
        ui.weak(if w.windows11 {
            "Windows 11"
        } else {
            "Windows 10"
        });
    });
    ui.horizontal(|ui| {
        for s in Step::ALL {
            if ui.selectable_label(w.step == s, s.title()).clicked() {
                w.step = s;
            }
        }
        ui.separator();
        if ui
            .add_enabled(w.step != Step::Gpu, egui::Button::new("Back"))
            .clicked()
        {
            w.step = w.step.prev();
        }
        let next = egui::Button::new(RichText::new("Next").strong());
        // A VM with no disk has nothing to install to: the storage step
        // must name or create one first.
        let blocked = w.step == Step::Storage && !w.has_disk();
        if ui
            .add_enabled(w.step != Step::Review && !blocked, next)
            .on_disabled_hover_text("Name a disk image, or create one, first: the VM needs a disk.")
            .clicked()
        {
            w.step = w.step.next();
        }
    });
    ui.separator();
    let total_kib = snap.kernel.mem_total_kib;
    let prepared = prepare(snap, &w.choices(total_kib), rt.caps.clone());
    let built: Result<(NewDomain, Vec<String>), String> = prepared.and_then(|p| {
        new_windows(&p.spec)
            .map(|d| (d, p.notes))
            .map_err(|e| e.to_string())
    });
    if let Err(e) = &built {
        ui.colored_label(
            ui.visuals().error_fg_color,
            format!("Cannot build the VM yet: {e}"),
        );
    }
    egui::ScrollArea::vertical()
        .id_salt("wizard_scroll")
        .show(ui, |ui| match w.step {
            Step::Gpu => gpu_step(ui, snap, w),
            Step::Cpu => cpu_step(ui, snap, w, built.as_ref().ok()),
            Step::Memory => memory_step(ui, snap, w),
            Step::Storage => storage_step(ui, w, rt, out),
            Step::Network => network_step(ui, w),
            Step::UseIt => super::wizard_use::use_it_step(ui, snap, w, rt, live, out),
            Step::Features => features_step(ui, w, built.as_ref().ok()),
            Step::Review if !w.has_disk() => {
                ui.heading("Review");
                ui.colored_label(theme::BAD, "The VM has no disk: Windows has nothing to install to. Go back to Storage and name or create one.");
                if ui.button("Go to Storage").clicked() {
                    w.step = Step::Storage;
                }
            }
            Step::Review => review_step(ui, w, rt, built.as_ref().ok(), out),
        });
}

fn gpu_step(ui: &mut egui::Ui, snap: &HostSnapshot, w: &mut WizardState) {
    ui.heading("Which GPU goes to the VM?");
    ui.label("Its whole passthrough set goes with it: the other functions of the card (HDMI audio, USB-C) and anything sharing its IOMMU group.");
    if snap.gpus().next().is_some() && !snap.iommu.active {
        ui.colored_label(
            WARN,
            "The IOMMU is not active on this host, so no GPU can be handed to a VM yet: turn on VT-d / AMD-Vi (\"IOMMU\", \"SVM Mode\" on AMD boards) in the firmware and, where the kernel needs it, intel_iommu=on on its command line (the Overview's next step says which). The VM can be set up now; its GPU is added once the IOMMU is on.",
        );
    }
    if snap.gpus().next().is_none() {
        ui.colored_label(
            WARN,
            if snap.pci_devices.is_empty() {
                "No PCI devices could be read on this host, so no GPU either (a container or a capture without sysfs)."
            } else {
                "This host has no GPU (no display controller among its PCI devices). The VM can still be set up now; add a GPU later."
            },
        );
    }
    for g in snap.gpus() {
        let v = &g.passthrough;
        let addr = &g.device.address;
        let ok = v.verdict != VerdictKind::NotViable;
        let label = format!("{addr}  {}", g.device.display_name());
        let selected = w.gpu.as_deref() == Some(addr.as_str());
        let r = ui.add_enabled(ok, egui::RadioButton::new(selected, label));
        if r.clicked() {
            w.gpu = Some(addr.clone());
        }
        ui.indent(addr, |ui| {
            let text = RichText::new(&v.reason).weak();
            if ok {
                ui.label(text)
            } else {
                ui.colored_label(WARN, text)
            };
            if selected && !v.companions.is_empty() {
                ui.label(RichText::new(format!(
                    "Goes with: {}",
                    v.companions.join(", ")
                )));
            }
            if selected {
                for n in &v.notes {
                    ui.label(RichText::new(format!("- {n}")).weak());
                }
            }
        });
    }
    let gpu_set: Vec<String> = w
        .gpu
        .as_ref()
        .and_then(|g| snap.device(g))
        .map(|e| e.passthrough.set.clone())
        .unwrap_or_default();
    let extras: Vec<_> = snap
        .pci_devices
        .iter()
        .filter(|e| e.device.is_usb_controller() || e.device.class_subclass() == 0x0403)
        .filter(|e| e.passthrough.verdict != VerdictKind::NotViable)
        .filter(|e| !gpu_set.contains(&e.device.address))
        // A GPU's own HDMI audio goes with its GPU, not on its own.
        .filter(|e| !is_gpu_function(snap, &e.device.address))
        .collect();
    if !extras.is_empty() {
        ui.label(RichText::new("Also pass through").strong()).on_hover_text(
            "A whole USB controller gives the VM its own ports (keyboard, mouse, headset) with no USB redirection; a sound card gives it its own audio.",
        );
        for e in extras {
            let addr = &e.device.address;
            let mut on = w.devices.contains(addr);
            if ui
                .checkbox(&mut on, format!("{addr}  {}", e.device.display_name()))
                .changed()
            {
                if on {
                    w.devices.push(addr.clone());
                } else {
                    w.devices.retain(|d| d != addr);
                }
            }
        }
    }
    if ui
        .radio(
            w.gpu.is_none(),
            "No GPU yet (set the VM up first, add the GPU later)",
        )
        .clicked()
    {
        w.gpu = None;
    }
}

/// Whether `addr` is another function of a GPU's card (its HDMI audio).
fn is_gpu_function(snap: &HostSnapshot, addr: &str) -> bool {
    let slot = |a: &str| a.rsplit_once('.').map(|(s, _)| s.to_string());
    snap.gpus()
        .any(|g| g.device.address != addr && slot(&g.device.address) == slot(addr))
}

fn cpu_step(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    w: &mut WizardState,
    built: Option<&(NewDomain, Vec<String>)>,
) {
    ui.heading("How many vCPUs?");
    let online = snap.topology.summary.cpus_online.max(1);
    ui.horizontal(|ui| {
        let l = ui.label("vCPUs");
        ui.add(egui::DragValue::new(&mut w.vcpus).range(1..=online))
            .labelled_by(l.id);
        ui.weak(format!("of {online} host CPUs"));
    });
    ui.checkbox(&mut w.pin, "Pin vCPUs to host cores (recommended)")
        .on_hover_text("Each vCPU keeps its own host thread and cache; the host keeps core 0 for itself, the emulator and I/O.");
    if let Some((d, _)) = built {
        for e in d
            .edits
            .iter()
            .filter(|e| e.path == "cputune" || e.path == "cpu")
        {
            ui.label(format!("{} — {}", e.what, e.why));
        }
    }
}

fn memory_step(ui: &mut egui::Ui, snap: &HostSnapshot, w: &mut WizardState) {
    ui.heading("Memory");
    let total = snap.kernel.mem_total_kib;
    let mut gib = w.memory_for(total);
    let max_gib = total.map_or(4096, |k| (k / (1024 * 1024)).max(1));
    ui.horizontal(|ui| {
        let l = ui.label("Guest memory");
        if ui
            .add(
                egui::DragValue::new(&mut gib)
                    .range(1..=max_gib.max(1))
                    .suffix(" GiB"),
            )
            .labelled_by(l.id)
            .changed()
        {
            w.memory_gib = gib;
        }
        match (total, snap.kernel.mem_available_kib) {
            (Some(t), Some(a)) => ui.weak(format!(
                "this host has {:.1} GiB, {:.1} GiB free now",
                t as f64 / 1_048_576.0,
                a as f64 / 1_048_576.0
            )),
            (Some(t), None) => ui.weak(format!("this host has {:.1} GiB", t as f64 / 1_048_576.0)),
            _ => ui.weak("the host's memory is not known"),
        };
    });
    if let Some(t) = total
        && gib.saturating_mul(1_048_576) > t.saturating_mul(3) / 4
    {
        ui.colored_label(WARN, "That leaves the host less than a quarter of its memory: a VM with a device passed through pins all of its memory, so the host cannot get it back while the VM runs.");
    }
    ui.label("Hugepages");
    ui.horizontal(|ui| {
        ui.radio_value(
            &mut w.hugepages,
            HugeChoice::Auto,
            "Whatever the host has reserved",
        );
        ui.radio_value(&mut w.hugepages, HugeChoice::TwoMiB, "2 MiB");
        ui.radio_value(&mut w.hugepages, HugeChoice::OneGiB, "1 GiB");
        ui.radio_value(&mut w.hugepages, HugeChoice::Off, "None");
    });
    if snap.kernel.hugepages.is_empty() {
        ui.weak("The host lists no hugepage pools.");
    }
    for p in &snap.kernel.hugepages {
        let gib = (p.free * p.size_kib) as f64 / 1_048_576.0;
        ui.label(format!(
            "Host: {} free of {} reserved {} pages ({gib:.1} GiB free)",
            p.free,
            p.total,
            if p.size_kib >= 1_048_576 {
                "1 GiB"
            } else {
                "2 MiB"
            }
        ));
    }
    ui.weak("Reserved hugepages make guest memory faster (fewer TLB misses) and sure to be there at start; reserve them at boot (hugepages=N) or before starting the VM.");
}

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
                .hint_text(hint)
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

fn storage_step(
    ui: &mut egui::Ui,
    w: &mut WizardState,
    rt: &WizardRuntime,
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
        let name = w.name.trim().to_string();
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
                    .hint_text("/var/lib/libvirt/images/win11.qcow2")
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
        &mut w.install_iso,
        "/home/me/Downloads/Win11_English_x64.iso",
        PickField::InstallIso,
        out,
    );
    path_row(
        ui,
        "virtio-win driver ISO",
        &mut w.virtio_iso,
        "/home/me/Downloads/virtio-win.iso",
        PickField::VirtioIso,
        out,
    );
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

fn network_step(ui: &mut egui::Ui, w: &mut WizardState) {
    ui.heading("Network");
    ui.radio_value(
        &mut w.network,
        NetChoice::Nat,
        "NAT (libvirt's 'default' network): works everywhere, the LAN does not see the VM",
    );
    ui.radio_value(
        &mut w.network,
        NetChoice::Bridge,
        "Bridge: the VM is on your LAN (needs a host bridge such as br0)",
    );
    ui.radio_value(
        &mut w.network,
        NetChoice::Macvtap,
        "macvtap on a host interface: on the LAN without a bridge, but host and VM cannot talk",
    );
    ui.radio_value(
        &mut w.network,
        NetChoice::Vf,
        "An SR-IOV virtual function of the NIC (PCI address): the NIC's own hardware, lowest latency",
    );
    ui.radio_value(&mut w.network, NetChoice::Off, "No network");
    if matches!(
        w.network,
        NetChoice::Bridge | NetChoice::Macvtap | NetChoice::Vf
    ) {
        ui.horizontal(|ui| {
            let l = ui.label(match w.network {
                NetChoice::Bridge => "Bridge",
                NetChoice::Vf => "Virtual function (PCI address)",
                _ => "Interface",
            });
            ui.text_edit_singleline(&mut w.net_device).labelled_by(l.id);
        });
    }
}

fn features_step(ui: &mut egui::Ui, w: &mut WizardState, built: Option<&(NewDomain, Vec<String>)>) {
    ui.heading("Name, Windows and features");
    ui.horizontal(|ui| {
        let l = ui.label("Name");
        ui.text_edit_singleline(&mut w.name).labelled_by(l.id);
    });
    ui.horizontal(|ui| {
        ui.radio_value(&mut w.windows11, true, "Windows 11 (Secure Boot, TPM 2.0)");
        ui.radio_value(&mut w.windows11, false, "Windows 10");
    });
    ui.checkbox(
        &mut w.hide_kvm,
        "Hide KVM from the guest (only for NVIDIA drivers before 465: Code 43)",
    );
    ui.checkbox(
        &mut w.io_uring,
        "Disk I/O through io_uring instead of native AIO",
    );
    ui.checkbox(
        &mut w.spice,
        "A SPICE window for the install (remove it once the GPU drives a monitor)",
    );
    egui::CollapsingHeader::new("Windows 11, anti-cheat and Code 43, plainly")
        .id_salt("realities")
        .show(ui, |ui| {
            for (topic, text) in crate::domain::realities::REALITIES {
                ui.label(RichText::new(*topic).strong());
                ui.label(theme::detail(*text));
            }
        });
    ui.separator();
    ui.label(RichText::new("What the VM gets").strong());
    if let Some((d, _)) = built {
        for (i, e) in d.edits.iter().enumerate() {
            egui::CollapsingHeader::new(&e.what)
                .id_salt(("feature", i))
                .show(ui, |ui| {
                    ui.label(theme::detail(&e.why));
                });
        }
    }
}

fn review_step(
    ui: &mut egui::Ui,
    w: &mut WizardState,
    rt: &WizardRuntime,
    built: Option<&(NewDomain, Vec<String>)>,
    out: &mut Vec<Command>,
) {
    ui.heading(format!("Review '{}'", w.name.trim()));
    let Some((d, notes)) = built else { return };
    for n in notes {
        ui.label(format!("Note: {n}"));
    }
    if ui
        .button("Prepare the host for this VM…")
        .on_hover_text("Opens the Tuning page with this VM's GPU bound to vfio-pci at boot and hugepages for its memory: each change shown before it is applied, and undoable.")
        .clicked()
    {
        out.push(Command::OpenTuning {
            focus: vec!["vfio-boot".into(), "hugepages".into()],
            gpus: w.gpu.iter().cloned().collect(),
            use_board: false,
            memory_gib: Some(w.memory_for(None).max(1)),
        });
    }
    let busy = rt.validate_job.is_busy() || rt.define_job.is_busy();
    ui.horizontal(|ui| {
        let l = ui.label("libvirt");
        ui.add(
            egui::TextEdit::singleline(&mut w.uri)
                .hint_text(&rt.default_uri)
                .desired_width(220.0),
        )
        .labelled_by(l.id);
        if ui
            .add_enabled(!busy, egui::Button::new("Validate"))
            .on_hover_text("Will this host start it? libvirt's schema, what this QEMU/KVM gives (a short trial start), the files, memory, network and devices.")
            .clicked()
        {
            out.push(Command::Validate { xml: d.xml.clone() });
        }
        if ui
            .add_enabled(!busy, egui::Button::new("Define in libvirt"))
            .on_hover_text("Adds it to libvirt as this host accepts it (the same checks first); a domain of that name is updated, keeping its UUID, MAC addresses and NVRAM.")
            .clicked()
        {
            out.push(Command::Define { xml: d.xml.clone() });
        }
        if busy {
            ui.spinner();
            ui.weak("checking on this host…");
        }
    });
    match &rt.preflight {
        Some((_, Ok(p))) => {
            if p.passes() {
                ui.colored_label(
                    theme::GOOD,
                    "Nothing found that stops it from starting on this host.",
                );
            } else {
                ui.colored_label(theme::BAD, "It will not start on this host as it is:");
            }
            for e in &p.adapted {
                ui.label(RichText::new(format!("Adapted to this host: {}", e.what)).strong());
                ui.label(theme::detail(&e.why));
            }
            finding_list_with(ui, &p.findings, Some(&mut *out));
        }
        Some((_, Err(e))) => {
            ui.colored_label(theme::BAD, format!("Validate failed: {e}"));
        }
        None => {}
    }
    match &rt.defined {
        Some(Ok(plan)) => {
            ui.colored_label(
                theme::GOOD,
                format!(
                    "{} '{}'.",
                    if plan.existing.is_some() {
                        "Updated"
                    } else {
                        "Defined"
                    },
                    plan.name
                ),
            );
            for e in &plan.preflight.adapted {
                ui.label(theme::detail(format!("Adapted to this host: {}", e.what)));
            }
            for k in &plan.kept {
                ui.label(theme::detail(format!(
                    "Kept from the existing domain: {}",
                    k.what
                )));
            }
            vm_control_ui(ui, VmPage::Wizard, &rt.vm, &plan.name, out);
        }
        Some(Err(e)) => {
            ui.colored_label(theme::BAD, format!("Define failed: {e}"));
        }
        None => {}
    }
    ui.horizontal(|ui| {
        let l = ui.label("File");
        ui.add(
            egui::TextEdit::singleline(&mut w.save_path)
                .hint_text("win11.xml")
                .desired_width(220.0),
        )
        .labelled_by(l.id);
        if ui
            .add_enabled(
                !w.save_path.trim().is_empty(),
                egui::Button::new("Save XML"),
            )
            .clicked()
        {
            out.push(Command::SaveXml {
                xml: d.xml.clone(),
                path: w.save_path.trim().into(),
            });
        }
        if ui.button("Copy XML").clicked() {
            ui.ctx().copy_text(d.xml.clone());
        }
    });
    match &rt.saved {
        Some(Ok(m)) => {
            ui.label(m);
        }
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().error_fg_color, format!("Save failed: {e}"));
        }
        None => {}
    }
    ui.separator();
    ui.label(theme::mono(&d.xml));
}
