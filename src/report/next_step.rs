//! The one next step: of everything the checks found, the thing to do now,
//! in a sentence, with the action that does it. The app's Overview opens
//! with it (a button); `check` prints it first. Firmware settings have no
//! button (nothing on the host can change them): the sentence says where.

use crate::checks::model::{Finding, Status};
use crate::host::HostSnapshot;
use crate::tuning::plan::change_fixing;
use serde::Serialize;

/// What carries the step out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NextAction {
    /// A change of the tuning engine (`tune plan --only CHANGE`, the Tuning
    /// page with it selected), for `device` when it is about one.
    Tuning {
        change: &'static str,
        device: Option<String>,
    },
    /// The New VM walk-through (`domain new`).
    NewVm,
    /// Put the host back from an interrupted tuning (`tune undo --last`,
    /// the Tuning page's Restore).
    RestoreHost { transaction: String },
    /// Nothing here can do it: a firmware setting, a cable, a slot.
    ByHand,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NextStep {
    /// What to do, in one sentence.
    pub sentence: String,
    /// Why this first.
    pub why: String,
    pub action: NextAction,
    /// The finding it comes from, when one.
    pub finding: Option<String>,
}

/// Failures that stop everything after them, in the order they must be met:
/// no VT-x/AMD-V, no KVM, no IOMMU in the firmware, none in the kernel.
const BLOCKERS: &[&str] = &[
    // A half-tuned host first: nothing after it can be judged until it is
    // back in a known state.
    "tune.interrupted",
    "cpu.virtualization",
    "kvm.device",
    "iommu.firmware",
    "iommu.enabled",
];

/// The step to take now on this host, given its findings.
pub fn next_step(snap: &HostSnapshot, findings: &[Finding]) -> NextStep {
    let failing = |f: &&Finding| f.status == Status::Fail;
    let blocker = BLOCKERS
        .iter()
        .find_map(|id| findings.iter().filter(failing).find(|f| f.id == *id));
    if let Some(f) = blocker {
        return from_finding(
            f,
            "Nothing can be passed through until this is done; the other checks wait on it.",
        );
    }
    // A GPU still on its host driver: the one thing between the host and a VM.
    // The GPU the host does not show its screen on comes first: on the most
    // common desktop (the iGPU or first card for the host, a second card
    // for the VM) the step must never name the card with the console.
    let unbound =
        |f: &&Finding| f.id == "device.bound" && matches!(f.status, Status::Fail | Status::Warn);
    let order = snap.gpus_for_vm();
    let rank = |f: &&Finding| {
        f.device
            .as_deref()
            .and_then(|d| order.iter().position(|g| g.device.address == d))
            .unwrap_or(usize::MAX)
    };
    if let Some(f) = findings.iter().filter(unbound).min_by_key(rank) {
        // Unless it is the host's only GPU: bound at boot, it would leave the
        // host without a screen. How the host keeps one comes first.
        if let Some(only) = findings.iter().find(|x| {
            x.id == "device.host_display" && x.status == Status::Warn && x.device == f.device
        }) {
            return NextStep {
                sentence: format!(
                    "{}: {}",
                    only.title,
                    only.fix
                        .as_deref()
                        .unwrap_or("give the host another GPU first")
                ),
                why: format!(
                    "{} Binding it to vfio-pci now would leave the host without a display at the next boot.",
                    only.why
                ),
                action: NextAction::ByHand,
                finding: Some(only.id.clone()),
            };
        }
        let name = f
            .device
            .as_deref()
            .and_then(|a| snap.device(a))
            .map_or_else(|| "GPU".to_string(), |e| e.device.display_name());
        return NextStep {
            sentence: format!("Bind the {name} to vfio-pci"),
            why: format!(
                "{}. The VM can only take a card that no host driver holds; vfio-pci at boot keeps it free.",
                f.title
            ),
            action: NextAction::Tuning {
                change: "vfio-boot",
                device: f.device.clone(),
            },
            finding: Some(f.id.clone()),
        };
    }
    if let Some(f) = findings.iter().find(failing) {
        return from_finding(
            f,
            "It is the first failing check: the others are fine or only advice.",
        );
    }
    if let Some(f) = findings
        .iter()
        .find(|f| f.status == Status::Warn && change_fixing(f).is_some())
    {
        return from_finding(
            f,
            "Nothing fails; this warning costs latency, and the Tuning page fixes it with a way back.",
        );
    }
    let gpus = snap.gpus().count();
    NextStep {
        sentence: "Create the VM".into(),
        why: if gpus == 0 {
            "Nothing on the host stands in the way. There is no GPU to pass through yet: the VM can be made now and the card added later.".into()
        } else {
            "Nothing on the host stands in the way: the New VM page writes a tuned domain for it and checks that it starts.".into()
        },
        action: NextAction::NewVm,
        finding: None,
    }
}

fn from_finding(f: &Finding, why_first: &str) -> NextStep {
    // "iommu.enabled" maps to the command line, which cannot help while the
    // firmware announces no IOMMU: its fix then says the firmware first.
    let action = match (&f.action, change_fixing(f)) {
        (Some(crate::finding::Action::RestoreHost { transaction }), _) => NextAction::RestoreHost {
            transaction: transaction.clone(),
        },
        (_, Some(change)) => NextAction::Tuning {
            change,
            device: f.device.clone(),
        },
        _ => NextAction::ByHand,
    };
    let sentence = match (&action, f.fix.as_deref()) {
        (NextAction::ByHand | NextAction::RestoreHost { .. }, Some(fix)) => {
            format!("{}: {fix}", f.title)
        }
        _ => format!("Fix first: {}", f.title),
    };
    NextStep {
        sentence,
        why: if f.why.is_empty() {
            why_first.to_string()
        } else {
            format!("{} {why_first}", f.why)
        },
        action,
        finding: Some(f.id.clone()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    /// A real host's tree (a Ryzen 5 1600 without PCI devices).
    fn snap() -> HostSnapshot {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/topology/ghw-amd-ryzen5-1600"
        );
        crate::host::scan(&crate::sysroot::HostRoot::at(p)).unwrap()
    }

    #[test]
    fn blockers_come_first_and_firmware_has_no_button() {
        let fw = Finding::new("iommu.firmware", "No IOMMU table", Status::Fail)
            .fix("Enable SVM Mode and IOMMU in the firmware setup.");
        let thp = Finding::new("mem.thp", "THP always", Status::Fail);
        let s = next_step(&snap(), &[thp.clone(), fw]);
        assert_eq!(s.action, NextAction::ByHand);
        assert!(
            s.sentence.contains("Enable SVM Mode and IOMMU"),
            "{}",
            s.sentence
        );
        let s = next_step(&snap(), &[thp]);
        assert_eq!(
            s.action,
            NextAction::Tuning {
                change: "thp",
                device: None
            }
        );
    }

    #[test]
    fn a_gpu_on_its_host_driver_is_bound_then_the_vm_is_created() {
        let mut bound = Finding::new("device.bound", "01:00.0: nouveau holds it", Status::Warn);
        bound.device = Some("0000:77:00.0".into());
        let s = next_step(&snap(), &[bound.clone()]);
        assert_eq!(s.sentence, "Bind the GPU to vfio-pci");
        assert_eq!(
            s.action,
            NextAction::Tuning {
                change: "vfio-boot",
                device: Some("0000:77:00.0".into())
            }
        );
        // The host's only GPU: how the host keeps a screen comes first.
        let mut only = Finding::new("device.host_display", "the only GPU", Status::Warn)
            .fix("Use the iGPU for the host.");
        only.device = Some("0000:77:00.0".into());
        let s = next_step(&snap(), &[bound, only]);
        assert_eq!(s.action, NextAction::ByHand);
        assert_eq!(s.sentence, "the only GPU: Use the iGPU for the host.");
        let ok = Finding::new("device.bound", "free", Status::Pass);
        assert_eq!(next_step(&snap(), &[ok]).action, NextAction::NewVm);
    }
}
