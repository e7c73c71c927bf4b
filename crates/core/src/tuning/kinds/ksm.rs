//! KSM off, and ksmtuned stopped where it would turn it on again.

use super::{ChangeId, Kind, change, ev, value};
use crate::tuning::command::{Cmd, Unit, UnitVerb};
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, CommandStep, Effect, Verify};
use crate::tuning::paths;

/// Plans the `ksm` kind (its line in `kinds::planner`).
pub(crate) fn plan_ksm(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    out.changes.extend(ksm(cx.facts, cx.systemd));
    Ok(())
}

/// KSM off (and ksmtuned stopped when it is there).
pub fn ksm(f: &TuneFacts, systemd: bool) -> Option<Change> {
    let path = paths::SYS_KERNEL_MM_KSM_RUN;
    let cur = f.value(path)?;
    if cur.trim() == "0" {
        return None;
    }
    let mut c = change(
        ChangeId::of(Kind::Ksm),
        "KSM (kernel same-page merging) off".into(),
        "KSM scans guest memory for identical pages: CPU time on the host and latency in the guest, for memory a VM with a passed-through device cannot share anyway (it is pinned).",
        Effect::Now,
    );
    c.evidence.push(ev(path, cur));
    c.values.push(value(path.into(), cur.trim(), "0"));
    c.verify.push(Verify::ValueIs {
        path: path.into(),
        value: "0".into(),
    });
    if f.has_tool("ksmtuned") && systemd {
        c.commands.push(CommandStep::new(
            Cmd::Systemctl {
                verb: UnitVerb::Stop,
                unit: Unit::Ksmtuned,
            },
            "ksmtuned would turn KSM back on",
        ));
        c.undo_commands.push(CommandStep::new(
            Cmd::Systemctl {
                verb: UnitVerb::Start,
                unit: Unit::Ksmtuned,
            },
            "as it was",
        ));
    }
    c.fixes.push("mem.ksm".into());
    Some(c)
}
