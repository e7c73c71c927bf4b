//! SR-IOV virtual functions on a physical function, one change per card.

use super::{ChangeId, PlanError, action, change};
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, Effect, ValueChange, Verify};

/// Plans the `sriov` kind (its line in `kinds::planner`).
pub(crate) fn plan_sriov(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    for (pf, n) in &cx.req.sriov {
        let addr = pf.to_string();
        if cx.snap.device(&addr).is_none() {
            return Err(PlanError::NoDevice(addr));
        }
        out.changes.extend(sriov(cx.facts, &addr, *n)?);
    }
    Ok(())
}

/// SR-IOV: `n` virtual functions on `pf` (through 0 when it has others).
pub fn sriov(f: &TuneFacts, pf: &str, n: u32) -> Result<Option<Change>, PlanError> {
    let dev = format!("/sys/bus/pci/devices/{pf}");
    let total: u32 = f
        .value(&format!("{dev}/sriov_totalvfs"))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| PlanError::Sriov(format!("{pf} has no SR-IOV (no sriov_totalvfs)")))?;
    if n > total {
        return Err(PlanError::Sriov(format!(
            "{pf} offers at most {total} virtual functions, {n} asked"
        )));
    }
    let path = format!("{dev}/sriov_numvfs");
    let cur: u32 = f.value(&path).and_then(|v| v.parse().ok()).unwrap_or(0);
    if cur == n {
        return Ok(None);
    }
    let mut c = change(
        ChangeId::sriov(pf),
        format!("{n} SR-IOV virtual functions on {pf} (now {cur})"),
        "Each virtual function is a slice of the card with its own PCI address, which a VM can get whole: the NIC's hardware without a host bridge in the path.",
        Effect::Now,
    );
    // The kernel takes a new count only from 0: there and back through 0,
    // as actions (a plain restore of the old count would be refused).
    if cur != 0 && n != 0 {
        c.values.push(action(path.clone(), "0"));
    }
    c.values.push(ValueChange {
        before: cur.to_string(),
        ..action(path.clone(), n.to_string())
    });
    if n != 0 {
        c.undo_values.push(action(path.clone(), "0"));
    }
    if cur != 0 {
        c.undo_values.push(action(path.clone(), cur.to_string()));
    }
    c.verify.push(Verify::ValueIs {
        path,
        value: n.to_string(),
    });
    Ok(Some(c))
}
