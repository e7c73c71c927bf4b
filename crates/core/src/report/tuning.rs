//! The host's tuning transactions as findings: one interrupted by a power
//! cut or a killed process (its before-state is in the journal, so one
//! action restores the host), and a rolled-back or undone one whose boot
//! files still hold what it added. The Overview makes the first of these
//! its next step, with the button that restores the host.

use crate::finding::{Action, Finding, Status};
use crate::sysroot::{HostPath, HostRoot};
use crate::tuning::apply::Env;
use crate::tuning::status::{Standing, status};

pub fn tuning_findings(root: &HostRoot) -> Vec<Finding> {
    let env = Env::new(root.clone(), None, false);
    // As the host spells it, not where a captured root sits.
    let journal = HostPath::var("lib/vfio-assistant/journal").to_string();
    let mut out = Vec::new();
    for s in status(&env) {
        if s.standing == Standing::Interrupted {
            let mut f = Finding::new(
                "tune.interrupted",
                format!("A host tuning was interrupted ({})", s.id),
                Status::Fail,
            )
            .evidence(format!("{journal}/{}", s.id), s.detail.clone().unwrap_or_default())
            .why("The host lost power or the tool was stopped in the middle of a tuning. The journal holds everything as it was before, so the host can be put back in one step; until then it may be half tuned.")
            .fix("Restore the host: every file, value and boot file as it was before this tuning. Then apply again if you want it.")
            .action(
                Action::RestoreHost {
                    transaction: s.id.clone(),
                },
                "sudo vfio-assistant tune undo --last",
            );
            let done = s.completed.min(s.changes.len());
            let (before, after) = s.changes.split_at(done);
            if !before.is_empty() {
                f = f.evidence(
                    "changes done",
                    crate::tuning::kinds::ChangeId::joined(before),
                );
            }
            if let Some((now, rest)) = after.split_first() {
                f = f.evidence("interrupted in", now.clone());
                if !rest.is_empty() {
                    f = f.evidence("not started", crate::tuning::kinds::ChangeId::joined(rest));
                }
            }
            out.push(f);
        } else if !s.leftovers.is_empty() {
            out.push(
                Finding::new(
                    "tune.leftovers",
                    format!("Boot files still hold a tuning that was taken back ({})", s.id),
                    Status::Warn,
                )
                .evidence(format!("{journal}/{}", s.id), s.leftovers.join("; "))
                .why("The tuning was rolled back or undone, but a generated boot file (grub.cfg, an initramfs) still holds what it added: the next boot would come up tuned.")
                .fix("Regenerate the boot files from the restored configuration (update-grub, update-initramfs or dracut), or apply and undo again."),
            );
        }
    }
    out
}
