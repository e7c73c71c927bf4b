//! The host's tuning transactions as findings: one interrupted by a power
//! cut or a killed process (its before-state is in the journal, so one
//! action restores the host), one still running (the app that started it
//! was closed: it is waited for, never restored), one whose entry systemd-boot booted once and
//! that is not kept yet (the next reboot goes back to the old setup), and a
//! rolled-back or undone one whose boot files still hold what it added. The Overview makes the first of these
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
        } else if s.standing == Standing::Running {
            out.push(
                Finding::new(
                    "tune.running",
                    format!("A host tuning is still running ({})", s.id),
                    Status::Warn,
                )
                .evidence(format!("{journal}/{}", s.id), s.detail.clone().unwrap_or_default())
                .why("The app that started it was closed (or another window started it) while the helper changed the host; the helper goes on to its end by itself, and its journal says how it ended.")
                .fix("Wait for it to end, then look again: the Tuning page (or `vfio-assistant tune status`) says how it ended — applied, or rolled back if a step failed. Nothing needs restoring, and nothing should be applied or undone before it ends."),
            );
        } else if let (Some(words), Some(_)) = (&s.tried_once, &s.keep) {
            out.push(
                Finding::new(
                    "tune.tried_once",
                    format!("The tuned boot entry is booted once only ({})", s.id),
                    Status::Warn,
                )
                .evidence(format!("{journal}/{}", s.id), words.clone())
                .why("The boot loader (GRUB or systemd-boot) started the tuned entry once, as a try: it came up, but the next reboot starts the old default again, without the kernel parameters and vfio-pci.")
                .fix("Keep it as the default: the parameters go where the default boot entries (or image) get them, as one more transaction you can undo.")
                .action(
                    Action::Tune {
                        change: "cmdline".into(),
                    },
                    "sudo vfio-assistant tune keep",
                ),
            );
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
