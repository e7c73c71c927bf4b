//! New VM: a step-by-step wizard for a tuned Windows passthrough domain. The
//! domain is rebuilt from the choices every frame (it takes well under a
//! millisecond), so every step shows what it changes; the review step shows the
//! XML, checks it against libvirt's schema and the host's capabilities, and
//! defines it or saves it to a file.

use crate::domain::from_host::prepare;
use crate::domain::template::{DiskBus, NewDomain, new_windows};
use crate::host::HostSnapshot;
use crate::host::iommu::VerdictKind;
use crate::libvirt::caps::DomainCaps;
use crate::ui::app::Command;
use crate::ui::jobs::{Job, PickField};
use crate::ui::wizard_state::{HugeChoice, NetChoice, Step, WizardState};
use egui::{Color32, RichText};

/// What the app knows beyond the choices: libvirt's answers.
#[derive(Debug, Clone, Default)]
pub struct WizardRuntime {
    pub caps: Option<DomainCaps>,
    pub validation: Option<(bool, Vec<String>)>,
    pub defined: Option<Result<String, String>>,
    pub saved: Option<Result<String, String>>,
    /// Said when a file dialog gave nothing.
    pub pick_note: Option<String>,
    /// The CPU page's "apply pinning to domain".
    pub applied: Option<Result<String, String>>,
    pub busy: bool,
    /// The URI used when the user leaves it empty.
    pub default_uri: String,
}

const WARN: Color32 = Color32::from_rgb(220, 150, 30);

pub fn wizard_ui(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    w: &mut WizardState,
    rt: &WizardRuntime,
    out: &mut Vec<Command>,
) {
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
        if ui.add_enabled(w.step != Step::Review, next).clicked() {
            w.step = w.step.next();
        }
    });
    ui.separator();
    let prepared = prepare(snap, &w.choices(), rt.caps.clone());
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
            Step::Features => features_step(ui, w, built.as_ref().ok()),
            Step::Review => review_step(ui, w, rt, built.as_ref().ok(), out),
        });
}

fn gpu_step(ui: &mut egui::Ui, snap: &HostSnapshot, w: &mut WizardState) {
    ui.heading("Which GPU goes to the VM?");
    ui.label("Its whole passthrough set goes with it: the other functions of the card (HDMI audio, USB-C) and anything sharing its IOMMU group.");
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
    ui.horizontal(|ui| {
        let l = ui.label("Guest memory");
        ui.add(
            egui::DragValue::new(&mut w.memory_gib)
                .range(1..=4096)
                .suffix(" GiB"),
        )
        .labelled_by(l.id);
    });
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
            out.push(Command::Job(Job::PickFile(field)));
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
    path_row(
        ui,
        "Disk image or block device",
        &mut w.disk,
        "/var/lib/libvirt/images/win11.qcow2 or /dev/nvme1n1",
        PickField::Disk,
        out,
    );
    path_row(
        ui,
        "Windows installer ISO",
        &mut w.install_iso,
        "Win11_English_x64.iso",
        PickField::InstallIso,
        out,
    );
    path_row(
        ui,
        "virtio-win driver ISO",
        &mut w.virtio_iso,
        "virtio-win.iso",
        PickField::VirtioIso,
        out,
    );
    if let Some(n) = &rt.pick_note {
        ui.colored_label(WARN, n);
    }
    ui.weak("Validate (on the Review step) checks that the files exist.");
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
    ui.heading("Windows and features");
    ui.horizontal(|ui| {
        ui.radio_value(&mut w.windows11, true, "Windows 11 (Secure Boot, TPM 2.0)");
        ui.radio_value(&mut w.windows11, false, "Windows 10");
    });
    ui.horizontal(|ui| {
        let l = ui.label("Name");
        ui.text_edit_singleline(&mut w.name).labelled_by(l.id);
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
    ui.separator();
    ui.label(RichText::new("What the VM gets, and why").strong());
    if let Some((d, _)) = built {
        for e in &d.edits {
            ui.label(RichText::new(&e.what).strong());
            ui.weak(&e.why);
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
    ui.heading("Review");
    let Some((d, notes)) = built else { return };
    for n in notes {
        ui.label(format!("Note: {n}"));
    }
    let uri = if w.uri.trim().is_empty() {
        rt.default_uri.clone()
    } else {
        w.uri.trim().to_string()
    };
    ui.horizontal(|ui| {
        let l = ui.label("libvirt");
        ui.add(
            egui::TextEdit::singleline(&mut w.uri)
                .hint_text(&rt.default_uri)
                .desired_width(220.0),
        )
        .labelled_by(l.id);
        let enabled = !rt.busy;
        if ui
            .add_enabled(enabled, egui::Button::new("Validate"))
            .clicked()
        {
            out.push(Command::Job(Job::Validate {
                xml: d.xml.clone(),
                uri: uri.clone(),
            }));
        }
        if ui
            .add_enabled(enabled, egui::Button::new("Define in libvirt"))
            .clicked()
        {
            out.push(Command::Job(Job::Define {
                xml: d.xml.clone(),
                uri: uri.clone(),
            }));
        }
        if rt.busy {
            ui.spinner();
        }
    });
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
    if let Some((ok, lines)) = &rt.validation {
        for l in lines {
            if *ok {
                ui.label(l)
            } else {
                ui.colored_label(WARN, l)
            };
        }
    }
    for (r, what) in [(&rt.defined, "Define"), (&rt.saved, "Save")] {
        match r {
            Some(Ok(m)) => {
                ui.label(m);
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, format!("{what} failed: {e}"));
            }
            None => {}
        }
    }
    ui.separator();
    ui.label(RichText::new(&d.xml).monospace());
}
