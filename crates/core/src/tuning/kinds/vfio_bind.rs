//! The VM's devices bound to vfio-pci now (driver_override, unbind, probe).

use super::{ChangeId, Kind, action, change, value};
use crate::host::HostSnapshot;
use crate::tuning::command::{Cmd, Module};
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, CommandStep, Effect, Verify};
use crate::tuning::paths;

/// Plans the `vfio-bind` kind (its line in `kinds::planner`).
pub(crate) fn plan_vfio_bind(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    out.changes.extend(vfio_bind(cx.snap, cx.facts, cx.set));
    Ok(())
}

/// The VM's devices bound to vfio-pci now (driver_override, unbind, probe).
pub fn vfio_bind(snap: &HostSnapshot, f: &TuneFacts, set: &[String]) -> Option<Change> {
    let mut c = change(
        ChangeId::of(Kind::VfioBind),
        String::new(),
        "Bound now, the devices can go to the VM without a reboot; the override keeps the host driver from taking them back until it is cleared (undo).",
        Effect::Now,
    );
    let mut names = Vec::new();
    for a in set {
        let Some(e) = snap.device(a) else { continue };
        let d = &e.device;
        if d.driver.as_deref() == Some("vfio-pci") {
            continue;
        }
        if d.boot_vga == Some(true) && d.driver.is_some() {
            c.notes.push(format!("{a} shows the host's boot screen and is on {}: unbinding it now would take the desktop away; it is bound at boot instead (vfio-boot).", d.driver.as_deref().unwrap_or("")));
            continue;
        }
        let dev = format!("/sys/bus/pci/devices/{a}");
        let cur = f
            .value(&format!("{dev}/driver_override"))
            .unwrap_or("(null)");
        c.values
            .push(value(format!("{dev}/driver_override"), cur, "vfio-pci"));
        if let Some(drv) = &d.driver {
            c.values.push(action(
                format!("/sys/bus/pci/drivers/{drv}/unbind"),
                a.clone(),
            ));
        }
        c.values
            .push(action(paths::SYS_BUS_PCI_DRIVERS_PROBE, a.clone()));
        // Undo: the override cleared (restored), then off vfio-pci and probed
        // again, so the host driver takes it back.
        c.undo_values
            .push(action("/sys/bus/pci/drivers/vfio-pci/unbind", a.clone()));
        c.undo_values
            .push(action(paths::SYS_BUS_PCI_DRIVERS_PROBE, a.clone()));
        c.verify.push(Verify::DriverIs {
            device: a.clone(),
            driver: "vfio-pci".into(),
        });
        names.push(a.clone());
    }
    if names.is_empty() {
        return None;
    }
    // The driver must be there to take them: driver_override and
    // drivers_probe bind nothing while vfio-pci is not loaded.
    c.prepare.push(CommandStep::new(
        Cmd::Modprobe {
            module: Module::VfioPci,
        },
        "loads vfio-pci, so that the probe hands the devices to it",
    ));
    c.title = format!("Bind {} to vfio-pci now", names.join(", "));
    c.fixes.push("device.bound".into());
    Some(c)
}
