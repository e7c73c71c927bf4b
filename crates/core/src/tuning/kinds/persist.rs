//! THP, KSM and hugepages kept as set after a reboot (tmpfiles.d): planned
//! last, from the runtime changes before it.

use super::{ChangeId, Kind};
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, Effect, FileChange};
use crate::tuning::paths;

/// Plans the `persist` kind (its line in `kinds::planner`).
pub(crate) fn plan_persist(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    let kept = persist(&out.changes, cx.facts);
    out.changes.extend(kept);
    Ok(())
}

/// Runtime values kept after a reboot, through tmpfiles.d: what our file
/// already keeps, with this plan's new values added (a later plan never
/// drops what an earlier one kept).
pub fn persist(changes: &[Change], f: &TuneFacts) -> Option<Change> {
    const PATH: &str = paths::ETC_TMPFILES_D_VFIO_ASSISTANT_CONF;
    let mut kept: Vec<(String, String)> = f
        .file(PATH)
        .unwrap_or("")
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "w").then_some(())?;
            let path = w.next()?.to_string();
            let value = w.nth(4)?.to_string();
            Some((path, value))
        })
        .collect();
    for c in changes
        .iter()
        .filter(|c| matches!(c.id.kind, Kind::Thp | Kind::Ksm | Kind::Hugepages))
    {
        for v in c.values.iter().filter(|v| !v.action) {
            match kept.iter_mut().find(|(p, _)| *p == v.path) {
                Some(k) => k.1 = v.after.clone(),
                None => kept.push((v.path.clone(), v.after.clone())),
            }
        }
    }
    let lines: Vec<String> = kept
        .iter()
        .map(|(p, v)| format!("w {p} - - - - {v}"))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let after = format!(
        "# Written by vfio-assistant (tune): runtime values kept across reboots.\n{}\n",
        lines.join("\n")
    );
    let before = f.file(PATH).map(str::to_string);
    if before.as_deref() == Some(after.as_str()) {
        return None;
    }
    Some(Change {
        id: ChangeId::of(Kind::Persist),
        title: "Keep THP, KSM and hugepages as set after a reboot (tmpfiles.d)".into(),
        why: "sysfs values are lost at reboot; systemd-tmpfiles writes them again early at every boot.".into(),
        evidence: Vec::new(),
        fixes: Vec::new(),
        effect: Effect::AfterReboot,
        files: vec![FileChange { path: PATH.into(), before, after: Some(after) }],
        values: Vec::new(),
        commands: Vec::new(),
        undo_values: Vec::new(),
        undo_commands: Vec::new(),
        verify: Vec::new(),
        notes: Vec::new(),
        ..Change::default()
    })
}
