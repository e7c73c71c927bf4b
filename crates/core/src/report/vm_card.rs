//! Which card is the VM's: one rule for the Overview's next step, `check`,
//! the Devices page and the New VM wizard's GPU step.
//!
//! * A discrete card before an integrated one: the iGPU is the weakest GPU
//!   in the box and the one whose passthrough rarely works (AMD's APU
//!   graphics lack a ROM and a reset; Intel's need GVT-g or SR-IOV), so it
//!   is never proposed for the VM while a discrete card exists, unless the
//!   user picks it. Integrated or discrete is told by evidence
//!   (`host::gpu_kind`), and the evidence is said.
//! * Several discrete cards: the user is asked which one is the VM's, the
//!   stronger first (its PCIe link, then its memory window), each with why.
//!   Among equals (two identical cards) the one the host does not show its
//!   screen on comes first.
//! * The host's screen on the card meant for the VM: the next step moves the
//!   screen (`report::screen_move`), not the card.

use crate::host::gpu_kind::{GpuClass, GpuKind, Strength, classify};
use crate::host::usage::{GpuOwner, gpu_owner};
use crate::host::{HostSnapshot, PciEntry};

/// A GPU a VM could take, with what it is and why it stands where it does.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub entry: &'a PciEntry,
    pub class: GpuClass,
    pub strength: Strength,
    /// The host shows its screen on it now, and why.
    pub host_screen: Option<&'static str>,
}

impl Candidate<'_> {
    pub fn address(&self) -> &str {
        &self.entry.device.address
    }
    pub fn name(&self) -> String {
        self.entry.device.display_name()
    }
    /// What it is and how strong, in words: "discrete: it has a PCIe link
    /// of its own (16 GT/s x16); PCIe 16 GT/s x16, a 16 GiB memory window".
    pub fn why(&self) -> String {
        let mut s = format!("{}: {}", self.class.kind.word(), self.class.because);
        let strength = self.strength.words(&self.entry.device);
        if !strength.is_empty() && self.class.kind == GpuKind::Discrete {
            s.push_str(&format!("; {strength}"));
        }
        if let Some(h) = self.host_screen {
            s.push_str(&format!("; the host's screen is on it now ({h})"));
        }
        s
    }
}

/// Whether the host shows its screen on the card at `address` now, and
/// why: the firmware's boot display, the boot framebuffer in its memory,
/// or no other GPU for it. What is, not whose the card is meant to be
/// (`gpu_owner`): a desktop's card often has the console until the screen
/// moves to the iGPU.
pub fn host_screen(snap: &HostSnapshot, address: &str) -> Option<&'static str> {
    let d = &snap.device(address)?.device;
    if d.boot_vga == Some(true) {
        return Some("the firmware shows the boot screen and the console on it (boot_vga)");
    }
    if !crate::host::usage::boot_framebuffers_in(snap, d).is_empty() {
        return Some("the boot framebuffer, the console, lies in its memory");
    }
    let slot = crate::host::pci::slot_of(address);
    let others = snap
        .gpus()
        .filter(|g| crate::host::pci::slot_of(&g.device.address) != slot)
        .count();
    (others == 0).then_some("it is the host's only GPU")
}

fn cpu_vendor(snap: &HostSnapshot) -> Option<&str> {
    snap.cpu.vendor.as_deref()
}

/// Every GPU's class, for the pages that list them.
pub fn class_of(snap: &HostSnapshot, e: &PciEntry) -> GpuClass {
    classify(cpu_vendor(snap), &e.device)
}

/// The GPUs a VM could take, in the order to offer them: discrete cards
/// first (stronger first; among equals the one without the host's screen,
/// then PCI order), then integrated ones. Virtual display devices never.
/// Functions of a card other than its first display function are left out.
pub fn candidates(snap: &HostSnapshot) -> Vec<Candidate<'_>> {
    let mut out: Vec<Candidate> = snap
        .gpus()
        .map(|e| Candidate {
            entry: e,
            class: class_of(snap, e),
            strength: Strength::of(&e.device),
            host_screen: host_screen(snap, &e.device.address),
        })
        .filter(|c| c.class.kind != GpuKind::Virtual)
        .collect();
    out.sort_by(|a, b| {
        a.class
            .kind
            .cmp(&b.class.kind)
            .then_with(|| a.strength.cmp_desc(&b.strength))
            .then_with(|| a.host_screen.is_some().cmp(&b.host_screen.is_some()))
            .then_with(|| a.address().cmp(b.address()))
    });
    out
}

/// The card the VM gets, as far as the host and the user say.
#[derive(Debug, Clone)]
pub enum Pick<'a> {
    /// No GPU a VM could take.
    NoGpu,
    /// This card: the user's choice, a card already on vfio-pci, the only
    /// discrete card, or else the only GPU there is.
    Card { card: Candidate<'a>, chosen: bool },
    /// Several discrete cards and none chosen: ask, in this order.
    Ask(Vec<Candidate<'a>>),
}

/// The card for the VM; `chosen` is the user's pick (the Overview's or the
/// wizard's choice, `check --gpu`), ignored when the host has no such GPU.
pub fn pick<'a>(snap: &'a HostSnapshot, chosen: Option<&str>) -> Pick<'a> {
    let all = candidates(snap);
    let full = chosen.map(crate::host::pci::full_address);
    if let Some(c) = full
        .as_deref()
        .and_then(|f| all.iter().find(|c| c.address() == f))
    {
        return Pick::Card {
            card: c.clone(),
            chosen: true,
        };
    }
    if let Some(c) = all
        .iter()
        .find(|c| gpu_owner(snap, c.address()) == GpuOwner::Vm)
    {
        return Pick::Card {
            card: c.clone(),
            chosen: false,
        };
    }
    let discrete: Vec<Candidate> = all
        .iter()
        .filter(|c| c.class.kind == GpuKind::Discrete)
        .cloned()
        .collect();
    match discrete.len() {
        0 => all
            .into_iter()
            .next()
            .map_or(Pick::NoGpu, |card| Pick::Card {
                card,
                chosen: false,
            }),
        1 => discrete
            .into_iter()
            .next()
            .map_or(Pick::NoGpu, |card| Pick::Card {
                card,
                chosen: false,
            }),
        _ => Pick::Ask(discrete),
    }
}

/// The GPU the host's screen could move to when `card` goes to the VM: an
/// integrated one first, else another card (the weakest), never one of
/// `card`'s functions or a card already the VM's.
pub fn screen_target<'a>(snap: &'a HostSnapshot, card: &str) -> Option<&'a PciEntry> {
    let slot = crate::host::pci::slot_of(card);
    let mut others: Vec<(GpuKind, Strength, &PciEntry)> = snap
        .gpus()
        .filter(|e| crate::host::pci::slot_of(&e.device.address) != slot)
        .filter(|e| gpu_owner(snap, &e.device.address) != GpuOwner::Vm)
        .map(|e| (class_of(snap, e).kind, Strength::of(&e.device), e))
        .collect();
    // Integrated, then virtual (a VM's own screen), then the weakest card.
    let rank = |k: GpuKind| match k {
        GpuKind::Integrated => 0,
        GpuKind::Virtual => 1,
        GpuKind::Discrete => 2,
    };
    others.sort_by(|a, b| {
        rank(a.0)
            .cmp(&rank(b.0))
            .then_with(|| b.1.cmp_desc(&a.1))
            .then_with(|| a.2.device.address.cmp(&b.2.device.address))
    });
    others.first().map(|(_, _, e)| *e)
}
