//! The change kinds as facts, a leaf of tuning: `Kind` and `ChangeId`,
//! and each kind's line in `KINDS` — its name (the journal's word), what
//! it does, and its allowlist: the files, values and programs it may touch
//! (`targets.rs` checks every plan and every journal entry against it),
//! and the findings it fixes. It knows nothing of planners: the journal,
//! the writer and the targets read it without depending on any planner
//! (`plan::planner` joins each kind to its planner, above).
//!
//! Adding a kind is its line in `kinds!` below (variant and `Spec`
//! together), its `Spec` in kind/specs.rs, and its arm in `plan::planner`:
//! the compiler checks each.

mod specs;

use super::command::Cmd;
use serde::{Deserialize, Serialize};
use specs::*;
use std::fmt;

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

fn boot_image(cmd: &Cmd) -> bool {
    matches!(
        cmd,
        Cmd::UpdateInitramfs { .. }
            | Cmd::UpdateInitramfsOnly { .. }
            | Cmd::Dracut { .. }
            | Cmd::Mkinitcpio
            | Cmd::KernelInstallAdd { .. }
    )
}

/// Commands only the kernel command line change runs: its own boot entry.
fn own_entry(cmd: &Cmd) -> bool {
    matches!(
        cmd,
        Cmd::BootctlSetOneshot
            | Cmd::KernelInstallAddOurs { .. }
            | Cmd::BootctlSetOneshotUki { .. }
    )
}

fn triggers_udev(cmd: &Cmd) -> bool {
    matches!(cmd, Cmd::UdevadmTriggerDrm)
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
    VfioBoot => SPEC_VFIO_BOOT,
    Cmdline => SPEC_CMDLINE,
    IommuFirmware => SPEC_IOMMU_FIRMWARE,
    VfioBind => SPEC_VFIO_BIND,
    Governor => SPEC_GOVERNOR,
    Epp => SPEC_EPP,
    Thp => SPEC_THP,
    Ksm => SPEC_KSM,
    Hugepages => SPEC_HUGEPAGES,
    IrqAffinity => SPEC_IRQ_AFFINITY,
    Irqbalance => SPEC_IRQBALANCE,
    IsolationHook => SPEC_ISOLATION_HOOK,
    SingleGpuHook => SPEC_SINGLE_GPU_HOOK,
    SharedGpuDesktop => SPEC_SHARED_GPU_DESKTOP,
    SharedGpuHook => SPEC_SHARED_GPU_HOOK,
    LookingGlassShm => SPEC_LOOKING_GLASS_SHM,
    Kvmfr => SPEC_KVMFR,
    QemuConf => SPEC_QEMU_CONF,
    Sriov => SPEC_SRIOV,
    Persist => SPEC_PERSIST,
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

/// Text that is not one of our change ids (`--only`, a journal entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotChangeId {
    #[error("{given:?} is not a change id ({known})")]
    UnknownKind { given: String, known: String },
    #[error("{0:?} is not a change id")]
    BadDevice(String),
}

impl std::str::FromStr for ChangeId {
    type Err = NotChangeId;
    fn from_str(s: &str) -> Result<ChangeId, NotChangeId> {
        let (name, device) = match s.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (s, None),
        };
        let spec =
            KINDS
                .iter()
                .find(|k| k.name == name)
                .ok_or_else(|| NotChangeId::UnknownKind {
                    given: s.to_string(),
                    known: KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", "),
                })?;
        match (spec.kind, device) {
            (_, None) => Ok(ChangeId::of(spec.kind)),
            (Kind::Sriov, Some(d)) if crate::host::pci::is_pci_address(d) => Ok(ChangeId::sriov(d)),
            _ => Err(NotChangeId::BadDevice(s.to_string())),
        }
    }
}

impl TryFrom<String> for ChangeId {
    type Error = NotChangeId;
    fn try_from(s: String) -> Result<ChangeId, NotChangeId> {
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
