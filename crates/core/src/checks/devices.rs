//! Per-device checks (every GPU by default, or the device the user names): the
//! passthrough set is viable, its members are bound to vfio-pci (or can be),
//! the host driver did not grab it first, the boot framebuffer does not hold it,
//! it can be reset, resizable BAR, laptop GPUs, a display left for the host,
//! and SR-IOV physical functions.

use super::model::{Finding, Status};
use crate::host::iommu::VerdictKind;
use crate::host::pci::full_address;
use crate::host::usage::{GpuOwner, boot_framebuffers_in, gpu_owner, vfio_ids_configured};
use crate::host::{HostSnapshot, PciEntry};
use crate::sysroot::HostPath;

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "devices",
    ids: &[
        super::CheckId("device.exists"),
        super::CheckId("device.viable"),
        super::CheckId("device.bound"),
        super::CheckId("device.host_driver_first"),
        super::CheckId("device.boot_vga"),
        super::CheckId("device.reset"),
        super::CheckId("device.rebar"),
        super::CheckId("device.laptop_gpu"),
        super::CheckId("device.host_display"),
        super::CheckId("device.sriov_pf"),
    ],
    run: Some(check),
};

/// AMD GPUs known for the reset bug (they do not reset between VM runs without
/// vendor-reset): Polaris 10/11/12, Vega 10/20, Navi 10/12/14 device ids.
const AMD_RESET_BUG: &[u16] = &[
    0x67df, 0x67ef, 0x67ff, 0x699f, 0x6fdf, // Polaris
    0x687f, 0x6863, 0x66af, 0x66a0, 0x66a1, 0x66a2, 0x66a3, // Vega 10/20
    0x731f, 0x7310, 0x7312, 0x7340, 0x7341, 0x7347, 0x734f, 0x7360, 0x7362, // Navi 10/12/14
];

pub(super) fn dev_path(addr: &str, attr: &str) -> String {
    HostPath::sys(&format!("bus/pci/devices/{addr}/{attr}")).to_string()
}

/// The devices to check: the named one, or every GPU.
pub fn targets<'a>(s: &'a HostSnapshot, device: Option<&str>) -> Vec<&'a PciEntry> {
    match device {
        Some(addr) => s.device(&full_address(addr)).into_iter().collect(),
        None => s.gpus().collect(),
    }
}

pub fn check(s: &HostSnapshot, device: Option<&str>, out: &mut Vec<Finding>) {
    if let Some(addr) = device
        && targets(s, Some(addr)).is_empty()
    {
        out.push(
            Finding::new(
                "device.exists",
                format!("No PCI device {addr}"),
                Status::Fail,
            )
            .evidence(
                HostPath::sys("bus/pci/devices").to_string(),
                format!("{} devices, none at {addr}", s.pci_devices.len()),
            )
            .why("The device to check must exist on this host.")
            .fix("Give the address as lspci prints it, e.g. 01:00.0 or 0000:01:00.0."),
        );
    }
    for e in targets(s, device) {
        check_one(s, e, out);
    }
}

fn check_one(s: &HostSnapshot, e: &PciEntry, out: &mut Vec<Finding>) {
    let d = &e.device;
    let a = d.address.as_str();
    let name = d.display_name();
    let v = &e.passthrough;

    let viable = Finding::new("device.viable", format!("{name}: the IOMMU group can go to a VM"), Status::Pass)
        .device(a)
        .evidence(dev_path(a, "iommu_group"), d.iommu_group.map(|g| g.to_string()).unwrap_or_else(|| "none".into()))
        .evidence("passthrough set", v.set.join(", "))
        .why("VFIO gives a VM whole IOMMU groups; every endpoint in the group goes along, and the host must be able to do without all of them.");
    out.push(match v.verdict {
        VerdictKind::ViableAlone | VerdictKind::ViableWith => Finding { title: v.reason.clone(), ..viable },
        VerdictKind::NoIommu => Finding { status: Status::Unknown, title: format!("{name}: no IOMMU groups yet"), ..viable }
            .fix("Turn the IOMMU on first (see iommu.enabled)."),
        VerdictKind::NotViable => {
            let mut f = Finding { status: Status::Fail, title: format!("{name}: group not viable"), ..viable };
            for b in &v.blockers {
                f = f.evidence(b.address.clone(), b.reason.clone());
            }
            f.fix("Bind every member of the group to vfio-pci if the host can spare them; otherwise move the card to a slot wired to the CPU (its own group) — check the board manual for which slots are. The ACS override patch splits groups by pretending, not by isolating: use it only knowing that.")
        }
    });

    // Binding of every member.
    let mut held_by_host = Vec::new();
    for m in &v.set {
        if let Some(me) = s.device(m)
            && let Some(drv) = &me.device.driver
            && !me.device.bound_for_vm()
        {
            held_by_host.push((m.clone(), drv.clone()));
        }
    }
    let mut bound = Finding::new("device.bound", format!("{name}: every function is free for vfio-pci"), Status::Pass)
        .device(a)
        .why("Before the VM starts, every function in the set must be bound to vfio-pci (or to no driver). libvirt does it for devices marked managed='yes'; a host driver in use can refuse to let go.");
    for m in &v.set {
        let drv = s
            .device(m)
            .and_then(|x| x.device.driver.clone())
            .unwrap_or_else(|| "none".into());
        bound = bound.evidence(dev_path(m, "driver"), drv);
    }
    let owner = gpu_owner(s, a);
    // GPUs that stay when this card's set goes.
    let others = s
        .gpus()
        .filter(|g| !v.set.contains(&g.device.address))
        .count();
    if let (GpuOwner::Host(why_host), Some((_, drv))) = (owner, held_by_host.first()) {
        // The host's own card: its driver holding it is how it should be.
        bound.title = format!("{name}: the host's card, on its own driver ({drv})");
        bound.why = format!(
            "The host shows its screen on this card: {why_host}. Its own driver holding it is right, and it is not proposed for a VM; vfio-pci is for the card the VM gets."
        );
    } else if !held_by_host.is_empty()
        && let Some(hook) = s
            .system
            .libvirt_hooks
            .iter()
            .find(|h| h.executable && h.lends.iter().any(|f| f == a))
    {
        // Shared: the desktop's while the VM is off, by design.
        bound.status = Status::Info;
        bound.title = format!("{name}: the desktop's while the VM is off (shared GPU)");
        bound.why = format!(
            "Our shared-GPU hook ({}) moves {} to vfio-pci at the VM's start and back to its drivers at its stop; until then the host's drivers holding it is how it should be.",
            hook.path,
            hook.lends.join(", ")
        );
    } else if !held_by_host.is_empty() {
        bound.status = Status::Warn;
        bound.title = format!(
            "{name}: host drivers hold {} function(s)",
            held_by_host.len()
        );
        let ids: Vec<String> = v
            .set
            .iter()
            .filter_map(|m| s.device(m))
            .map(|x| format!("{}:{}", x.device.vendor_id, x.device.device_id))
            .collect();
        bound = bound.fix(format!(
            "Either let libvirt rebind at VM start (<hostdev managed='yes'>, the default in virt-manager), or bind at boot: add `options vfio-pci ids={}` and `softdep {} pre: vfio-pci` to /etc/modprobe.d/vfio.conf and rebuild the initramfs.",
            ids.join(","),
            held_by_host.first().map(|(_, d)| d.as_str()).unwrap_or("DRIVER")
        ));
    }
    out.push(bound);

    // Host GPU driver grabbed it although vfio-pci ids are configured
    // (in modprobe.d, or on the kernel command line).
    let configured = vfio_ids_configured(s, d);
    if let (Some((file, line)), Some(drv)) = (configured, &d.driver)
        && !d.bound_for_vm()
    {
        out.push(
                Finding::new("device.host_driver_first", format!("{name}: {drv} took the card before vfio-pci"), Status::Fail)
                    .device(a)
                    .evidence(file, line)
                    .evidence(dev_path(a, "driver"), drv.clone())
                    .why("vfio-pci.ids only works if vfio-pci loads before the GPU driver; otherwise the host driver binds first and keeps the card.")
                    .fix(format!("Add `softdep {} pre: vfio-pci` (the driver's module) to /etc/modprobe.d/vfio.conf, make sure vfio-pci is in the initramfs (update-initramfs -u / dracut -f / mkinitcpio -P) and reboot.", d.driver_module.as_deref().unwrap_or(drv))),
            );
    }

    // Boot VGA and the firmware framebuffer.
    if d.boot_vga == Some(true) {
        let overlapping = boot_framebuffers_in(s, d);
        let mut f = Finding::new("device.boot_vga", format!("{name} is the boot GPU"), Status::Warn)
            .device(a)
            .evidence(dev_path(a, "boot_vga"), "1")
            .why("The firmware and the host console start on the boot GPU; its framebuffer driver (efifb, simpledrm) keeps a claim on the card's memory, so the VM gets \"BAR 0: can't reserve\" or a black screen.")
            .fix("Prefer another slot/GPU for the host display (firmware setting \"Primary display\"); or keep the host off it: add video=efifb:off (older kernels) or initcall_blacklist=sysfb_init (simpledrm) to the kernel command line.");
        if matches!(owner, GpuOwner::Host(_)) && others > 0 {
            // The console on the host's own card is where it belongs. (The
            // only GPU can go to a VM only in single-GPU mode, where its
            // framebuffer does matter: that stays a warning.)
            f.status = Status::Info;
            f.title = format!("{name} is the boot GPU: the host's console is on it");
            f.why = "The firmware and the host console start on the boot GPU, and it stays with the host: its framebuffer is no obstacle to passing another card. It would be one only if this card went to a VM (\"BAR 0: can't reserve\", a black screen).".into();
            f.fix = None;
        }
        for fb in &overlapping {
            f = f.evidence(HostPath::proc("iomem").to_string(), fb.clone());
        }
        out.push(f);
    }

    // Reset.
    let amd_bug = d.vendor_id.0 == 0x1002 && AMD_RESET_BUG.contains(&d.device_id.0);
    let mut reset = Finding::new("device.reset", format!("{name} can be reset"), Status::Pass)
        .device(a)
        .evidence(dev_path(a, "reset_method"), if d.reset.methods.is_empty() { "none".to_string() } else { d.reset.methods.join(" ") })
        .why("The VM's device is reset when the VM starts and stops; a device that cannot be reset comes back dead and the VM hangs on its second start until the host reboots.");
    if amd_bug {
        let has_vendor_reset = s.kernel.has_module("vendor_reset") == Some(true);
        let specific = d.reset.methods.first().map(String::as_str) == Some("device_specific");
        reset.status = if has_vendor_reset && specific {
            Status::Pass
        } else {
            Status::Warn
        };
        reset.title = format!("{name} has the AMD reset bug");
        reset = reset.fix("Install vendor-reset (DKMS), load it early, and set `echo device_specific > /sys/bus/pci/devices/ADDR/reset_method` before each VM start (kernel 5.15+ needs this step).");
    } else if !d.reset.known {
        reset.status = Status::Unknown;
        reset.title = format!("{name}: reset method unknown in this capture");
    } else if !d.reset.can_reset {
        reset.status = Status::Warn;
        reset.title = format!("{name} has no reset method");
        reset = reset.fix("Expect trouble restarting the VM without rebooting the host; a different card or slot (secondary bus reset needs the card alone behind its bridge) may help.");
    }
    out.push(reset);

    if d.is_gpu() && d.config.as_ref().is_some_and(|c| c.resizable_bar) {
        out.push(
            Finding::new("device.rebar", format!("{name} supports Resizable BAR"), Status::Info)
                .device(a)
                .evidence(dev_path(a, "config"), "Resizable BAR capability")
                .why("With Resizable BAR on, the GPU exposes a BAR as large as its memory; QEMU and OVMF must map it, and some guest drivers answer a mismatch with Code 43.")
                .fix("If the guest shows Code 43 or a black screen, turn Resizable BAR off in the firmware or set the BAR size for the host (echo 8 > /sys/bus/pci/devices/ADDR/resource1_resize), and enable \"Above 4G decoding\"."),
        );
    }
    if d.class_subclass() == 0x0302 && s.system.battery {
        out.push(
            Finding::new("device.laptop_gpu", format!("{name} is a laptop 3D controller"), Status::Warn)
                .device(a)
                .evidence(dev_path(a, "class"), format!("{}", d.class))
                .why("A laptop dGPU without its own display output (MUX-less Optimus) renders through the iGPU; passed to a VM it has no screen, and its VBIOS often lives in ACPI, not a ROM.")
                .fix("Check for a MUX switch in the firmware; otherwise plan for Looking Glass and a VBIOS file, and expect Code 43 workarounds."),
        );
    }

    // Does the host keep a display?
    let mut disp = Finding::new("device.host_display", format!("The host keeps a GPU when {name} goes to the VM"), Status::Pass)
        .device(a)
        .evidence("GPUs outside the passthrough set", others.to_string())
        .why("With a single GPU, the host loses its screen while the VM runs (single-GPU passthrough): possible, but it needs hook scripts and leaves nothing to fix problems with.");
    if others == 0 {
        disp.status = Status::Warn;
        disp.title = format!("{name} is the only GPU: single-GPU passthrough");
        // A GPU on the root bus is the CPU's (or chipset's) own graphics.
        let integrated = crate::host::gpu_kind::classify(s.cpu.vendor.as_deref(), d).kind
            == crate::host::gpu_kind::GpuKind::Integrated;
        let cpu_igpu = s
            .cpu
            .model_name
            .as_deref()
            .and_then(crate::host::gpu_kind::cpu_has_igpu);
        disp = disp.fix(match (integrated, cpu_igpu) {
            (true, _) => "This is the CPU's own graphics, the host's only screen: add a GPU for the VM, share it instead (Intel GVT-g or SR-IOV on recent iGPUs), or set up single-GPU hooks and SSH access.".to_string(),
            (false, Some((false, _))) => format!(
                "The {} has no integrated graphics: add a second GPU for the host (a cheap one will do), or set up single-GPU hooks and SSH access.",
                s.cpu.model_name.as_deref().unwrap_or("CPU").trim()
            ),
            (false, _) => "Use the CPU's integrated graphics for the host (enable it in the firmware), add a cheap second GPU, or set up single-GPU hooks and SSH access.".to_string(),
        });
    }
    out.push(disp);

    for m in &v.set {
        if let Some(pf) = s
            .device(m)
            .filter(|x| x.device.sriov.as_ref().is_some_and(|sr| sr.num_vfs > 0))
        {
            out.push(
                Finding::new("device.sriov_pf", format!("{} has SR-IOV virtual functions enabled", pf.device.display_name()), Status::Warn)
                    .device(m)
                    .evidence(dev_path(m, "sriov_numvfs"), pf.device.sriov.as_ref().map(|x| x.num_vfs.to_string()).unwrap_or_default())
                    .why("The physical function manages its virtual functions; passing the PF to a VM takes the VFs' manager away from the host.")
                    .fix("Pass a virtual function instead and keep the PF on its host driver."),
            );
        }
    }
}
