//! Hugepages for the VM's memory, on its NUMA node (memory compacted first).

use super::{ChangeId, Kind, action, change, ev, value};
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, Effect, Verify};
use crate::tuning::paths;

/// Plans the `hugepages` kind (its line in `kinds::planner`).
pub(crate) fn plan_hugepages(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    if let Some(mib) = cx.req.memory_mib
        && !cx.req.hugepages_1g
    {
        out.changes.extend(hugepages(cx.facts, mib, 2048, cx.node));
    }
    Ok(())
}

/// Enough hugepages of `size_kib` for `memory_mib`, on `node` when given.
pub fn hugepages(
    f: &TuneFacts,
    memory_mib: u64,
    size_kib: u64,
    node: Option<u32>,
) -> Option<Change> {
    let need = (memory_mib.saturating_mul(1024)).div_ceil(size_kib.max(1));
    let sys = format!("/sys/kernel/mm/hugepages/hugepages-{size_kib}kB");
    let free: u64 = f.value(&format!("{sys}/free_hugepages"))?.parse().ok()?;
    // The NUMA node's own pool where the kernel has one; else the system's.
    let node_pool = node.and_then(|n| {
        let p = format!(
            "/sys/devices/system/node/node{n}/hugepages/hugepages-{size_kib}kB/nr_hugepages"
        );
        let t: u64 = f.value(&p)?.parse().ok()?;
        Some((p, t, n))
    });
    let (path, total, node) = match node_pool {
        Some((p, t, n)) => (p, t, Some(n)),
        None => {
            let p = format!("{sys}/nr_hugepages");
            let t: u64 = f.value(&p)?.parse().ok()?;
            (p, t, None)
        }
    };
    // The pool must hold the host's own pages (what was there before this
    // tool reserved any: the journal knows) plus this VM's. Never from
    // free_hugepages alone: while the VM runs it uses its pages, and a
    // plan judged from what is free would reserve them all over again.
    let want = match f.hugepages_before_ours.get(&path) {
        Some(base) => base + need,
        None if free >= need || total >= need => return None,
        None => need + total.saturating_sub(free),
    };
    if total >= want {
        return None;
    }
    let size = if size_kib >= 1 << 20 {
        "1 GiB"
    } else {
        "2 MiB"
    };
    let mut c = change(
        ChangeId::of(Kind::Hugepages),
        format!(
            "{need} hugepages of {size} for {memory_mib} MiB of guest memory{}",
            node.map(|n| format!(" on NUMA node {n}"))
                .unwrap_or_default()
        ),
        "Guest memory on hugepages means fewer TLB misses and memory that is there when the VM starts; the kernel reserves them apart from normal memory. Memory is compacted first so whole pages can be found; the count is read back, since the kernel may give fewer.",
        Effect::Now,
    );
    c.evidence
        .push(ev(&format!("{sys}/free_hugepages"), free.to_string()));
    let mut compact = action(paths::PROC_SYS_VM_COMPACT_MEMORY, "1");
    compact.may_fail = true;
    c.values.push(compact);
    c.values
        .push(value(path.clone(), &total.to_string(), &want.to_string()));
    c.verify.push(Verify::PagesAtLeast { path, pages: want });
    c.fixes.push("mem.hugepages".into());
    Some(c)
}
