//! The change kinds as facts, a leaf of tuning: `Kind` and `ChangeId`,
//! and each kind's line in `KINDS` — its name (the journal's word), what
//! it does, and its allowlist: the files, values and programs it may touch
//! (`targets.rs` checks every plan and every journal entry against it),
//! and the findings it fixes. It knows nothing of planners: the journal,
//! the writer and the targets read it without depending on any planner
//! (`plan::planner` joins each kind to its planner, above).
//!
//! Adding a kind is its line in `kinds!` below (variant and `Spec`
//! together), its `Spec` here, and its arm in `plan::planner`: the
//! compiler checks each.

use super::command::{Cmd, Module, Unit};
use super::paths::*;
use crate::tuning::paths;
use serde::{Deserialize, Serialize};
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

const SPEC_VFIO_BOOT: Spec = Spec {
    kind: Kind::VfioBoot,
    name: "vfio-boot",
    what: "vfio-pci claims the VM's devices at boot (the initramfs rebuilt)",
    files: &[
        paths::VFIO_MODPROBE,
        paths::INITRAMFS_TOOLS_MODULES,
        paths::VFIO_DRACUT,
        paths::VFIO_MKINITCPIO,
    ],
    values: &[],
    runs: |cmd| boot_image(cmd) || matches!(cmd, Cmd::RpmOstreeInitramfsEtc { .. }),
    fixes: &[
        "device.bound",
        "device.host_driver_first",
        "boot.initramfs_vfio",
    ],
};

const SPEC_CMDLINE: Spec = Spec {
    kind: Kind::Cmdline,
    name: "cmdline",
    what: "the kernel command line (IOMMU, CPU isolation, the devices' IDs)",
    files: &[
        paths::ETC_DEFAULT_GRUB,
        paths::GRUB_DROPIN,
        // GRUB's entry of ours, booted once (boot/grub_once.rs).
        paths::GRUB_ONCE_SCRIPT,
        paths::ETC_KERNEL_CMDLINE,
        // Our copy of the default entry, and the default entry itself once
        // the copy is kept (systemd_boot.rs).
        "/boot/loader/entries/*",
        "/boot/efi/loader/entries/*",
        "/efi/loader/entries/*",
        paths::ETC_KERNELSTUB_CONFIGURATION,
    ],
    values: &[],
    runs: |cmd| {
        boot_image(cmd)
            || own_entry(cmd)
            || matches!(
                cmd,
                Cmd::GrubMkconfig { .. }
                    | Cmd::GrubReboot { .. }
                    | Cmd::GrubUnsetOnce { .. }
                    | Cmd::Grubby { .. }
                    | Cmd::Kernelstub { .. }
                    | Cmd::RpmOstreeKargs { .. }
            )
    },
    fixes: &[
        "cpu.isolation",
        "iommu.passthrough_mode",
        "iommu.enabled",
        "tune.tried_once",
    ],
};

/// Only ever a manual step (said by `tokens`).
const SPEC_IOMMU_FIRMWARE: Spec = Spec {
    kind: Kind::IommuFirmware,
    name: "iommu-firmware",
    what: "the IOMMU switched on in the firmware (by hand)",
    files: &[],
    values: &[],
    runs: runs_nothing,
    fixes: &[],
};

const SPEC_VFIO_BIND: Spec = Spec {
    kind: Kind::VfioBind,
    name: "vfio-bind",
    what: "the VM's devices bound to vfio-pci now",
    files: &[],
    values: &[
        "/sys/bus/pci/devices/*/driver_override",
        "/sys/bus/pci/drivers/*/unbind",
        paths::SYS_BUS_PCI_DRIVERS_PROBE,
    ],
    runs: |cmd| {
        matches!(
            cmd,
            Cmd::Modprobe {
                module: Module::VfioPci
            }
        )
    },
    fixes: &[],
};

const SPEC_GOVERNOR: Spec = Spec {
    kind: Kind::Governor,
    name: "governor",
    what: "the CPU governor 'performance' on the VM's CPUs",
    files: &[],
    values: &["/sys/devices/system/cpu/*/cpufreq/scaling_governor"],
    runs: runs_nothing,
    fixes: &["cpu.governor"],
};

/// Planned with the governor.
const SPEC_EPP: Spec = Spec {
    kind: Kind::Epp,
    name: "epp",
    what: "the energy/performance preference 'performance' on the same CPUs",
    files: &[],
    values: &["/sys/devices/system/cpu/*/cpufreq/energy_performance_preference"],
    runs: runs_nothing,
    fixes: &[],
};

const SPEC_THP: Spec = Spec {
    kind: Kind::Thp,
    name: "thp",
    what: "transparent hugepages to madvise",
    files: &[],
    values: &[
        paths::SYS_KERNEL_MM_TRANSPARENT_HUGEPAGE_ENABLED,
        "/sys/kernel/mm/transparent_hugepage/defrag",
    ],
    runs: runs_nothing,
    fixes: &["mem.thp"],
};

const SPEC_KSM: Spec = Spec {
    kind: Kind::Ksm,
    name: "ksm",
    what: "kernel same-page merging off (ksmtuned stopped)",
    files: &[],
    values: &[paths::SYS_KERNEL_MM_KSM_RUN],
    runs: |cmd| {
        matches!(
            cmd,
            Cmd::Systemctl {
                unit: Unit::Ksmtuned,
                ..
            }
        )
    },
    fixes: &["mem.ksm"],
};

const SPEC_HUGEPAGES: Spec = Spec {
    kind: Kind::Hugepages,
    name: "hugepages",
    what: "hugepages for the VM's memory, on its NUMA node",
    files: &[],
    values: &[
        "/sys/kernel/mm/hugepages/*/nr_hugepages",
        "/sys/devices/system/node/*/hugepages/*/nr_hugepages",
        paths::PROC_SYS_VM_COMPACT_MEMORY,
    ],
    runs: runs_nothing,
    fixes: &["mem.hugepages"],
};

const SPEC_IRQ_AFFINITY: Spec = Spec {
    kind: Kind::IrqAffinity,
    name: "irq-affinity",
    what: "device interrupts off the VM's CPUs",
    files: &[],
    values: &["/proc/irq/*/smp_affinity_list"],
    runs: runs_nothing,
    fixes: &["cpu.irq_affinity"],
};

const SPEC_IRQBALANCE: Spec = Spec {
    kind: Kind::Irqbalance,
    name: "irqbalance",
    what: "irqbalance keeps off the VM's CPUs",
    files: &[
        paths::ETC_DEFAULT_IRQBALANCE,
        paths::ETC_SYSCONFIG_IRQBALANCE,
    ],
    values: &[],
    runs: |cmd| {
        matches!(
            cmd,
            Cmd::Systemctl {
                unit: Unit::Irqbalance,
                ..
            }
        )
    },
    fixes: &[],
};

const SPEC_ISOLATION_HOOK: Spec = Spec {
    kind: Kind::IsolationHook,
    name: "isolation-hook",
    what: "host tasks kept off the VM's CPUs while it runs (a libvirt hook)",
    files: &[ISOLATION_HOOK],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
};

const SPEC_SINGLE_GPU_HOOK: Spec = Spec {
    kind: Kind::SingleGpuHook,
    name: "single-gpu-hook",
    what: "the desktop's only GPU handed to the VM at its start and back (a libvirt hook)",
    files: &[SINGLE_GPU_HOOK],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
};

const SPEC_SHARED_GPU_DESKTOP: Spec = Spec {
    kind: Kind::SharedGpuDesktop,
    name: "shared-gpu-desktop",
    what: "the desktop's compositor kept off the lent GPU (udev tag, compositor settings)",
    files: &[SHARED_GPU_UDEV, SHARED_GPU_ENVIRONMENT, SHARED_GPU_XORG],
    values: &[],
    runs: triggers_udev,
    fixes: &[],
};

const SPEC_SHARED_GPU_HOOK: Spec = Spec {
    kind: Kind::SharedGpuHook,
    name: "shared-gpu-hook",
    what: "the second GPU lent to the VM at its start and given back to the desktop at its stop (a libvirt hook)",
    files: &[SHARED_GPU_HOOK],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
};

const SPEC_LOOKING_GLASS_SHM: Spec = Spec {
    kind: Kind::LookingGlassShm,
    name: "looking-glass-shm",
    what: "Looking Glass's /dev/shm file for the desktop user and QEMU",
    files: &[LG_TMPFILES],
    values: &[],
    runs: |cmd| matches!(cmd, Cmd::TmpfilesLookingGlass),
    fixes: &[],
};

const SPEC_KVMFR: Spec = Spec {
    kind: Kind::Kvmfr,
    name: "kvmfr",
    what: "Looking Glass's kvmfr module, its device for the user, AppArmor's line",
    files: &[KVMFR_MODPROBE, KVMFR_LOAD, KVMFR_UDEV, APPARMOR_LOCAL],
    values: &[],
    runs: |cmd| {
        matches!(
            cmd,
            Cmd::Modprobe {
                module: Module::Kvmfr
            } | Cmd::ModprobeRemove {
                module: Module::Kvmfr
            }
        )
    },
    fixes: &[],
};

const SPEC_QEMU_CONF: Spec = Spec {
    kind: Kind::QemuConf,
    name: "qemu-conf",
    what: "qemu.conf: kvmfr's device for QEMU; QEMU run as the desktop user when asked by name",
    files: &[QEMU_CONF],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
};

const SPEC_SRIOV: Spec = Spec {
    kind: Kind::Sriov,
    name: "sriov",
    what: "SR-IOV virtual functions (sriov:ADDRESS for one card)",
    files: &[],
    values: &["/sys/bus/pci/devices/*/sriov_numvfs"],
    runs: runs_nothing,
    fixes: &[],
};

const SPEC_PERSIST: Spec = Spec {
    kind: Kind::Persist,
    name: "persist",
    what: "THP, KSM and hugepages kept after a reboot (tmpfiles.d)",
    files: &[paths::ETC_TMPFILES_D_VFIO_ASSISTANT_CONF],
    values: &[],
    runs: runs_nothing,
    fixes: &[],
};
