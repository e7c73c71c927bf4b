//! Device interrupts off the VM's CPUs, onto the host's.

use super::{ChangeId, Kind, change, value};
use crate::parse::cpulist::{format_cpulist, parse_cpulist};
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, Effect};

/// Plans the `irq-affinity` kind (its line in `kinds::planner`).
pub(crate) fn plan_irq_affinity(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    out.changes.extend(irq_affinity(cx.facts, cx.vm, cx.hk));
    Ok(())
}

/// IRQs allowed on the VM's CPUs moved to the housekeeping CPUs.
pub fn irq_affinity(f: &TuneFacts, vm_cpus: &[u32], housekeeping: &[u32]) -> Option<Change> {
    if vm_cpus.is_empty() || housekeeping.is_empty() {
        return None;
    }
    let hk = format_cpulist(housekeeping);
    let mut c = change(
        ChangeId::of(Kind::IrqAffinity),
        format!(
            "Device interrupts off the VM's CPUs {} (onto {hk})",
            format_cpulist(vm_cpus)
        ),
        "Every interrupt handled on a CPU that runs a vCPU stops the guest for the handler's time: audio crackle and frame-time spikes.",
        Effect::Now,
    );
    for (irq, aff) in &f.irq_affinity {
        let Ok(cpus) = parse_cpulist(aff) else {
            continue;
        };
        if cpus.iter().any(|c| vm_cpus.contains(c)) && *aff != hk {
            let mut v = value(format!("/proc/irq/{irq}/smp_affinity_list"), aff, &hk);
            v.may_fail = true;
            c.values.push(v);
        }
    }
    if c.values.is_empty() {
        return None;
    }
    c.notes.push("Some interrupts cannot be moved (per-CPU timers, managed IRQs): their writes fail and are recorded, not undone.".into());
    c.fixes.push("cpu.irq_affinity".into());
    Some(c)
}
