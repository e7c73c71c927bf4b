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

pub(crate) mod governor;
pub(crate) mod hugepages;
pub(crate) mod irq_affinity;
pub(crate) mod irqbalance;
pub(crate) mod ksm;
pub(crate) mod persist;
pub(crate) mod sriov;
#[cfg(test)]
mod tests;
pub(crate) mod thp;
pub(crate) mod vfio_bind;

use super::facts::TuneFacts;
use super::model::{Change, Effect, Manual, Request, ValueChange};
use crate::finding::Evidence;
use crate::host::HostSnapshot;

pub use super::kind::{ChangeId, KINDS, Kind, Spec, kind_fixing, restarts_libvirt, runs_nothing};
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
    pub boot: &'a BootChanges,
}

/// The boot changes of one plan, worked out together.
#[derive(Debug)]
pub struct BootChanges {
    pub vfio_boot: Result<Option<Change>, crate::tuning::vfio_rebuild::NotAtBoot>,
    pub cmdline: Result<Option<Change>, Manual>,
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

/// A libvirt domain name we put into a shell script: letters, digits and
/// `._+-`, at most 64 bytes (a stricter set than libvirt's; anything else is
/// refused, never quoted around).
pub fn valid_vm_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
}

/// The VM named in the request, checked (a hook is written for it).
pub fn vm_name(req: &Request) -> Result<&str, PlanError> {
    let name = req.vm.as_deref().map(str::trim).unwrap_or("");
    if !valid_vm_name(name) {
        return Err(PlanError::Hook(format!(
            "the VM's hook: {name:?} is not a VM name it takes (letters, digits and ._+- only)"
        )));
    }
    Ok(name)
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
