//! The devices a request passes through: each asked device's IOMMU
//! group (its passthrough set), and the VM's card as a hook hands it over.
//! Below the planners, which all read it (plan.rs, the GPU hooks).

use super::model::Request;
use super::plan_error::PlanError;
use crate::host::HostSnapshot;
use crate::host::iommu::VerdictKind;

/// The VM's card as a hook hands it over: the GPU first, then the rest of
/// its passthrough set (its audio function); empty without `--gpu`.
pub fn card_functions(snap: &HostSnapshot, req: &Request) -> Result<Vec<String>, PlanError> {
    let Some(g) = req.gpus.first() else {
        return Ok(Vec::new());
    };
    let mut set = passthrough_set(
        snap,
        &Request {
            gpus: vec![*g],
            ..Request::default()
        },
    )?;
    let gpu = g.to_string();
    set.retain(|a| *a != gpu);
    set.insert(0, gpu);
    Ok(set)
}

/// The passthrough set of every requested device, each address once.
pub fn passthrough_set(snap: &HostSnapshot, req: &Request) -> Result<Vec<String>, PlanError> {
    let mut set: Vec<String> = Vec::new();
    for a in req.gpus.iter().chain(&req.devices) {
        let addr = a.to_string();
        let e = snap
            .device(&addr)
            .ok_or_else(|| PlanError::NoDevice(addr.clone()))?;
        if e.passthrough.verdict == VerdictKind::NotViable {
            return Err(PlanError::NotViable(addr, e.passthrough.reason.clone()));
        }
        for s in &e.passthrough.set {
            if !set.contains(s) {
                set.push(s.clone());
            }
        }
    }
    if let Some(why) = set
        .iter()
        .find_map(|a| crate::host::usb::holds_only_keyboard(&snap.system.usb, a))
    {
        return Err(PlanError::OnlyKeyboard(why));
    }
    Ok(set)
}
