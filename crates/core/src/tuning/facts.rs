//! What the tuning planner reads from a host, gathered once through a
//! `HostRoot` (so a captured tree or a test root plans exactly like the
//! live host): the boot configuration files and folders, which tools are
//! installed, the loader that booted (the `LoaderInfo` EFI variable), and
//! the runtime values the changes would write. Planning is then a pure
//! function of these facts and the host snapshot.

use crate::sysroot::{HostPath, HostRoot};
use crate::tuning::paths;
use std::collections::{BTreeMap, BTreeSet};

/// The systemd Boot Loader Interface's vendor GUID (systemd.io/BOOT_LOADER_INTERFACE).
const LOADER_GUID: &str = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";

/// Config files the planner reads (and may write), as the host spells them.
pub const CONFIG_FILES: &[&str] = &[
    paths::ETC_DEFAULT_GRUB,
    paths::ETC_KERNEL_CMDLINE,
    // kernel-install's boot counting (the image's name changes as it is tried).
    paths::ETC_KERNEL_TRIES,
    paths::ETC_KERNEL_INSTALL_CONF,
    // ukify's configuration: whether it signs the images it builds.
    paths::ETC_KERNEL_UKI_CONF,
    paths::USR_LIB_KERNEL_UKI_CONF,
    paths::ETC_KERNELSTUB_CONFIGURATION,
    paths::INITRAMFS_TOOLS_MODULES,
    "/etc/initramfs-tools/initramfs.conf",
    paths::ETC_MKINITCPIO_CONF,
    "/etc/dracut.conf",
    paths::ETC_DEFAULT_IRQBALANCE,
    paths::ETC_SYSCONFIG_IRQBALANCE,
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
    paths::VFIO_MODPROBE,
    paths::GRUB_DROPIN,
    super::paths::GRUB_ONCE_SCRIPT,
    paths::VFIO_DRACUT,
    paths::VFIO_MKINITCPIO,
    "/etc/sysctl.d/90-vfio-assistant.conf",
    paths::ETC_TMPFILES_D_VFIO_ASSISTANT_CONF,
    super::paths::ISOLATION_HOOK,
    super::paths::SINGLE_GPU_HOOK,
    super::paths::SHARED_GPU_HOOK,
    super::paths::SHARED_GPU_UDEV,
    super::paths::SHARED_GPU_ENVIRONMENT,
    super::paths::SHARED_GPU_XORG,
    super::paths::LG_TMPFILES,
    super::paths::KVMFR_MODPROBE,
    super::paths::KVMFR_LOAD,
    super::paths::KVMFR_UDEV,
    super::paths::QEMU_CONF,
    super::paths::APPARMOR_LOCAL,
    "/etc/passwd",
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
const MAX_UKIS: usize = 32;

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
    super::paths::APPARMOR_LIBVIRT,
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

const BIN_DIRS: &[&str] = &["usr/sbin", "usr/bin", "sbin", "bin", "usr/lib/systemd"];

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TuneFacts {
    /// Config file → its text (`None`: absent or unreadable).
    pub files: BTreeMap<String, Option<String>>,
    /// Folder → its entries, sorted (absent folders are missing).
    pub dirs: BTreeMap<String, Vec<String>>,
    pub markers: BTreeSet<String>,
    pub tools: BTreeSet<String>,
    /// The `LoaderInfo` EFI variable as text ("systemd-boot 255", "GRUB 2.12").
    pub loader_info: Option<String>,
    pub proc_cmdline: Option<String>,
    pub kernel_release: Option<String>,
    /// sysfs/procfs value → its text, for every value a change may write.
    pub values: BTreeMap<String, String>,
    /// The governors each CPU offers (`scaling_available_governors` of cpu0).
    pub governors_available: Vec<String>,
    /// `/proc/irq/N/smp_affinity_list` of every IRQ that has one.
    pub irq_affinity: BTreeMap<u32, String>,
    /// vfio-pci is built into the running kernel (`modules.builtin`): its
    /// options then come from the kernel command line, not modprobe.d.
    pub vfio_builtin: bool,
    /// Hugepage pool → how many pages it held before this tool's applied
    /// transactions reserved some (from the journal): what is the host's
    /// own, so a new plan for the same VM asks for nothing more while the
    /// VM runs and uses its pages.
    pub hugepages_before_ours: BTreeMap<String, u64>,
    /// Config files that are there but this process may not read
    /// (qemu.conf is root's alone): not absent, only unseen.
    pub unreadable: BTreeSet<String>,
    /// The kvmfr module is installed for the running kernel (modules.dep).
    pub kvmfr_module: bool,
    /// Why GRUB could not write its environment block at boot (the file
    /// system or volume under /boot/grub), when it could not: a
    /// `grub-reboot` there would boot its entry every time.
    pub grubenv_blocked: Option<String>,
    /// Each unified kernel image in `UKI_DIRS` → what it boots with (its
    /// `.cmdline` and `.uname` sections, its signature), or why it could
    /// not be read.
    pub ukis: BTreeMap<String, Result<crate::host::uki::Uki, crate::host::uki::UkiError>>,
    /// Who holds each GPU, found by its device numbers (host/holders.rs):
    /// the address of every PCI function with DRM nodes or on `nvidia` →
    /// the processes that have one of them open or mapped. What the
    /// shared-GPU planner lets `--shared-stop` name.
    pub card_holders: BTreeMap<String, Vec<crate::host::holders::Holder>>,
    /// Some processes' open files could not be read (another user's, when
    /// this is not root): a unit not seen holding a card may still hold it.
    /// The plan then says so and the helper decides: it is root, and sets
    /// this false (what root did not see holding the card does not hold it).
    pub holders_partial: bool,
}

impl TuneFacts {
    /// The name of the user with this uid in the host's /etc/passwd.
    pub fn user_name(&self, uid: u32) -> Option<String> {
        self.file("/etc/passwd")?.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id: u32 = f.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_string())
        })
    }

    /// Whether `name` is a user of the host with a uid of a person (1000+).
    pub fn is_person(&self, name: &str) -> bool {
        self.file("/etc/passwd").is_some_and(|t| {
            t.lines().any(|l| {
                let mut f = l.split(':');
                f.next() == Some(name)
                    && f.nth(1)
                        .and_then(|u| u.parse::<u32>().ok())
                        .is_some_and(|u| (1000..60000).contains(&u))
            })
        })
    }
}

impl TuneFacts {
    pub fn file(&self, path: &str) -> Option<&str> {
        self.files.get(path).and_then(|f| f.as_deref())
    }
    pub fn dir(&self, path: &str) -> Option<&[String]> {
        self.dirs.get(path).map(Vec::as_slice)
    }
    pub fn has_tool(&self, t: &str) -> bool {
        self.tools.contains(t)
    }
    pub fn value(&self, path: &str) -> Option<&str> {
        self.values.get(path).map(String::as_str)
    }
}

/// `LoaderInfo` content: 4 bytes of attributes, then UTF-16LE text ending in NUL.
pub fn parse_loader_info(bytes: &[u8]) -> Option<String> {
    let body = bytes.get(4..)?;
    let units: Vec<u16> = body
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|u| *u != 0)
        .collect();
    let s = String::from_utf16(&units).ok()?;
    let s = s.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn host_path(abs: &str) -> Option<HostPath> {
    HostPath::from_absolute(abs)
}

fn read_value(root: &HostRoot, abs: &str, out: &mut BTreeMap<String, String>) {
    if let Some(hp) = host_path(abs)
        && let Ok(v) = root.read_attr(&hp)
    {
        out.insert(abs.to_string(), v);
    }
}

/// Every runtime value the changes may write, under `root`.
fn read_values(root: &HostRoot, facts: &mut TuneFacts) {
    let v = &mut facts.values;
    for f in ["enabled", "defrag"] {
        read_value(root, &format!("/sys/kernel/mm/transparent_hugepage/{f}"), v);
    }
    read_value(root, paths::SYS_KERNEL_MM_KSM_RUN, v);
    // Not written: whether kvmfr is loaded, and held (play.rs).
    read_value(root, super::paths::KVMFR_REFCNT, v);
    // Whether NVIDIA's DRM driver took the console over (single GPU).
    read_value(root, paths::SYS_MODULE_NVIDIA_DRM_PARAMETERS_FBDEV, v);
    for size in ["2048kB", "1048576kB"] {
        read_value(
            root,
            &format!("/sys/kernel/mm/hugepages/hugepages-{size}/nr_hugepages"),
            v,
        );
        read_value(
            root,
            &format!("/sys/kernel/mm/hugepages/hugepages-{size}/free_hugepages"),
            v,
        );
    }
    if let Ok(nodes) = root.list_dir(&HostPath::sys("devices/system/node")) {
        for n in nodes.iter().filter(|n| n.starts_with("node")) {
            for size in ["2048kB", "1048576kB"] {
                read_value(
                    root,
                    &format!(
                        "/sys/devices/system/node/{n}/hugepages/hugepages-{size}/nr_hugepages"
                    ),
                    v,
                );
            }
        }
    }
    if let Ok(cpus) = root.list_dir(&HostPath::sys("devices/system/cpu")) {
        for c in cpus.iter().filter(|c| {
            c.strip_prefix("cpu")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        }) {
            for f in ["scaling_governor", "energy_performance_preference"] {
                read_value(root, &format!("/sys/devices/system/cpu/{c}/cpufreq/{f}"), v);
            }
        }
    }
    if let Ok(g) = root.read_attr(&HostPath::sys(
        "devices/system/cpu/cpu0/cpufreq/scaling_available_governors",
    )) {
        facts.governors_available = g.split_whitespace().map(str::to_string).collect();
    }
    if let Ok(irqs) = root.list_dir(&HostPath::proc("irq")) {
        for i in irqs {
            let Ok(n) = i.parse::<u32>() else { continue };
            let path = HostPath::proc(&format!("irq/{i}/smp_affinity_list"));
            // A managed interrupt (a queue of a multi-queue device, spread
            // over the CPUs by the kernel) has a read-only file: its
            // affinity is not the user's to move, and planning it would
            // plan it again after every apply.
            let writable = root.metadata(&path).is_ok_and(|m| {
                std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o222 != 0
            });
            if !writable {
                continue;
            }
            if let Ok(a) = root.read_attr(&path) {
                facts.irq_affinity.insert(n, a);
            }
        }
    }
    if let Ok(devs) = root.list_dir(&HostPath::sys("bus/pci/devices")) {
        for d in devs {
            for f in ["driver_override", "sriov_numvfs", "sriov_totalvfs"] {
                read_value(
                    root,
                    &format!("/sys/bus/pci/devices/{d}/{f}"),
                    &mut facts.values,
                );
            }
        }
    }
}

/// Who holds each GPU (`TuneFacts::card_holders`). Read through a root
/// that does not record: which files every process has open is no one's
/// business in a snapshot.
fn read_card_holders(root: &HostRoot, f: &mut TuneFacts) {
    use crate::host::holders::{DevNum, card_devices, holders};
    let quiet = HostRoot::at(root.base());
    let mut by_gpu: BTreeMap<String, Vec<DevNum>> = BTreeMap::new();
    for d in quiet
        .list_dir(&HostPath::sys("bus/pci/devices"))
        .unwrap_or_default()
    {
        let nvidia = quiet
            .link_name(&HostPath::sys(&format!("bus/pci/devices/{d}/driver")))
            .ok()
            .flatten()
            .is_some_and(|n| n == "nvidia");
        let devs = card_devices(&quiet, &d, nvidia);
        if !devs.is_empty() {
            by_gpu.insert(d, devs);
        }
    }
    if by_gpu.is_empty() {
        return;
    }
    let mut all: Vec<DevNum> = by_gpu.values().flatten().copied().collect();
    all.sort();
    all.dedup();
    let found = holders(&quiet, &all);
    f.holders_partial = found.unreadable > 0;
    for (gpu, devs) in by_gpu {
        let theirs = found
            .found
            .iter()
            .filter(|h| devs.contains(&h.dev))
            .cloned()
            .collect();
        f.card_holders.insert(gpu, theirs);
    }
}

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

/// Gather the facts under `root`.
pub fn gather(root: &HostRoot) -> TuneFacts {
    let mut f = TuneFacts::default();
    for p in CONFIG_FILES {
        let hp = host_path(p);
        let text = hp.as_ref().and_then(|hp| root.read_text(hp).ok());
        if text.is_none() && hp.is_some_and(|hp| root.is_file(&hp)) {
            f.unreadable.insert((*p).to_string());
        }
        f.files.insert((*p).to_string(), text);
    }
    for d in CONFIG_DIRS.iter().chain(UKI_DIRS) {
        if let Some(hp) = host_path(d)
            && let Ok(mut names) = root.list_dir(&hp)
        {
            names.sort();
            // The config files inside the drop-in folders are read too.
            if d.starts_with("/etc/") || d.ends_with("/entries") {
                for n in &names {
                    let p = format!("{d}/{n}");
                    if let Some(h) = host_path(&p)
                        && root.is_file(&h)
                    {
                        f.files.entry(p).or_insert_with(|| root.read_text(&h).ok());
                    }
                }
            }
            f.dirs.insert((*d).to_string(), names);
        }
    }
    for m in MARKERS {
        if host_path(m).is_some_and(|hp| root.exists(&hp)) {
            f.markers.insert((*m).to_string());
        }
    }
    for t in TOOLS.iter().chain(COMPOSITOR_PROGRAMS) {
        if BIN_DIRS.iter().any(|d| {
            HostPath::from_absolute(&format!("/{d}/{t}")).is_some_and(|hp| root.is_executable(&hp))
        }) {
            f.tools.insert((*t).to_string());
        }
    }
    let var = HostPath::sys(&format!("firmware/efi/efivars/LoaderInfo-{LOADER_GUID}"));
    f.loader_info = root
        .read_bytes(&var, 4096)
        .ok()
        .and_then(|b| parse_loader_info(&b));
    f.proc_cmdline = root.read_attr(&HostPath::proc("cmdline")).ok();
    f.kernel_release = root.read_attr(&HostPath::proc("sys/kernel/osrelease")).ok();
    if let Some(rel) = &f.kernel_release {
        f.kvmfr_module = ["lib", "usr/lib"].iter().any(|d| {
            HostPath::from_absolute(&format!("/{d}/modules/{rel}/modules.dep"))
                .and_then(|hp| root.read_text(&hp).ok())
                .is_some_and(|t| t.lines().any(|l| l.contains("/kvmfr.ko")))
        });
        f.vfio_builtin = ["lib", "usr/lib"].iter().any(|d| {
            HostPath::from_absolute(&format!("/{d}/modules/{rel}/modules.builtin"))
                .and_then(|hp| root.read_text(&hp).ok())
                .is_some_and(|t| t.lines().any(|l| l.ends_with("/vfio-pci.ko")))
        });
    }
    for d in UKI_DIRS {
        let names: Vec<String> = f
            .dir(d)
            .unwrap_or(&[])
            .iter()
            .filter(|n| n.ends_with(".efi"))
            .take(MAX_UKIS)
            .cloned()
            .collect();
        for n in names {
            let p = format!("{d}/{n}");
            if let Some(hp) = host_path(&p) {
                let read = crate::host::uki::read_uki(root, &hp);
                f.ukis.insert(p, read);
            }
        }
    }
    f.grubenv_blocked = grubenv_blocked(root);
    read_values(root, &mut f);
    read_card_holders(root, &mut f);
    let journal =
        super::journal::Journal::under(root.base(), super::txn::Env::default_journal(root));
    for e in journal
        .list()
        .iter()
        .filter(|e| e.state == super::journal::EntryState::Applied)
    {
        for (path, before) in &e.values {
            if path.ends_with("/nr_hugepages")
                && let Ok(n) = before.parse()
            {
                // The oldest applied transaction's before is the host's own.
                f.hugepages_before_ours.entry(path.clone()).or_insert(n);
            }
        }
    }
    f
}

/// Why GRUB cannot write its environment block, from the mount under
/// /boot/grub: btrfs, ZFS or squashfs, software RAID, LVM or an encrypted
/// volume (GRUB's own list: docs/research-grub-once.md §1.3-1.4). `None`
/// when it can, or when the mounts cannot be read.
fn grubenv_blocked(root: &HostRoot) -> Option<String> {
    let mounts = root.read_text(&HostPath::proc("mounts")).ok()?;
    let (dev, mnt, fs) = mounts
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?, w.next()?, w.next()?))
        })
        .filter(|(_, m, _)| ["/", "/boot", paths::BOOT_GRUB, paths::BOOT_GRUB2].contains(m))
        .max_by_key(|(_, m, _)| m.len())?;
    let on = format!("{mnt} ({dev}, {fs})");
    if matches!(fs, "btrfs" | "zfs" | "squashfs") {
        return Some(format!(
            "GRUB cannot write its environment block on {fs}: {on}"
        ));
    }
    if dev.starts_with("/dev/md") {
        return Some(format!(
            "GRUB cannot write its environment block on software RAID: {on}"
        ));
    }
    let dm = dev
        .strip_prefix("/dev/mapper/")
        .map(|name| {
            // The dm-N whose name this is.
            root.list_dir(&HostPath::sys("block"))
                .unwrap_or_default()
                .into_iter()
                .filter(|b| b.starts_with("dm-"))
                .find(|b| {
                    root.read_attr(&HostPath::sys(&format!("block/{b}/dm/name")))
                        .is_ok_and(|n| n == name)
                })
        })
        .unwrap_or_else(|| {
            dev.strip_prefix("/dev/")
                .filter(|d| d.starts_with("dm-"))
                .map(str::to_string)
        });
    if let Some(dm) = dm {
        let uuid = root
            .read_attr(&HostPath::sys(&format!("block/{dm}/dm/uuid")))
            .unwrap_or_default();
        let what = if uuid.starts_with("LVM-") {
            "LVM"
        } else if uuid.starts_with("CRYPT-") {
            "an encrypted volume"
        } else {
            "a device-mapper volume"
        };
        return Some(format!(
            "GRUB cannot write its environment block on {what}: {on}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_info_is_utf16_after_the_attributes() {
        let mut b = vec![6, 0, 0, 0];
        for u in "systemd-boot 255.4\0".encode_utf16() {
            b.extend_from_slice(&u.to_le_bytes());
        }
        assert_eq!(parse_loader_info(&b).as_deref(), Some("systemd-boot 255.4"));
        assert_eq!(parse_loader_info(&[6, 0, 0]), None);
        assert_eq!(parse_loader_info(&[6, 0, 0, 0, 0, 0]), None);
        // An odd byte at the end and invalid UTF-16 do not panic.
        assert_eq!(parse_loader_info(&[0, 0, 0, 0, 0x00, 0xd8, 1]), None);
    }
}
