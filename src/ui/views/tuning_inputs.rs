//! The Tuning page's inputs: the VM's GPUs, CPUs and memory, how its CPUs
//! are isolated (while it runs, the default; at boot for good, its own
//! choice with its cost said), Looking Glass, QEMU as the user, the GPU
//! mode and SR-IOV.

use crate::host::HostSnapshot;
use crate::host::iommu::VerdictKind;
use crate::parse::cpulist::format_cpulist;
use crate::ui::state::{State, TuningChoices};
use crate::ui::theme;
use egui::RichText;

pub(super) fn inputs_ui(ui: &mut egui::Ui, snap: &HostSnapshot, state: &mut State) {
    let vm_cpus = super::tuning::board_cpus(state);
    let card = super::tuning::vm_cards(state).first().cloned();
    let total = snap.kernel.mem_total_kib;
    ui.label(RichText::new(format!("For the VM '{}'", state.vm.name.trim())).strong())
        .on_hover_text("The same VM as on the New VM and CPU pages: its GPU, vCPUs and memory changed here change there.");
    ui.horizontal_wrapped(|ui| {
        for g in snap
            .gpus()
            .filter(|g| g.passthrough.verdict != VerdictKind::NotViable)
        {
            let a = &g.device.address;
            let (vm, c) = (&mut state.vm, &mut state.tuning);
            let mut on = vm.gpu.as_ref() == Some(a) || c.gpus.contains(a);
            if ui
                .checkbox(&mut on, format!("{a}  {}", g.device.display_name()))
                .changed()
            {
                if on && vm.gpu.is_none() {
                    vm.gpu = Some(a.clone());
                } else if on {
                    c.gpus.push(a.clone());
                } else if vm.gpu.as_ref() == Some(a) {
                    vm.gpu = (!c.gpus.is_empty()).then(|| c.gpus.remove(0));
                } else {
                    c.gpus.retain(|x| x != a);
                }
            }
        }
        if snap.gpus().next().is_none() {
            ui.weak("No GPU on this host.");
        }
    });
    ui.horizontal_wrapped(|ui| {
        let l = ui.label("vCPUs");
        let b = &mut state.board;
        let mut n = b.vcpus;
        let online = u32::try_from(snap.topology.summary.cpus_online.max(1)).unwrap_or(u32::MAX);
        if ui
            .add(egui::DragValue::new(&mut n).range(0..=online))
            .labelled_by(l.id)
            .on_hover_text("The CPU page's board's vCPUs: the same count there and on the New VM page. 0: no CPU isolation or governor limited to the VM's CPUs.")
            .changed()
        {
            b.set_vcpus(n);
        }
        match &vm_cpus {
            Some(cpus) => ui.weak(format!("on CPUs {} (the CPU page's board)", format_cpulist(cpus))),
            None if b.vcpus > 0 => ui.weak("placed by the planner (no pins on the CPU page's board yet)"),
            None => ui.weak("none yet"),
        };
    });
    ui.horizontal_wrapped(|ui| {
        let gib = state.vm.memory_for(total);
        let c = &mut state.tuning;
        if ui
            .checkbox(
                &mut c.reserve_hugepages,
                format!("Reserve hugepages for the VM's {gib} GiB"),
            )
            .on_hover_text("The VM's memory is set on the New VM page's Memory step.")
            .changed()
        {
            // The size reserved is the VM's, held from now on.
            state.vm.memory_gib = gib;
        }
        ui.checkbox(&mut c.hugepages_1g, "1 GiB pages (reserved at boot)");
    });
    let c = &mut state.tuning;
    isolation_ui(ui, snap, c, vm_cpus);
    ui.horizontal_wrapped(|ui| {
        let mut lg = c.looking_glass_mib > 0;
        if ui
            .checkbox(&mut lg, "Looking Glass's shared memory for you and QEMU")
            .on_hover_text("The New VM's \"Use it\" step sizes it from the resolution.")
            .changed()
        {
            c.looking_glass_mib = if lg { 32 } else { 0 };
        }
        if lg {
            let l = ui.label("size");
            ui.add(
                egui::DragValue::new(&mut c.looking_glass_mib)
                    .range(16..=1024)
                    .suffix(" MiB"),
            )
            .labelled_by(l.id);
            ui.checkbox(&mut c.kvmfr, "through the kvmfr module");
        }
        ui.checkbox(
            &mut c.qemu_as_me,
            "QEMU runs as you (for your sound server; every system VM becomes yours)",
        );
    });
    super::tuning_gpu_mode::gpu_mode_ui(ui, c, snap, card.as_deref());
    for pf in snap.pci_devices.iter().filter(|e| e.device.sriov.is_some()) {
        let a = pf.device.address.clone();
        let total = pf.device.sriov.as_ref().map_or(0, |s| s.total_vfs);
        ui.horizontal(|ui| {
            let mut n = c.sriov.get(&a).copied().unwrap_or(0);
            let l = ui.label(format!("SR-IOV VFs on {a} {}", pf.device.display_name()));
            if ui
                .add(egui::DragValue::new(&mut n).range(0..=total))
                .labelled_by(l.id)
                .changed()
            {
                if n == 0 {
                    c.sriov.remove(&a);
                } else {
                    c.sriov.insert(a.clone(), n);
                }
            }
            ui.weak(format!("of {total}"));
        });
    }
}

/// Isolation while the VM runs (a libvirt hook, nothing at boot) is the
/// default; at boot (isolcpus, nohz_full) is chosen here, with its cost.
fn isolation_ui(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    c: &mut TuningChoices,
    board: Option<Vec<u32>>,
) {
    ui.horizontal_wrapped(|ui| {
        ui.label("Keep the host off the VM's CPUs");
        ui.radio_value(&mut c.boot_isolation, false, "only while the VM runs");
        let l = ui.label("VM name");
        ui.add(
            egui::TextEdit::singleline(&mut c.isolate_vm)
                .desired_width(140.0)
                .hint_text(theme::hint("win11")),
        )
        .labelled_by(l.id)
        .on_hover_text("A libvirt hook keeps the host's own tasks off the VM's CPUs while that VM runs and gives them back when it stops. Nothing changes at boot.");
        ui.radio_value(&mut c.boot_isolation, true, "at boot, for good");
    });
    let total = snap.topology.summary.cpus_online;
    if c.boot_isolation {
        let which = match &board {
            Some(cpus) => format!(
                "CPUs {} ({} of {total} threads)",
                format_cpulist(cpus),
                cpus.len()
            ),
            None => format!("the VM's CPUs (of {total} threads)"),
        };
        ui.colored_label(
            theme::WARN,
            format!("Costs: the host never runs its own work on {which} again, even while the VM is off (isolcpus, nohz_full on the kernel's command line), until this is undone; it takes a reboot."),
        );
    } else if c.isolate_vm.trim().is_empty() && board.is_some() {
        ui.weak(theme::detail(
            "Name the VM to keep the host off its CPUs while it runs; unnamed, the host shares them with the VM.",
        ));
    }
}
