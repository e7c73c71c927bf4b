//! The host paths tuning writes, named once: each kind's files (its
//! allowlist), the hooks, what facts.rs reads back. A leaf: it imports
//! nothing, so the writer, the commands and the facts can name a file
//! without depending on the planner that writes it (issue 43's knot).
//! Host paths (resolved inside a `HostRoot`), spelled as `/etc/…`.

/// The shared GPU's libvirt hook: lends the card to the VM at its start and
/// gives it back to the desktop at its stop (shared_gpu.rs).
pub const SHARED_GPU_HOOK: &str = "/etc/libvirt/hooks/qemu.d/vfio-assistant-shared-gpu";

/// The hook's log (what `check` reads for the card's health after a stop).
pub const SHARED_GPU_LOG: &str = "/var/log/vfio-assistant-shared-gpu.log";

/// The udev rule that tags the lent card so the compositor leaves it alone
/// (shared_desktop.rs).
pub const SHARED_GPU_UDEV: &str = "/etc/udev/rules.d/61-vfio-assistant-shared-gpu.rules";

/// The session environment that names the desktop's own card to the
/// compositor (shared_desktop.rs).
pub const SHARED_GPU_ENVIRONMENT: &str = "/etc/environment.d/90-vfio-assistant-shared-gpu.conf";

/// Xorg's settings that keep it on the desktop's own card (shared_desktop.rs).
pub const SHARED_GPU_XORG: &str = "/etc/X11/xorg.conf.d/20-vfio-assistant-shared-gpu.conf";

/// The desktop card's name of ours.
pub const DESKTOP_CARD: &str = "/dev/dri/vfio-assistant-desktop-card";

/// Debian's drop-in of ours.
pub const GRUB_DROPIN: &str = "/etc/default/grub.d/99-vfio-assistant.cfg";

/// Our script in /etc/grub.d (after 10_linux and 30_os-prober: the entry
/// is never the default by its place).
pub const GRUB_ONCE_SCRIPT: &str = "/etc/grub.d/42_vfio-assistant";

/// Looking Glass's shared memory file, made at boot by systemd-tmpfiles
/// (play.rs).
pub const LG_TMPFILES: &str = "/etc/tmpfiles.d/10-looking-glass.conf";

/// The kvmfr module's options (its shared memory size) (play.rs).
pub const KVMFR_MODPROBE: &str = "/etc/modprobe.d/kvmfr.conf";

/// kvmfr loaded at boot (play.rs).
pub const KVMFR_LOAD: &str = "/etc/modules-load.d/kvmfr.conf";

/// The udev rule that gives /dev/kvmfr0 to the user and QEMU (play.rs).
pub const KVMFR_UDEV: &str = "/etc/udev/rules.d/99-kvmfr.rules";

/// libvirt's QEMU settings: the user QEMU runs as, the devices it may open
/// (play.rs).
pub const QEMU_CONF: &str = "/etc/libvirt/qemu.conf";

/// Where a site adds to libvirt's AppArmor abstraction for QEMU (Looking
/// Glass's `doc/ivshmem_kvmfr.rst`, "AppArmor").
pub const APPARMOR_LOCAL: &str = "/etc/apparmor.d/local/abstractions/libvirt-qemu";

/// libvirt's own AppArmor abstraction for QEMU (it includes the local one):
/// there, AppArmor confines QEMU.
pub const APPARMOR_LIBVIRT: &str = "/etc/apparmor.d/abstractions/libvirt-qemu";

/// The loaded kvmfr's reference count: absent when it is not loaded, above
/// 0 while anyone has /dev/kvmfr0 open (its file operations hold the module).
pub const KVMFR_REFCNT: &str = "/sys/module/kvmfr/refcnt";

/// Ours: `softdep … pre: vfio-pci` (and `options vfio-pci ids=` where the
/// command line cannot carry them) (vfio_boot.rs).
pub const VFIO_MODPROBE: &str = "/etc/modprobe.d/vfio-assistant.conf";

/// dracut's drop-in of ours: vfio-pci and our modprobe.d file in the image.
pub const VFIO_DRACUT: &str = "/etc/dracut.conf.d/90-vfio-assistant.conf";

/// mkinitcpio's drop-in of ours: the same.
pub const VFIO_MKINITCPIO: &str = "/etc/mkinitcpio.conf.d/vfio-assistant.conf";

/// initramfs-tools' modules list (Debian's own file: our lines added).
pub const INITRAMFS_TOOLS_MODULES: &str = "/etc/initramfs-tools/modules";

/// The single-GPU libvirt hook: stops the desktop, hands the only card to
/// the VM, and gives it back at the VM's stop (single_gpu.rs).
pub const SINGLE_GPU_HOOK: &str = "/etc/libvirt/hooks/qemu.d/vfio-assistant-single-gpu";

/// The isolation hook: keeps the host's own tasks off the VM's CPUs while
/// it runs (hook.rs).
pub const ISOLATION_HOOK: &str = "/etc/libvirt/hooks/qemu.d/vfio-assistant-isolate";

// Read or written by more than one tuning file: each spelled here once, named
// by its path (tests/it/architecture.rs keeps every host path of tuning in one file).
pub const BOOT_EFI_EFI_LINUX: &str = "/boot/efi/EFI/Linux";
pub const BOOT_EFI_LOADER_ENTRIES: &str = "/boot/efi/loader/entries";
pub const BOOT_EFI_LOADER_LOADER_CONF: &str = "/boot/efi/loader/loader.conf";
pub const BOOT_GRUB: &str = "/boot/grub";
pub const BOOT_GRUB_GRUB_CFG: &str = "/boot/grub/grub.cfg";
pub const BOOT_GRUB_GRUBENV: &str = "/boot/grub/grubenv";
pub const BOOT_GRUB2: &str = "/boot/grub2";
pub const BOOT_GRUB2_PREFIX: &str = "/boot/grub2/";
pub const BOOT_GRUB2_GRUB_CFG: &str = "/boot/grub2/grub.cfg";
pub const BOOT_GRUB2_GRUBENV: &str = "/boot/grub2/grubenv";
pub const BOOT_LOADER_ENTRIES: &str = "/boot/loader/entries";
pub const BOOT_LOADER_LOADER_CONF: &str = "/boot/loader/loader.conf";
pub const DEV_NULL: &str = "/dev/null";
pub const EFI_LOADER_ENTRIES: &str = "/efi/loader/entries";
pub const EFI_LOADER_LOADER_CONF: &str = "/efi/loader/loader.conf";
pub const ETC_DEFAULT_GRUB: &str = "/etc/default/grub";
pub const ETC_DEFAULT_GRUB_D: &str = "/etc/default/grub.d";
pub const ETC_DEFAULT_IRQBALANCE: &str = "/etc/default/irqbalance";
pub const ETC_GRUB_D: &str = "/etc/grub.d";
pub const ETC_KERNEL_CMDLINE: &str = "/etc/kernel/cmdline";
pub const ETC_KERNEL_INSTALL_CONF: &str = "/etc/kernel/install.conf";
pub const ETC_KERNEL_INSTALL_D: &str = "/etc/kernel/install.d";
pub const ETC_KERNEL_TRIES: &str = "/etc/kernel/tries";
pub const ETC_KERNEL_UKI_CONF: &str = "/etc/kernel/uki.conf";
pub const ETC_KERNELSTUB_CONFIGURATION: &str = "/etc/kernelstub/configuration";
pub const ETC_LIBVIRT_HOOKS: &str = "/etc/libvirt/hooks";
pub const ETC_LIBVIRT_HOOKS_QEMU_D: &str = "/etc/libvirt/hooks/qemu.d";
pub const ETC_MKINITCPIO_CONF: &str = "/etc/mkinitcpio.conf";
pub const ETC_SYSCONFIG_IRQBALANCE: &str = "/etc/sysconfig/irqbalance";
pub const ETC_TMPFILES_D_VFIO_ASSISTANT_CONF: &str = "/etc/tmpfiles.d/vfio-assistant.conf";
pub const PROC_CMDLINE: &str = "/proc/cmdline";
pub const PROC_SYS_VM_COMPACT_MEMORY: &str = "/proc/sys/vm/compact_memory";
pub const RUN_LIBVIRT_VIRTQEMUD_SOCK: &str = "/run/libvirt/virtqemud-sock";
pub const RUN_OSTREE_BOOTED: &str = "/run/ostree-booted";
pub const RUN_SYSTEMD_SYSTEM: &str = "/run/systemd/system";
pub const SYS_BUS_PCI_DRIVERS_PROBE: &str = "/sys/bus/pci/drivers_probe";
pub const SYS_KERNEL_MM_KSM_RUN: &str = "/sys/kernel/mm/ksm/run";
pub const SYS_KERNEL_MM_TRANSPARENT_HUGEPAGE_ENABLED: &str =
    "/sys/kernel/mm/transparent_hugepage/enabled";
pub const SYS_MODULE_NVIDIA_DRM_PARAMETERS_FBDEV: &str = "/sys/module/nvidia_drm/parameters/fbdev";
pub const USR_LIB_BOOTC: &str = "/usr/lib/bootc";
pub const USR_LIB_KERNEL_INSTALL_D: &str = "/usr/lib/kernel/install.d";
pub const USR_LIB_KERNEL_UKI_CONF: &str = "/usr/lib/kernel/uki.conf";
pub const VAR_LIB_DPKG_INFO_DRACUT_CORE_LIST: &str = "/var/lib/dpkg/info/dracut-core.list";
pub const VAR_LIB_DPKG_INFO_DRACUT_LIST: &str = "/var/lib/dpkg/info/dracut.list";
pub const VAR_LIB_DPKG_INFO_INITRAMFS_TOOLS_LIST: &str = "/var/lib/dpkg/info/initramfs-tools.list";
pub const ETC_PASSWD: &str = "/etc/passwd";
