//! The one next step: of everything the checks found, the thing to do now,
//! in a sentence, with the action that does it. The app's Overview opens
//! with it (a button); `check` prints it first. Firmware settings have no
//! button (nothing on the host can change them): the sentence says where.

use super::{screen_move, vm_card};
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
    /// Several cards could be the VM's: the user picks one (the Overview's
    /// buttons, `check --gpu ADDRESS`), the stronger first.
    ChooseGpu { cards: Vec<GpuOption> },
    /// By hand: the host's screen moves off `card` (the VM's) to `to` —
    /// the firmware's primary display, the cable, a reboot (`steps`).
    MoveScreen {
        card: String,
        to: String,
        steps: Vec<String>,
    },
}

/// A card offered as the VM's, with why it stands where it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuOption {
    pub address: String,
    pub name: String,
    pub why: String,
}

/// Another way that works now, beside the step (a button in the app, a
/// line in `check`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Alternative {
    pub label: String,
    pub action: NextAction,
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
    /// What else works now (single GPU while the screen has not moved yet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
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
    next_step_with(snap, findings, None)
}

/// The step to take now, with the user's pick of the VM's card (`chosen`:
/// the Overview's choice, `check --gpu`) where the host has several.
pub fn next_step_with(snap: &HostSnapshot, findings: &[Finding], chosen: Option<&str>) -> NextStep {
    // A tuning still running (the app that started it was closed while its
    // helper went on): waited for before anything else is done to the host.
    if let Some(f) = findings.iter().find(|f| f.id == "tune.running") {
        return from_finding(
            f,
            "The host is being changed right now: anything else done to it before that ends would race it.",
            None,
        );
    }
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
        .gpus_host_screen_last()
        .into_iter()
        .map(|e| (e, gpu_owner(snap, &e.device.address)))
        .collect();
    let vm_cards: Vec<&PciEntry> = owners
        .iter()
        .filter(|(_, o)| *o == GpuOwner::Vm)
        .map(|(e, _)| *e)
        .collect();
    if vm_cards.is_empty()
        && let Some(step) = card_for_the_vm(snap, findings, chosen)
    {
        return step;
    }
    // What is said of the host's own card, or of a GPU that is not the
    // VM's (an iGPU beside the card), is not what to do next: the host
    // keeps it as it is.
    let picked: Option<String> = match vm_cards.is_empty().then(|| vm_card::pick(snap, chosen)) {
        Some(vm_card::Pick::Card { card, .. }) => Some(card.address().to_string()),
        _ => None,
    };
    let slot = crate::host::pci::slot_of;
    let ours = |d: &str| {
        vm_cards.iter().any(|c| slot(&c.device.address) == slot(d))
            || picked.as_deref().is_some_and(|p| slot(p) == slot(d))
    };
    let hosts = |d: &str| {
        owners.iter().any(|(e, o)| {
            slot(&e.device.address) == slot(d) && (matches!(o, GpuOwner::Host(_)) || !ours(d))
        })
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
    let picked_name = picked
        .as_deref()
        .and_then(|p| snap.device(p))
        .map(|e| e.device.display_name());
    // Checks that could not look are not a clear way: say how many.
    let unknown = findings
        .iter()
        .filter(|f| f.status == Status::Unknown)
        .count();
    let clear = match unknown {
        0 => "nothing on the host stands in the way".to_string(),
        1 => "nothing found on the host stands in the way, but 1 check could not look (it shows as unknown)".to_string(),
        n => format!("nothing found on the host stands in the way, but {n} checks could not look (they show as unknown)"),
    };
    let clear_cap = {
        let mut c = clear.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    };
    NextStep {
        sentence: if let (true, Some(name)) = (vm_cards.is_empty(), &picked_name) {
            format!("Create the VM with the {name}")
        } else if vm_cards.is_empty() {
            "Create the VM".into()
        } else {
            format!("Create the VM with the {}", names(&vm_cards))
        },
        why: if let Some(ready) = on_vfio {
            format!(
                "{ready}, and {clear}: the New VM page writes a tuned domain with it and checks that it starts."
            )
        } else if gpus == 0 {
            format!(
                "{clear_cap}. There is no GPU to pass through yet: the VM can be made now and the card added later."
            )
        } else {
            format!(
                "{clear_cap}: the New VM page writes a tuned domain for it and checks that it starts."
            )
        },
        action: NextAction::NewVm,
        finding: None,
        alternatives: Vec::new(),
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

/// While no card is the VM's: which one is (`vm_card::pick`) and what
/// stands between it and the VM — the user's choice among several cards,
/// the host's screen on it (moved to another GPU first; single GPU works
/// now), or its host driver (bound to vfio-pci). Where the host's only GPU
/// is all there is: how the host keeps a screen (single-GPU passthrough),
/// never binding it at boot.
fn card_for_the_vm(
    snap: &HostSnapshot,
    findings: &[Finding],
    chosen: Option<&str>,
) -> Option<NextStep> {
    let card = match vm_card::pick(snap, chosen) {
        vm_card::Pick::NoGpu => return None,
        vm_card::Pick::Ask(cards) => return Some(ask(&cards)),
        vm_card::Pick::Card { card, .. } => card,
    };
    let address = card.address().to_string();
    let name = card.name();
    if card.host_screen.is_some() {
        if let Some(to) = vm_card::screen_target(snap, &address) {
            return Some(move_screen(snap, &card, to));
        }
        // The host's only GPU: how it keeps a screen, and the CPU's own
        // graphics where the firmware turned them off.
        let only = findings.iter().find(|x| {
            x.id == "device.host_display"
                && x.status == Status::Warn
                && x.device.as_deref() == Some(address.as_str())
        })?;
        let off = screen_move::igpu_switched_off(snap);
        return Some(NextStep {
            sentence: match &off {
                Some(_) => format!(
                    "{}: turn on the CPU's integrated graphics for the host",
                    only.title
                ),
                None => format!(
                    "{}: {}",
                    only.title,
                    only.fix
                        .as_deref()
                        .unwrap_or("give the host another GPU first")
                ),
            },
            why: match off {
                Some(off) => format!(
                    "{off} Until then single-GPU passthrough lends the {name} to the VM only while the VM runs."
                ),
                None => format!(
                    "{} The host keeps it on its own driver; single-GPU passthrough lends it to the VM only while the VM runs.",
                    only.why
                ),
            },
            action: NextAction::ByHand,
            finding: Some(only.id.clone()),
            alternatives: single_gpu_now(&address),
        });
    }
    // A card on its host driver: the one thing between the host and a VM.
    let f = findings.iter().find(|f| {
        f.id == "device.bound"
            && matches!(f.status, Status::Fail | Status::Warn)
            && f.device.as_deref() == Some(address.as_str())
    })?;
    Some(NextStep {
        sentence: format!("Bind the {name} to vfio-pci"),
        why: format!(
            "{}. The VM can only take a card that no host driver holds; vfio-pci at boot keeps it free. Why this card: {}.",
            f.title,
            card.why()
        ),
        action: NextAction::Tuning {
            change: crate::tuning::kinds::Kind::VfioBoot,
            device: Some(address),
        },
        finding: Some(f.id.clone()),
        alternatives: Vec::new(),
    })
}

/// Several discrete cards and no choice yet: which is the VM's?
fn ask(cards: &[vm_card::Candidate]) -> NextStep {
    let names: Vec<String> = cards
        .iter()
        .map(|c| format!("the {} at {}", c.name(), short(c.address())))
        .collect();
    NextStep {
        sentence: format!("Choose the VM's card: {}", names.join(" or ")),
        why: format!(
            "This host has {} graphics cards; one goes to the VM and the host keeps {}. {}: {}.",
            cards.len(),
            if cards.len() == 2 {
                "the other"
            } else {
                "the others"
            },
            if cards.windows(2).all(|w| w[0].strength == w[1].strength) {
                "Neither shows as stronger (the PCIe link and memory window sysfs gives), so the one without the host's screen comes first"
            } else {
                "The stronger comes first"
            },
            cards
                .iter()
                .map(|c| format!("{} — {}", short(c.address()), c.why()))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        action: NextAction::ChooseGpu {
            cards: cards
                .iter()
                .map(|c| GpuOption {
                    address: c.address().to_string(),
                    name: c.name(),
                    why: c.why(),
                })
                .collect(),
        },
        finding: None,
        alternatives: Vec::new(),
    }
}

/// The VM's card shows the host's screen and another GPU could: move the
/// screen first; single GPU works now.
fn move_screen(snap: &HostSnapshot, card: &vm_card::Candidate, to: &PciEntry) -> NextStep {
    let steps = screen_move::steps(snap, &to.device.address);
    NextStep {
        sentence: format!(
            "Move the host's screen to the {} so the {} can go to the VM",
            to.device.display_name(),
            card.name()
        ),
        why: format!(
            "The {} is the card for the VM ({}), but the host shows its screen on it. {}",
            card.name(),
            card.why(),
            steps.join(" ")
        ),
        action: NextAction::MoveScreen {
            card: card.address().to_string(),
            to: to.device.address.clone(),
            steps,
        },
        finding: None,
        alternatives: single_gpu_now(card.address()),
    }
}

/// What works before the screen moves: single-GPU passthrough of the card.
fn single_gpu_now(card: &str) -> Vec<Alternative> {
    vec![Alternative {
        label: "Or now: single GPU — the desktop stops while the VM runs and comes back after"
            .into(),
        action: NextAction::Tuning {
            change: crate::tuning::kinds::Kind::SingleGpuHook,
            device: Some(card.to_string()),
        },
    }]
}

fn short(address: &str) -> &str {
    address.strip_prefix("0000:").unwrap_or(address)
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
        alternatives: Vec::new(),
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

    /// Which card and what stands in its way is told from the host's
    /// tree: tests/it/next_step_gpu.rs and next_step_desktops.rs. Here, a
    /// host with nothing in the way is told to create the VM.
    #[test]
    fn nothing_in_the_way_creates_the_vm() {
        let ok = Finding::new("device.bound", "free", Status::Pass);
        assert_eq!(next_step(&snap(), &[ok]).action, NextAction::NewVm);
    }
}
