//! irqbalance told to keep off the VM's CPUs (it would undo the affinity).

use super::{ChangeId, Kind, change};
use crate::parse::cpulist::format_cpulist;
use crate::tuning::command::{Cmd, Unit, UnitVerb};
use crate::tuning::facts::TuneFacts;
use crate::tuning::model::{Change, CommandStep, Effect, FileChange};
use crate::tuning::paths;

/// Plans the `irqbalance` kind (its line in `kinds::planner`).
pub(crate) fn plan_irqbalance(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    out.changes.extend(irqbalance(cx.facts, cx.vm, cx.systemd));
    Ok(())
}

/// irqbalance told to keep off the VM's CPUs (it would undo the affinity).
pub fn irqbalance(f: &TuneFacts, vm_cpus: &[u32], systemd: bool) -> Option<Change> {
    if vm_cpus.is_empty() || !f.has_tool("irqbalance") {
        return None;
    }
    let path = [
        paths::ETC_DEFAULT_IRQBALANCE,
        paths::ETC_SYSCONFIG_IRQBALANCE,
    ]
    .into_iter()
    .find(|p| f.file(p).is_some())
    .unwrap_or(paths::ETC_DEFAULT_IRQBALANCE);
    let before = f.file(path).map(str::to_string);
    let line = format!("IRQBALANCE_BANNED_CPULIST={}", format_cpulist(vm_cpus));
    let cur = before.clone().unwrap_or_default();
    if cur.lines().any(|l| l.trim() == line) {
        return None;
    }
    let mut after: String = cur
        .lines()
        .filter(|l| !l.trim_start().starts_with("IRQBALANCE_BANNED_CPULIST="))
        .map(|l| format!("{l}\n"))
        .collect();
    after.push_str("# vfio-assistant: keep device interrupts off the VM's CPUs\n");
    after.push_str(&line);
    after.push('\n');
    let mut c = change(
        ChangeId::of(Kind::Irqbalance),
        format!("irqbalance keeps off CPUs {}", format_cpulist(vm_cpus)),
        "irqbalance moves interrupts around every few seconds and would put them back on the VM's CPUs; its banned list keeps it off them. (Setting it turns off its own automatic banning of isolcpus/nohz_full CPUs, so the VM's CPUs are named here.)",
        Effect::Now,
    );
    c.files.push(FileChange {
        path: path.into(),
        before,
        after: Some(after),
    });
    if systemd {
        c.commands.push(CommandStep::new(
            Cmd::Systemctl {
                verb: UnitVerb::TryRestart,
                unit: Unit::Irqbalance,
            },
            "irqbalance reads the list at start",
        ));
        c.undo_commands = c.commands.clone();
    }
    Some(c)
}
