//! The change kinds, closed, and the one table they are registered in.
//!
//! A kind is one file that owns what it plans (its `Planner`), the files,
//! values and programs it may touch (its `Spec`'s allowlist: `targets.rs`
//! checks every plan and every journal entry against the table), its
//! verification and its inverse (in the `Change` it plans), and the
//! findings it fixes (the app's Fix buttons). `KINDS` is the table: the
//! planner runs them in its order, which is the apply order (every prefix
//! boots: the initramfs first, the boot entry last of the boot changes,
//! then the runtime values). Adding a kind is its file and its one line in
//! `kinds!` (variant and `Spec` together): the compiler checks the rest.
//!
//! The runtime kinds live here (governor.rs, thp.rs, ksm.rs, hugepages.rs,
//! irq_affinity.rs, irqbalance.rs, vfio_bind.rs, sriov.rs, persist.rs); the
//! boot kinds are planned together in boot_plan.rs (over boot.rs and
//! vfio_boot.rs, the loader and initramfs back-ends), the hooks in hook.rs
//! and single_gpu.rs, the shared GPU in shared_gpu.rs and
//! shared_desktop.rs, the Looking Glass and sound kinds in play.rs.

mod governor;
mod hugepages;
mod irq_affinity;
mod irqbalance;
mod ksm;
mod persist;
mod sriov;
#[cfg(test)]
mod tests;
mod thp;
mod vfio_bind;

use super::command::Cmd;
use super::facts::TuneFacts;
use super::model::{Change, Effect, Manual, Request, ValueChange};
use crate::finding::Evidence;
use crate::host::HostSnapshot;
use serde::{Deserialize, Serialize};
use std::fmt;

pub use super::plan_error::PlanError;

/// What the planner of a kind reads: the host, its facts, the request, and
/// what the plan works out once for every kind.
pub struct Ctx<'a> {
    pub snap: &'a HostSnapshot,
    pub facts: &'a TuneFacts,
    pub req: &'a Request,
    /// The devices bound to vfio-pci at boot (single GPU: without its card).
    pub set: &'a [String],
    /// The VM's CPUs and the host's (housekeeping), and the VM's NUMA node.
    pub vm: &'a [u32],
    pub hk: &'a [u32],
    pub node: Option<u32>,
    /// The host runs systemd (units, AllowedCPUs, tmpfiles).
    pub systemd: bool,
    /// The kernel parameters the request needs (without the device IDs).
    pub tokens: &'a [String],
    /// The boot changes, planned together (the device IDs go on the command
    /// line or into modprobe.d depending on whether the loader's entry can
    /// be written): `boot_plan::plan_boot`.
    pub boot: &'a super::boot_plan::BootChanges,
}

/// What the planners have made so far (a later one may read it: persist).
#[derive(Debug, Default)]
pub struct Planned {
    pub changes: Vec<Change>,
    pub manual: Vec<Manual>,
    pub notes: Vec<String>,
}

/// A kind's planner: adds its changes (none when the host is already so).
pub type Planner = fn(&Ctx, &mut Planned) -> Result<(), PlanError>;

/// A kind's line in the table.
pub struct Spec {
    pub kind: Kind,
    /// As the journal spells it.
    pub name: &'static str,
    /// In plain words (the `--only` help).
    pub what: &'static str,
    /// Files it may write or restore (host paths; `*` is one component).
    pub files: &'static [&'static str],
    /// sysfs/procfs values it may write.
    pub values: &'static [&'static str],
    /// The programs it may run (its own `Cmd` variants).
    pub runs: fn(&Cmd) -> bool,
    /// The findings a click on its Fix button fixes.
    pub fixes: &'static [&'static str],
    /// None: planned by another kind's planner (EPP with the governor), or
    /// only ever a manual step (the IOMMU in the firmware).
    pub plan: Option<Planner>,
}

/// Runs nothing.
pub fn runs_nothing(_: &Cmd) -> bool {
    false
}

/// Restarts libvirt's daemon (what a hook or qemu.conf needs to be read).
pub fn restarts_libvirt(cmd: &Cmd) -> bool {
    use super::command::Unit;
    matches!(
        cmd,
        Cmd::Systemctl {
            unit: Unit::Libvirtd | Unit::Virtqemud,
            ..
        }
    )
}

/// The VM named in the request, checked (a hook is written for it).
pub fn vm_name(req: &Request) -> Result<&str, PlanError> {
    let name = req.vm.as_deref().map(str::trim).unwrap_or("");
    if !super::hook::valid_vm_name(name) {
        return Err(PlanError::Hook(format!(
            "the VM's hook: {name:?} is not a VM name it takes (letters, digits and ._+- only)"
        )));
    }
    Ok(name)
}

/// Declares `Kind` and its table at once: one line per kind, its variant
/// and its `Spec`, in plan (and apply) order. A kind without its line
/// cannot exist, and a line whose `Spec` names another kind does not
/// compile (the assertion below): registration is the compiler's.
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident => $spec:expr,)*) => {
        /// Every kind of change a tuning makes. Its name (`Spec::name`) is
        /// what the journal, `--only`, `tune --json` and the Tuning page say.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Kind {
            $($(#[$doc])* $variant,)*
        }

        impl Kind {
            /// Every kind, in plan (and apply) order.
            pub const ALL: &[Kind] = &[$(Kind::$variant,)*];
        }

        /// The table, in plan (and apply) order: `KINDS[k as usize]` is
        /// kind `k`'s line.
        pub const KINDS: &[Spec] = &[$($spec,)*];
    };
}

kinds! {
    VfioBoot => super::boot_plan::VFIO_BOOT,
    Cmdline => super::boot_plan::CMDLINE,
    IommuFirmware => super::boot_plan::IOMMU_FIRMWARE,
    VfioBind => vfio_bind::SPEC,
    Governor => governor::SPEC,
    Epp => governor::EPP,
    Thp => thp::SPEC,
    Ksm => ksm::SPEC,
    Hugepages => hugepages::SPEC,
    IrqAffinity => irq_affinity::SPEC,
    Irqbalance => irqbalance::SPEC,
    IsolationHook => super::hook::SPEC,
    SingleGpuHook => super::single_gpu::SPEC,
    SharedGpuDesktop => super::shared_desktop::SPEC,
    SharedGpuHook => super::shared_gpu::SPEC,
    LookingGlassShm => super::play::LOOKING_GLASS_SHM,
    Kvmfr => super::play::KVMFR,
    QemuConf => super::play::QEMU_CONF_SPEC,
    Sriov => sriov::SPEC,
    Persist => persist::SPEC,
}

// Each line's `Spec` is its own kind's, checked while compiling.
const _: () = {
    let mut i = 0;
    while i < KINDS.len() {
        assert!(
            KINDS[i].kind as usize == i,
            "a line of kinds! names another kind's Spec"
        );
        i += 1;
    }
};

impl Kind {
    pub fn spec(self) -> &'static Spec {
        &KINDS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A change's id: its kind, and for a kind done per device its device
/// (`sriov:0000:03:00.0`). Written as that text in the journal and JSON;
/// read back only if the kind is one of ours and the device a PCI address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct ChangeId {
    pub kind: Kind,
    pub device: Option<String>,
}

impl ChangeId {
    pub const fn of(kind: Kind) -> ChangeId {
        ChangeId { kind, device: None }
    }

    pub fn sriov(pf: &str) -> ChangeId {
        ChangeId {
            kind: Kind::Sriov,
            device: Some(pf.to_string()),
        }
    }

    /// Ids as a list in words (`thp, ksm`).
    pub fn joined(ids: &[ChangeId]) -> String {
        let names: Vec<String> = ids.iter().map(ToString::to_string).collect();
        names.join(", ")
    }

    /// Whether `--only` naming this takes `other` (`sriov` takes every
    /// `sriov:ADDR`).
    pub fn covers(&self, other: &ChangeId) -> bool {
        self.kind == other.kind && (self.device.is_none() || self.device == other.device)
    }
}

impl Default for ChangeId {
    /// Only to fill the rest of a `Change { .. }`: every planner names its id.
    fn default() -> Self {
        ChangeId::of(Kind::Persist)
    }
}

impl fmt::Display for ChangeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.device {
            Some(d) => write!(f, "{}:{d}", self.kind.name()),
            None => f.write_str(self.kind.name()),
        }
    }
}

impl From<ChangeId> for String {
    fn from(id: ChangeId) -> String {
        id.to_string()
    }
}

impl std::str::FromStr for ChangeId {
    type Err = String;
    fn from_str(s: &str) -> Result<ChangeId, String> {
        let (name, device) = match s.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (s, None),
        };
        let spec = KINDS.iter().find(|k| k.name == name).ok_or_else(|| {
            let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
            format!("{s:?} is not a change id ({})", names.join(", "))
        })?;
        match (spec.kind, device) {
            (_, None) => Ok(ChangeId::of(spec.kind)),
            (Kind::Sriov, Some(d)) if crate::host::pci::is_pci_address(d) => Ok(ChangeId::sriov(d)),
            _ => Err(format!("{s:?} is not a change id")),
        }
    }
}

impl TryFrom<String> for ChangeId {
    type Error = String;
    fn try_from(s: String) -> Result<ChangeId, String> {
        s.parse()
    }
}

impl PartialEq<str> for ChangeId {
    fn eq(&self, other: &str) -> bool {
        other.parse::<ChangeId>().is_ok_and(|o| &o == self)
    }
}

impl PartialEq<&str> for ChangeId {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

/// The kind whose Fix button fixes `finding`.
pub fn kind_fixing(finding: &str) -> Option<Kind> {
    KINDS
        .iter()
        .find(|k| k.fixes.contains(&finding))
        .map(|k| k.kind)
}

// The parts every runtime kind builds its change from.

pub(crate) fn ev(source: &str, value: impl Into<String>) -> Evidence {
    Evidence {
        source: source.into(),
        value: value.into(),
    }
}

pub(crate) fn change(id: ChangeId, title: String, why: &str, effect: Effect) -> Change {
    Change {
        id,
        title,
        why: why.into(),
        effect,
        ..Change::default()
    }
}

/// A value written only to trigger something (nothing to restore).
pub(crate) fn action(path: impl Into<String>, after: impl Into<String>) -> ValueChange {
    ValueChange {
        path: path.into(),
        before: String::new(),
        after: after.into(),
        action: true,
        may_fail: false,
    }
}

pub(crate) fn value(path: String, before: &str, after: &str) -> ValueChange {
    ValueChange {
        path,
        before: before.into(),
        after: after.into(),
        action: false,
        may_fail: false,
    }
}
