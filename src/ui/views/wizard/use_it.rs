//! The New VM wizard's "Use it" step: how the user will see, type and hear
//! once the GPU is the VM's — keyboard and mouse by evdev (found by
//! pressing a key: the app watches the candidates on a worker thread), USB
//! devices by ID, a screen without a second monitor (Looking Glass) and an
//! emulated sound card. Each choice says what it needs; the domain is
//! rebuilt from them like every other step's.

use super::StepSpec;
use crate::domain::playable::{
    AudioBackend, ClientSetup, GRAB_TOGGLES, LookingGlass, looking_glass_mib,
};
use crate::host::HostSnapshot;
use crate::host::input::InputKind;
use crate::ui::app::Command;
use crate::ui::pages::WizardRuntime;
use crate::ui::theme;
use crate::ui::wizard_state::{Step, WizardState};

pub const STEP: StepSpec = StepSpec {
    step: Step::UseIt,
    title: "Use it",
    draw: |ui, cx| {
        let gpu = cx.vm.gpu.clone();
        use_it_step(ui, cx.snap, (cx.w, gpu.as_deref()), cx.rt, cx.live, cx.out)
    },
};
use egui::RichText;

fn input_ui(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    w: &mut WizardState,
    rt: &WizardRuntime,
    live: bool,
    out: &mut Vec<Command>,
) {
    ui.label(RichText::new("Keyboard and mouse").strong());
    ui.label(theme::detail("Given to the VM by evdev: the VM reads them directly, and pressing the toggle keys gives them back to the desktop and again to the VM. No USB hand-over, no second keyboard."));
    let devices = &snap.system.input;
    if devices.is_empty() {
        ui.weak("No keyboard or mouse under /dev/input/by-id on this host.");
        return;
    }
    for (kind, field) in [
        (InputKind::Keyboard, &mut w.evdev_keyboard),
        (InputKind::Mouse, &mut w.evdev_mouse),
    ] {
        ui.horizontal_wrapped(|ui| {
            let l = ui.label(format!("{}:", kind.word()));
            let shown = if field.is_empty() {
                "none (PS/2 or SPICE only)".to_string()
            } else {
                field.clone()
            };
            egui::ComboBox::from_id_salt(("evdev", kind.word()))
                .selected_text(shown)
                .show_ui(ui, |ui| {
                    ui.selectable_value(field, String::new(), "none");
                    for d in devices.iter().filter(|d| d.kind == kind) {
                        let name = d.name.clone().unwrap_or_default();
                        ui.selectable_value(field, d.by_id.clone(), format!("{}  {name}", d.by_id));
                    }
                })
                .response
                .labelled_by(l.id);
        });
    }
    ui.horizontal_wrapped(|ui| {
        let watching = rt.input_job.is_busy();
        let b = ui
            .add_enabled(
                live && !watching,
                egui::Button::new("Find them: press a key, move the mouse"),
            )
            .on_hover_text("Watches every keyboard and mouse for 5 seconds and picks the nodes that react: gaming gear has several per device.")
            .on_disabled_hover_text("Only on the live host: a captured host's devices cannot be pressed.");
        if b.clicked() {
            out.push(Command::WatchInput {
                devices: devices.iter().map(|d| d.by_id.clone()).collect(),
            });
        }
        if watching {
            ui.spinner();
            ui.label("Press a key on the VM's keyboard and move its mouse now…");
        }
    });
    if let Some(r) = &rt.input_result {
        match r {
            Ok(found) if found.iter().all(|x| x.keys + x.moves == 0) => {
                ui.colored_label(
                    theme::WARN,
                    "Nothing reacted in 5 seconds: try again, pressing a key while it watches.",
                );
            }
            Ok(found) => {
                for x in found.iter().filter(|x| x.keys + x.moves > 0) {
                    ui.label(theme::detail(format!(
                        "{}: {} keys, {} moves",
                        x.by_id, x.keys, x.moves
                    )));
                }
            }
            Err(e) => {
                ui.colored_label(theme::BAD, e);
            }
        }
    }
    ui.horizontal(|ui| {
        let l = ui.label("Switch between host and VM with");
        egui::ComboBox::from_id_salt("grab_toggle")
            .selected_text(w.grab_toggle.clone())
            .show_ui(ui, |ui| {
                for t in GRAB_TOGGLES {
                    ui.selectable_value(&mut w.grab_toggle, (*t).to_string(), *t);
                }
            })
            .response
            .labelled_by(l.id);
    });
}

fn usb_ui(ui: &mut egui::Ui, snap: &HostSnapshot, w: &mut WizardState) {
    ui.label(RichText::new("USB devices").strong());
    ui.label(theme::detail("Passed by their IDs: a device that is unplugged does not stop the VM's start (replugged while it runs, it stays with the host until the next start). A whole controller goes on the GPU step's device list; the one with the host's only keyboard is refused."));
    let mut any = false;
    for c in &snap.system.usb {
        let name = c
            .pci_address
            .clone()
            .unwrap_or_else(|| "USB controller".into());
        let group = c
            .pci_address
            .as_deref()
            .and_then(|a| snap.device(a))
            .and_then(|e| e.device.iommu_group)
            .map(|g| format!(", IOMMU group {g}"))
            .unwrap_or_default();
        ui.label(format!(
            "{name} (buses {}){group}",
            c.buses
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for d in c.devices.iter().filter(|d| !d.hub) {
            let (Some(v), Some(p)) = (d.vendor, d.product) else {
                continue;
            };
            any = true;
            let id = format!("{v:04x}:{p:04x}");
            let mut on = w.usb.contains(&id);
            let kind = if d.keyboard {
                " (keyboard)"
            } else if d.mouse {
                " (mouse)"
            } else {
                ""
            };
            if ui
                .checkbox(&mut on, format!("  {} {}{kind}", d.path, d.label()))
                .changed()
            {
                if on {
                    w.usb.push(id);
                } else {
                    w.usb.retain(|x| *x != id);
                }
            }
        }
    }
    if !any {
        ui.weak("No USB devices plugged in (or none this host lets us see).");
    }
}

fn screen_ui(ui: &mut egui::Ui, snap: &HostSnapshot, (w, gpu): (&mut WizardState, Option<&str>)) {
    ui.label(RichText::new("A screen without a second monitor").strong());
    ui.checkbox(
        &mut w.looking_glass,
        "Looking Glass: the VM's screen in a window on the desktop",
    );
    if !w.looking_glass {
        ui.label(theme::detail(
            "Without it the VM shows its picture on a monitor plugged into the passed-through GPU.",
        ));
        return;
    }
    ui.horizontal(|ui| {
        let l = ui.label("Resolution");
        ui.add(egui::DragValue::new(&mut w.lg_width).range(640..=7680))
            .labelled_by(l.id);
        let x = ui.label("x");
        ui.add(egui::DragValue::new(&mut w.lg_height).range(480..=4320))
            .labelled_by(x.id)
            .on_hover_text("Height in pixels");
        ui.checkbox(&mut w.lg_hdr, "HDR");
    });
    let mib = looking_glass_mib(w.lg_width, w.lg_height, w.lg_hdr);
    ui.label(theme::detail(format!("{mib} MiB of shared memory: two frames plus 10 MiB, rounded up to a power of two (too small cuts the picture).")));
    ui.checkbox(
        &mut w.lg_kvmfr,
        "Through the kvmfr module (/dev/kvmfr0; the Tuning page sets it up)",
    );
    let client = ClientSetup::for_choice(&LookingGlass {
        width: w.lg_width,
        height: w.lg_height,
        hdr: w.lg_hdr,
        kvmfr: w.lg_kvmfr,
    });
    ui.label(theme::detail(format!("Then run the client on this host: {}. SPICE, on 127.0.0.1 only, carries keyboard, mouse, clipboard and sound; 5900 is the port of the first SPICE VM that starts (virsh domdisplay names another).", client.command())));
    let others = snap
        .gpus()
        .filter(|g| Some(g.device.address.as_str()) != gpu)
        .count();
    if others == 0 {
        ui.colored_label(theme::WARN, "Looking Glass's client runs on the host and needs a GPU of the host's own (an iGPU counts): this host has no other.");
    } else {
        ui.label(theme::detail("The host's other GPU shows the window; the VM needs a display attached to its GPU (a monitor input or a dummy plug) for Windows to draw at all."));
    }
}

fn sound_ui(ui: &mut egui::Ui, w: &mut WizardState) {
    ui.label(RichText::new("Sound").strong());
    ui.checkbox(&mut w.sound, "An emulated sound card, heard on the host");
    let backend = w.playable().sound.map(|s| s.backend);
    let text = match backend {
        Some(AudioBackend::Spice) => {
            "ich9 HD Audio at 48 kHz into SPICE: the Looking Glass client plays it (B6 and later), so the system QEMU needs no way into your desktop session."
        }
        Some(AudioBackend::Pipewire) => {
            "ich9 HD Audio at 48 kHz on PipeWire (this host's QEMU and libvirt know it), at your session's socket. A system QEMU runs as another user: the Tuning page's sound change lets it reach your session."
        }
        Some(_) => {
            "ich9 HD Audio at 48 kHz on PulseAudio (PipeWire desktops answer it too), at your session's socket. A system QEMU runs as another user: the Tuning page's sound change lets it reach your session."
        }
        None => {
            "The GPU's own HDMI/DisplayPort audio goes with the card: with speakers on the monitor that is all the VM needs."
        }
    };
    ui.label(theme::detail(text));
}

pub fn use_it_step(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    (w, gpu): (&mut WizardState, Option<&str>),
    rt: &WizardRuntime,
    live: bool,
    out: &mut Vec<Command>,
) {
    ui.heading("Use it: see, type and hear");
    input_ui(ui, snap, w, rt, live, out);
    ui.separator();
    usb_ui(ui, snap, w);
    ui.separator();
    screen_ui(ui, snap, (w, gpu));
    ui.separator();
    sound_ui(ui, w);
}
