//! Transparent hugepages to `madvise`.

use super::{ChangeId, Kind, change, ev, value};
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, Effect, Verify};
use crate::tuning::paths;

/// Plans the `thp` kind (its line in `kinds::planner`).
pub(crate) fn plan_thp(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    out.changes.extend(thp(cx.facts));
    Ok(())
}

/// Transparent hugepages to `madvise` (from `always`).
pub fn thp(f: &TuneFacts) -> Option<Change> {
    let path = paths::SYS_KERNEL_MM_TRANSPARENT_HUGEPAGE_ENABLED;
    let cur = f.value(path)?;
    let now = bracketed(cur);
    if now != "always" {
        return None;
    }
    let mut c = change(
        ChangeId::of(Kind::Thp),
        "Transparent hugepages: always -> madvise".into(),
        "With 'always' the kernel compacts memory for every process and a VM with a passed-through device can sit paused for minutes at start while its memory is pinned; 'madvise' still gives QEMU hugepages (it asks for them) without the host paying.",
        Effect::Now,
    );
    c.evidence.push(ev(path, cur));
    c.values.push(value(path.into(), now, "madvise"));
    c.verify.push(Verify::ValueIs {
        path: path.into(),
        value: "madvise".into(),
    });
    c.fixes.push("mem.thp".into());
    Some(c)
}

/// The bracketed choice of a THP file (`always [madvise] never`).
fn bracketed(v: &str) -> &str {
    v.split_whitespace()
        .find(|w| w.starts_with('['))
        .map_or(v, |w| w.trim_matches(|c| c == '[' || c == ']'))
}
