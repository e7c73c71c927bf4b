//! What the planner reads of a host: the files (every kind's allowlist, then
//! the rest), folders, markers and programs `gather` looks at.

use crate::tuning::paths;
use std::collections::BTreeSet;

/// Config files the planner reads besides those a kind may write (every
/// kind's allowlist, `kind::KINDS`, is read too: `files_read`), as the host
/// spells them.
pub const CONFIG_FILES: &[&str] = &[
    // kernel-install's boot counting (the image's name changes as it is tried).
    paths::ETC_KERNEL_TRIES,
    paths::ETC_KERNEL_INSTALL_CONF,
    // ukify's configuration: whether it signs the images it builds.
    paths::ETC_KERNEL_UKI_CONF,
    paths::USR_LIB_KERNEL_UKI_CONF,
    "/etc/initramfs-tools/initramfs.conf",
    paths::ETC_MKINITCPIO_CONF,
    "/etc/dracut.conf",
    "/etc/os-release",
    paths::BOOT_GRUB_GRUB_CFG,
    // GRUB's environment block: a pending grub-reboot, the saved default.
    paths::BOOT_GRUB_GRUBENV,
    paths::BOOT_GRUB2_GRUBENV,
    // systemd-boot's `default` (which entry or image it starts).
    paths::BOOT_LOADER_LOADER_CONF,
    paths::EFI_LOADER_LOADER_CONF,
    paths::BOOT_EFI_LOADER_LOADER_CONF,
    paths::BOOT_GRUB2_GRUB_CFG,
    "/etc/sysctl.d/90-vfio-assistant.conf",
    paths::ETC_PASSWD,
];

/// Folders whose entries the planner looks at.
pub const CONFIG_DIRS: &[&str] = &[
    paths::ETC_DEFAULT_GRUB_D,
    // GRUB's generators: 10_linux, which our entry tried once runs.
    paths::ETC_GRUB_D,
    "/etc/dracut.conf.d",
    "/etc/mkinitcpio.conf.d",
    "/etc/modprobe.d",
    "/etc/initramfs-tools",
    "/boot",
    paths::BOOT_LOADER_ENTRIES,
    paths::BOOT_EFI_LOADER_ENTRIES,
    paths::EFI_LOADER_ENTRIES,
    paths::USR_LIB_BOOTC,
    // kernel-install's plugins: whether it builds the initramfs itself
    // (50-dracut.install) or copies /boot/initrd.img-* (Debian's 85-initrd).
    paths::USR_LIB_KERNEL_INSTALL_D,
    paths::ETC_KERNEL_INSTALL_D,
    // libvirt's hooks: another single-GPU setup's scripts for the same VM.
    paths::ETC_LIBVIRT_HOOKS,
    paths::ETC_LIBVIRT_HOOKS_QEMU_D,
];

/// Where kernel-install, mkinitcpio and ukify put unified kernel images
/// (listed with `CONFIG_DIRS`, and each image read)
/// (`$BOOT/EFI/Linux`: XBOOTLDR at /boot, or the ESP at /efi or, as Debian
/// and Ubuntu mount it, /boot/efi).
pub const UKI_DIRS: &[&str] = &[
    "/boot/EFI/Linux",
    "/efi/EFI/Linux",
    paths::BOOT_EFI_EFI_LINUX,
];

/// More UKIs than one folder sanely holds: the rest are not read.
pub(super) const MAX_UKIS: usize = 32;

/// Markers whose presence alone says something.
pub const MARKERS: &[&str] = &[
    paths::RUN_OSTREE_BOOTED,
    "/sys/firmware/efi",
    paths::RUN_SYSTEMD_SYSTEM,
    // The modular libvirt daemons run (virtqemud, not libvirtd).
    paths::RUN_LIBVIRT_VIRTQEMUD_SOCK,
    // Which initramfs generator is installed (Debian/Ubuntu): config folders
    // outlive the package that made them, the package list does not.
    paths::VAR_LIB_DPKG_INFO_INITRAMFS_TOOLS_LIST,
    paths::VAR_LIB_DPKG_INFO_DRACUT_LIST,
    paths::VAR_LIB_DPKG_INFO_DRACUT_CORE_LIST,
    // AppArmor confines QEMU (libvirt's abstraction for it is installed).
    paths::APPARMOR_LIBVIRT,
];

/// Tools the changes may run, looked for in the usual binary folders.
pub const TOOLS: &[&str] = &[
    "update-grub",
    "grub-mkconfig",
    "grub2-mkconfig",
    "grub-reboot",
    "grub2-reboot",
    "grub-editenv",
    "grub2-editenv",
    "grubby",
    "kernel-install",
    "bootctl",
    "kernelstub",
    "rpm-ostree",
    "bootc",
    "update-initramfs",
    "dracut",
    "modprobe",
    "systemd-tmpfiles",
    "mkinitcpio",
    "systemctl",
    "irqbalance",
    "ksmtuned",
    "power-profiles-daemon",
    "tuned",
    "tlp",
    "udevadm",
];

pub(super) const BIN_DIRS: &[&str] = &["usr/sbin", "usr/bin", "sbin", "bin", "usr/lib/systemd"];

/// The compositors' programs `TuneFacts::tools` looks for (shared_desktop.rs
/// reads which are installed; its test keeps the two lists the same).
pub const COMPOSITOR_PROGRAMS: &[&str] = &[
    "gnome-shell",
    "kwin_wayland",
    "kwin_x11",
    "sway",
    "labwc",
    "river",
    "wayfire",
    "Hyprland",
    "Xorg",
];

/// Every file the planner reads: each file a kind may write (its
/// allowlist, a `*` pattern aside: the folders' listings read those), then
/// `CONFIG_FILES`. So what a change writes is always read before it is
/// planned, and named once, in the kind's line.
pub fn files_read() -> impl Iterator<Item = &'static str> {
    let mut seen = BTreeSet::new();
    crate::tuning::kind::KINDS
        .iter()
        .flat_map(|k| k.files.iter().copied())
        .filter(|p| !p.contains('*'))
        .chain(CONFIG_FILES.iter().copied())
        .filter(move |p| seen.insert(*p))
}
