//! Each kind's `Spec`: its name, what it does in words, its allowlist
//! (files, values, programs) and the findings it fixes. `kinds!` in kind.rs
//! puts each in `KINDS` beside its variant.

use super::*;
use crate::tuning::command::{Cmd, Module, Unit};
use crate::tuning::paths;
use crate::tuning::paths::*;

pub(super) const SPEC_VFIO_BOOT: Spec = Spec {
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

pub(super) const SPEC_CMDLINE: Spec = Spec {
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
pub(super) const SPEC_IOMMU_FIRMWARE: Spec = Spec {
    kind: Kind::IommuFirmware,
    name: "iommu-firmware",
    what: "the IOMMU switched on in the firmware (by hand)",
    files: &[],
    values: &[],
    runs: runs_nothing,
    fixes: &[],
};

pub(super) const SPEC_VFIO_BIND: Spec = Spec {
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

pub(super) const SPEC_GOVERNOR: Spec = Spec {
    kind: Kind::Governor,
    name: "governor",
    what: "the CPU governor 'performance' on the VM's CPUs",
    files: &[],
    values: &["/sys/devices/system/cpu/*/cpufreq/scaling_governor"],
    runs: runs_nothing,
    fixes: &["cpu.governor"],
};

/// Planned with the governor.
pub(super) const SPEC_EPP: Spec = Spec {
    kind: Kind::Epp,
    name: "epp",
    what: "the energy/performance preference 'performance' on the same CPUs",
    files: &[],
    values: &["/sys/devices/system/cpu/*/cpufreq/energy_performance_preference"],
    runs: runs_nothing,
    fixes: &[],
};

pub(super) const SPEC_THP: Spec = Spec {
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

pub(super) const SPEC_KSM: Spec = Spec {
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

pub(super) const SPEC_HUGEPAGES: Spec = Spec {
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

pub(super) const SPEC_IRQ_AFFINITY: Spec = Spec {
    kind: Kind::IrqAffinity,
    name: "irq-affinity",
    what: "device interrupts off the VM's CPUs",
    files: &[],
    values: &["/proc/irq/*/smp_affinity_list"],
    runs: runs_nothing,
    fixes: &["cpu.irq_affinity"],
};

pub(super) const SPEC_IRQBALANCE: Spec = Spec {
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

pub(super) const SPEC_ISOLATION_HOOK: Spec = Spec {
    kind: Kind::IsolationHook,
    name: "isolation-hook",
    what: "host tasks kept off the VM's CPUs while it runs (a libvirt hook)",
    files: &[ISOLATION_HOOK],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
};

pub(super) const SPEC_SINGLE_GPU_HOOK: Spec = Spec {
    kind: Kind::SingleGpuHook,
    name: "single-gpu-hook",
    what: "the desktop's only GPU handed to the VM at its start and back (a libvirt hook)",
    files: &[SINGLE_GPU_HOOK],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
};

pub(super) const SPEC_SHARED_GPU_DESKTOP: Spec = Spec {
    kind: Kind::SharedGpuDesktop,
    name: "shared-gpu-desktop",
    what: "the desktop's compositor kept off the lent GPU (udev tag, compositor settings)",
    files: &[SHARED_GPU_UDEV, SHARED_GPU_ENVIRONMENT, SHARED_GPU_XORG],
    values: &[],
    runs: triggers_udev,
    fixes: &[],
};

pub(super) const SPEC_SHARED_GPU_HOOK: Spec = Spec {
    kind: Kind::SharedGpuHook,
    name: "shared-gpu-hook",
    what: "the second GPU lent to the VM at its start and given back to the desktop at its stop (a libvirt hook)",
    files: &[SHARED_GPU_HOOK],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
};

pub(super) const SPEC_LOOKING_GLASS_SHM: Spec = Spec {
    kind: Kind::LookingGlassShm,
    name: "looking-glass-shm",
    what: "Looking Glass's /dev/shm file for the desktop user and QEMU",
    files: &[LG_TMPFILES],
    values: &[],
    runs: |cmd| matches!(cmd, Cmd::TmpfilesLookingGlass),
    fixes: &[],
};

pub(super) const SPEC_KVMFR: Spec = Spec {
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

pub(super) const SPEC_QEMU_CONF: Spec = Spec {
    kind: Kind::QemuConf,
    name: "qemu-conf",
    what: "qemu.conf: kvmfr's device for QEMU; QEMU run as the desktop user when asked by name",
    files: &[QEMU_CONF],
    values: &[],
    runs: restarts_libvirt,
    fixes: &[],
};

pub(super) const SPEC_SRIOV: Spec = Spec {
    kind: Kind::Sriov,
    name: "sriov",
    what: "SR-IOV virtual functions (sriov:ADDRESS for one card)",
    files: &[],
    values: &["/sys/bus/pci/devices/*/sriov_numvfs"],
    runs: runs_nothing,
    fixes: &[],
};

pub(super) const SPEC_PERSIST: Spec = Spec {
    kind: Kind::Persist,
    name: "persist",
    what: "THP, KSM and hugepages kept after a reboot (tmpfiles.d)",
    files: &[paths::ETC_TMPFILES_D_VFIO_ASSISTANT_CONF],
    values: &[],
    runs: runs_nothing,
    fixes: &[],
};
