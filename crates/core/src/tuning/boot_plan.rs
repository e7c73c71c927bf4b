//! The boot kinds, planned together: vfio-pci in the initramfs
//! (`vfio-boot`), the kernel command line (`cmdline`), and the IOMMU in the
//! firmware (`iommu-firmware`, only ever a manual step). Together because
//! the devices' IDs go on the command line with the other parameters, so
//! that the boot entry is the one switch between the old setup and the
//! new (see vfio_boot::IdsAt), and into modprobe.d only where the command
//! line is a manual step. The loader and initramfs back-ends are boot.rs,
//! boot/ and vfio_boot.rs.

use super::boot::{Generator, Loader, cmdline_change};
use super::facts::TuneFacts;
use super::kind::{ChangeId, Kind};
use super::model::{Manual, Request};
use super::plan_error::PlanError;
use super::tokens::allowed;
use super::vfio_address::{BIND_TOKEN, shared_ids};
use super::vfio_boot::{IdsAt, ids_and_drivers, ids_token, vfio_boot_change};
use crate::host::HostSnapshot;
use crate::host::pci::full_address;
use crate::parse::cpulist::format_cpulist;
use crate::tuning::paths;

pub use super::kinds::BootChanges;

/// Plans the `vfio-boot` kind (its line in `kinds::planner`).
pub(crate) fn plan_vfio_boot(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    match &cx.boot.vfio_boot {
        Ok(c) => out.changes.extend(c.clone()),
        Err(why) => out.notes.push(why.to_string()),
    }
    Ok(())
}

/// Plans the `cmdline` kind (its line in `kinds::planner`).
pub(crate) fn plan_cmdline(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    match &cx.boot.cmdline {
        Ok(Some(c)) => {
            let mut c = c.clone();
            c.fixes.extend(
                ["iommu.enabled", "iommu.passthrough_mode", "cpu.isolation"].map(String::from),
            );
            // After the initramfs: the boot entry is switched last.
            out.changes.push(c);
        }
        Ok(None) => {}
        Err(m) => out.manual.push(m.clone()),
    }
    Ok(())
}

/// The boot changes for `set` (bound at boot) with the kernel parameters
/// `tok`; an error when a parameter is not one this tool writes.
pub fn plan_boot(
    snap: &HostSnapshot,
    f: &TuneFacts,
    (loader, generator): (Loader, Generator),
    set: &[String],
    tok: &[String],
) -> Result<BootChanges, PlanError> {
    let (ids, _, _) = ids_and_drivers(snap, set);
    // Two identical cards: bound by address, the command line's switch is
    // ours (vfio_address.rs), never the IDs the host's card shares.
    let by_address = !shared_ids(snap, set).is_empty();
    // The image to rebuild cannot be told: no binding at boot at all (not
    // its IDs on the command line either), and the plan says why.
    let refused = (!set.is_empty())
        .then(|| super::vfio_rebuild::refusal(f, loader, generator))
        .flatten();
    let ids_tok = match (ids.is_empty() || refused.is_some(), by_address) {
        (true, _) => None,
        (false, false) => Some(ids_token(&ids)),
        // A built-in vfio-pci runs no install line: nothing binds by
        // address at boot (said by the vfio-boot change's note).
        (false, true) if f.vfio_builtin => None,
        (false, true) => Some(BIND_TOKEN.to_string()),
    };
    let mut with_ids = tok.to_vec();
    with_ids.extend(ids_tok.clone());
    if let Some(bad) = with_ids.iter().find(|t| !allowed(t)) {
        return Err(PlanError::Token(bad.clone()));
    }
    let mut ids_at = IdsAt::Cmdline;
    let cmdline = match (with_ids.is_empty(), f.vfio_builtin) {
        (true, _) => Ok(None),
        (false, true) => cmdline_change(f, loader, &with_ids),
        (false, false) => match cmdline_change(f, loader, &with_ids) {
            Err(_) if ids_tok.is_some() => {
                ids_at = IdsAt::Modprobe;
                if tok.is_empty() {
                    Ok(None)
                } else {
                    cmdline_change(f, loader, tok)
                }
            }
            other => other,
        },
    };
    let mut vfio_boot = match refused {
        Some(why) => Err(why),
        None => vfio_boot_change(f, snap, generator, loader, set, ids_at),
    };
    // The IDs (or our switch) on the command line: the binding at boot
    // claims nothing on a boot without that change.
    if ids_at == IdsAt::Cmdline
        && ids_tok.is_some()
        && matches!(cmdline, Ok(Some(_)))
        && let Ok(Some(c)) = vfio_boot.as_mut()
    {
        c.needs.push(ChangeId::of(Kind::Cmdline));
    }
    Ok(BootChanges { vfio_boot, cmdline })
}

/// Whether the GPU at `addr`'s driver removed the firmware's framebuffer
/// from the card when it loaded (every kernel DRM driver for a PCI card
/// does, through the aperture helpers; NVIDIA's own driver only with
/// `nvidia_drm.fbdev=1`): then `initcall_blacklist=sysfb_init` is not
/// needed, and it would cost the boot console (a LUKS passphrase prompt)
/// until that driver loads.
fn evicts_boot_framebuffer(snap: &HostSnapshot, f: &TuneFacts, addr: &str) -> bool {
    const DRM: &[&str] = &[
        "amdgpu",
        "radeon",
        "i915",
        "xe",
        "nouveau",
        "bochs-drm",
        "qxl",
        "virtio-pci",
        "ast",
        "mgag200",
        "cirrus-qemu",
        "cirrus",
        "vmwgfx",
        "hibmc-drm",
    ];
    let Some(d) = snap.device(&full_address(addr.trim())) else {
        return false;
    };
    match d.device.driver.as_deref() {
        Some("nvidia") => f
            .value(paths::SYS_MODULE_NVIDIA_DRM_PARAMETERS_FBDEV)
            .is_some_and(|v| v.trim() == "Y"),
        Some(drv) => DRM.contains(&drv),
        None => false,
    }
}

/// The kernel parameters the request needs that `/proc/cmdline` and the
/// host do not already give.
pub(crate) fn tokens(
    snap: &HostSnapshot,
    f: &TuneFacts,
    req: &Request,
    set: &[String],
    vm: &[u32],
    hk: &[u32],
    manual: &mut Vec<Manual>,
) -> Vec<String> {
    let mut t = Vec::new();
    if !set.is_empty() {
        let intel = snap.cpu.vendor.as_deref() == Some("GenuineIntel");
        let table = snap.firmware.acpi_dmar || snap.firmware.acpi_ivrs;
        if !snap.iommu.active {
            if snap.firmware.acpi_tables_visible && !table {
                manual.push(Manual {
                    id: ChangeId::of(Kind::IommuFirmware),
                    title: "Turn the IOMMU on in the firmware".into(),
                    why: "The firmware offers no IOMMU table (DMAR/IVRS): no kernel parameter can help until it is switched on.".into(),
                    steps: vec![if intel {
                        "In the firmware setup: Intel VT-d: Enabled (often under Advanced > System Agent, or Chipset).".into()
                    } else {
                        "In the firmware setup: AMD CBS > NBIO > IOMMU: Enabled (and SVM Mode on).".into()
                    }],
                });
            } else if intel {
                // AMD's IOMMU is on by default when the IVRS table is there;
                // `amd_iommu=on` is not even a value the kernel takes.
                t.push("intel_iommu=on".to_string());
            }
        }
        t.push("iommu=pt".to_string());
    }
    if !vm.is_empty() && !hk.is_empty() && !req.host_keeps_vm_cpus {
        let v = format_cpulist(vm);
        // The hook keeps host tasks off them while the VM runs instead.
        if !req.isolation_hook {
            t.push(format!("isolcpus=managed_irq,domain,{v}"));
        }
        t.push(format!("nohz_full={v}"));
        t.push(format!("rcu_nocbs={v}"));
        t.push(format!("irqaffinity={}", format_cpulist(hk)));
    }
    // No card named: the host's only GPU is the one single GPU is about;
    // with several, which one is not known, so the blacklist is kept.
    let only_gpu: Vec<String> = match snap.gpus().collect::<Vec<_>>().as_slice() {
        [one] if req.gpus.is_empty() => vec![one.device.address.clone()],
        _ => Vec::new(),
    };
    let cards = if req.gpus.is_empty() {
        only_gpu
    } else {
        req.gpus.iter().map(ToString::to_string).collect()
    };
    if req.single_gpu
        && (cards.is_empty() || !cards.iter().all(|g| evicts_boot_framebuffer(snap, f, g)))
    {
        // simpledrm/efifb on the firmware's framebuffer keeps the card's
        // memory reserved ("BAR 0: can't reserve" at the VM's start) —
        // unless the card's own driver took it over when it loaded.
        t.push("initcall_blacklist=sysfb_init".into());
    }
    if req.hugepages_1g
        && let Some(mib) = req.memory_mib
    {
        let pages = mib.div_ceil(1024);
        let free: u64 = f
            .value("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if free < pages {
            t.push("default_hugepagesz=1G".into());
            t.push("hugepagesz=1G".into());
            t.push(format!("hugepages={pages}"));
        }
    }
    t
}
