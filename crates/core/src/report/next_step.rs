//! The one next step: of everything the checks found, the thing to do now,
//! in a sentence, with the action that does it. The app's Overview opens
//! with it (a button); `check` prints it first. Firmware settings have no
//! button (nothing on the host can change them): the sentence says where.

use crate::checks::model::{Finding, Status};
use crate::host::usage::{GpuOwner, gpu_owner};
use crate::host::{HostSnapshot, PciEntry};
use crate::tuning::plan::change_fixing;
use serde::Serialize;

/// What carries the step out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NextAction {
    /// A change of the tuning engine (`tune plan --only CHANGE`, the Tuning
    /// page with it selected), for `device` when it is about one.
    Tuning {
        change: crate::tuning::kinds::Kind,
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
///
/// The GPUs first: whose each is (`gpu_owner`) decides which card the steps
/// speak of. While no card is the VM's, the step binds the one the host does
/// not show its screen on — never the host's own (the console, the only GPU
/// left), which on a host with one GPU leads to single-GPU passthrough
/// instead. Once a card is the VM's, no other is proposed: the steps after
/// it (the first failure, a warning the Tuning page fixes, the VM itself)
/// name that card, and findings about the host's own card are never the step.
pub fn next_step(snap: &HostSnapshot, findings: &[Finding]) -> NextStep {
    let failing = |f: &&Finding| f.status == Status::Fail;
    let blocker = BLOCKERS
        .iter()
        .find_map(|id| findings.iter().filter(failing).find(|f| f.id == *id));
    if let Some(f) = blocker {
        return from_finding(
            f,
            "Nothing can be passed through until this is done; the other checks wait on it.",
            None,
        );
    }
    // The GPUs in the order a VM should take them, with their owner.
    let owners: Vec<(&PciEntry, GpuOwner)> = snap
        .gpus_for_vm()
        .into_iter()
        .map(|e| (e, gpu_owner(snap, &e.device.address)))
        .collect();
    let vm_cards: Vec<&PciEntry> = owners
        .iter()
        .filter(|(_, o)| *o == GpuOwner::Vm)
        .map(|(e, _)| *e)
        .collect();
    if vm_cards.is_empty()
        && let Some(step) = card_for_the_vm(snap, findings, &owners)
    {
        return step;
    }
    // What is said of the host's own card is not what to do next: the host
    // keeps it as it is.
    let hosts = |d: &str| {
        owners
            .iter()
            .any(|(e, o)| e.device.address == d && matches!(o, GpuOwner::Host(_)))
    };
    let not_the_hosts = |f: &&Finding| f.device.as_deref().is_none_or(|d| !hosts(d));
    let on_vfio = ready(&vm_cards);
    // A failure about the VM's card comes before one about the host.
    let of_vm_card = |f: &&Finding| {
        let on_card = f.device.as_deref().is_some_and(|d| {
            vm_cards
                .iter()
                .any(|c| c.device.address == d || c.passthrough.set.iter().any(|m| m == d))
        });
        if on_card { 0 } else { 1 }
    };
    if let Some(f) = findings
        .iter()
        .filter(failing)
        .filter(not_the_hosts)
        .min_by_key(of_vm_card)
    {
        return from_finding(
            f,
            "It is the first failing check: the others are fine or only advice.",
            on_vfio.as_deref(),
        );
    }
    // This boot is the tuned one, tried once: keep it before the next
    // reboot takes it away (ahead of any advice).
    if let Some(f) = findings.iter().find(|f| f.id == "tune.tried_once") {
        return from_finding(
            f,
            "Keep it first: everything else here is judged on this boot, which the next reboot would not bring back.",
            on_vfio.as_deref(),
        );
    }
    // Binding another card is not the next step once one is the VM's.
    let another_card_to_bind =
        |f: &&Finding| !vm_cards.is_empty() && f.id == "device.bound" && of_vm_card(f) == 1;
    if let Some(f) = findings.iter().filter(not_the_hosts).find(|f| {
        f.status == Status::Warn && change_fixing(f).is_some() && !another_card_to_bind(f)
    }) {
        return from_finding(
            f,
            "Nothing fails; this warning costs latency, and the Tuning page fixes it with a way back.",
            on_vfio.as_deref(),
        );
    }
    let gpus = snap.gpus().count();
    NextStep {
        sentence: if vm_cards.is_empty() {
            "Create the VM".into()
        } else {
            format!("Create the VM with the {}", names(&vm_cards))
        },
        why: if let Some(ready) = on_vfio {
            format!(
                "{ready}, and nothing on the host stands in the way: the New VM page writes a tuned domain with it and checks that it starts."
            )
        } else if gpus == 0 {
            "Nothing on the host stands in the way. There is no GPU to pass through yet: the VM can be made now and the card added later.".into()
        } else {
            "Nothing on the host stands in the way: the New VM page writes a tuned domain for it and checks that it starts.".into()
        },
        action: NextAction::NewVm,
        finding: None,
    }
}

/// "the A" or "the A and the B": the cards' names.
fn names(cards: &[&PciEntry]) -> String {
    cards
        .iter()
        .map(|c| c.device.display_name())
        .collect::<Vec<_>>()
        .join(" and the ")
}

/// "The A is on vfio-pci for the VM", when a card is the VM's.
fn ready(cards: &[&PciEntry]) -> Option<String> {
    match cards {
        [] => None,
        [one] => Some(format!(
            "The {} is on vfio-pci for the VM",
            one.device.display_name()
        )),
        more => Some(format!("The {} are on vfio-pci for the VM", names(more))),
    }
}

/// While no card is the VM's: bind the one the host does not show its
/// screen on, or, where the host's only GPU is all there is, how the host
/// keeps a screen (single-GPU passthrough) — never binding it at boot.
fn card_for_the_vm(
    snap: &HostSnapshot,
    findings: &[Finding],
    owners: &[(&PciEntry, GpuOwner)],
) -> Option<NextStep> {
    let owner_of = |d: &str| {
        owners
            .iter()
            .find(|(e, _)| e.device.address == d)
            .map_or(GpuOwner::Free, |(_, o)| *o)
    };
    let rank = |f: &&Finding| {
        f.device
            .as_deref()
            .and_then(|d| owners.iter().position(|(g, _)| g.device.address == d))
            .unwrap_or(usize::MAX)
    };
    // A free GPU still on its host driver: the one thing between the host
    // and a VM. The host's own card is never one (its driver is right).
    let unbound = |f: &&Finding| {
        f.id == "device.bound"
            && matches!(f.status, Status::Fail | Status::Warn)
            && f.device
                .as_deref()
                .is_none_or(|d| owner_of(d) == GpuOwner::Free)
    };
    let candidate = findings.iter().filter(unbound).min_by_key(rank);
    // The host's only GPU (or the candidate, when it is all there is).
    let only = findings.iter().find(|x| {
        x.id == "device.host_display"
            && x.status == Status::Warn
            && match candidate {
                Some(f) => x.device == f.device,
                None => x
                    .device
                    .as_deref()
                    .is_some_and(|d| matches!(owner_of(d), GpuOwner::Host(_))),
            }
    });
    if let Some(only) = only {
        return Some(NextStep {
            sentence: format!(
                "{}: {}",
                only.title,
                only.fix
                    .as_deref()
                    .unwrap_or("give the host another GPU first")
            ),
            why: format!(
                "{} The host keeps it on its own driver; single-GPU passthrough lends it to the VM only while the VM runs.",
                only.why
            ),
            action: NextAction::ByHand,
            finding: Some(only.id.clone()),
        });
    }
    let f = candidate?;
    let name = f
        .device
        .as_deref()
        .and_then(|a| snap.device(a))
        .map_or_else(|| "GPU".to_string(), |e| e.device.display_name());
    Some(NextStep {
        sentence: format!("Bind the {name} to vfio-pci"),
        why: format!(
            "{}. The VM can only take a card that no host driver holds; vfio-pci at boot keeps it free.",
            f.title
        ),
        action: NextAction::Tuning {
            change: crate::tuning::kinds::Kind::VfioBoot,
            device: f.device.clone(),
        },
        finding: Some(f.id.clone()),
    })
}

/// The step a finding asks for; `lead`, when a card is the VM's already,
/// says so first.
fn from_finding(f: &Finding, why_first: &str, lead: Option<&str>) -> NextStep {
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
    let sentence = match (&action, f.fix.as_deref(), lead) {
        (NextAction::ByHand | NextAction::RestoreHost { .. }, Some(fix), None) => {
            format!("{}: {fix}", f.title)
        }
        (NextAction::ByHand | NextAction::RestoreHost { .. }, Some(fix), Some(lead)) => {
            format!("{lead}; first, {}: {fix}", f.title)
        }
        (_, _, None) => format!("Fix first: {}", f.title),
        (_, _, Some(lead)) => format!("{lead}; fix first: {}", f.title),
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
            "/../../tests/fixtures/topology/ghw-amd-ryzen5-1600"
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
                change: crate::tuning::kinds::Kind::Thp,
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
                change: crate::tuning::kinds::Kind::VfioBoot,
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
