//! The CPU governor `performance` on the VM's CPUs, and EPP (the energy/
//! performance preference) beside it: two kinds planned together.

use super::{ChangeId, Kind, change, value};
use crate::parse::cpulist::format_cpulist;
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, Effect, Verify};

/// Plans the `governor` kind (its line in `kinds::planner`).
pub(crate) fn plan_governor(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    out.changes.extend(governor(cx.facts, cx.vm));
    Ok(())
}

/// `performance` on `cpus` (all CPUs when empty), and EPP where it is there.
pub fn governor(f: &TuneFacts, cpus: &[u32]) -> Vec<Change> {
    let mut out = Vec::new();
    let mut gov = change(
        ChangeId::of(Kind::Governor),
        String::new(),
        "The 'performance' governor keeps the VM's CPUs at full clock: a vCPU that wakes on a slowed-down core loses time ramping up, which shows as frame-time spikes.",
        Effect::Now,
    );
    let mut epp = change(
        ChangeId::of(Kind::Epp),
        String::new(),
        "The energy/performance preference asks the CPU itself to favour speed on these cores (intel_pstate/amd-pstate).",
        Effect::Now,
    );
    if !f.governors_available.is_empty()
        && !f.governors_available.iter().any(|g| g == "performance")
    {
        return out;
    }
    let mut changed: Vec<u32> = Vec::new();
    for (path, cur) in &f.values {
        let Some(rest) = path.strip_prefix("/sys/devices/system/cpu/cpu") else {
            continue;
        };
        let Some((n, file)) = rest.split_once("/cpufreq/") else {
            continue;
        };
        let Ok(n) = n.parse::<u32>() else { continue };
        if !cpus.is_empty() && !cpus.contains(&n) {
            continue;
        }
        match file {
            "scaling_governor" if cur != "performance" => {
                gov.values.push(value(path.clone(), cur, "performance"));
                gov.verify.push(Verify::ValueIs {
                    path: path.clone(),
                    value: "performance".into(),
                });
                changed.push(n);
            }
            "energy_performance_preference" if cur != "performance" => {
                epp.values.push(value(path.clone(), cur, "performance"));
            }
            _ => {}
        }
    }
    for daemon in ["power-profiles-daemon", "tuned", "tlp"] {
        if f.has_tool(daemon) {
            gov.notes.push(format!("{daemon} is installed and may set the governor back: give the governor one owner (switch its profile to performance, or stop it)."));
        }
    }
    if !gov.values.is_empty() {
        changed.sort_unstable();
        gov.title = format!(
            "CPU governor 'performance' on CPUs {}",
            format_cpulist(&changed)
        );
        gov.fixes.push("cpu.governor".into());
        out.push(gov);
    }
    if !epp.values.is_empty() {
        epp.title = "Energy/performance preference 'performance' on the same CPUs".into();
        epp.notes.push("With the performance governor and hardware P-states the kernel may refuse this (EBUSY): that is recorded, not a failure.".into());
        for v in &mut epp.values {
            v.may_fail = true;
        }
        out.push(epp);
    }
    out
}
