//! What the tuning planner reads from a host, gathered once through a
//! `HostRoot` (so a captured tree or a test root plans exactly like the
//! live host): the boot configuration files and folders, which tools are
//! installed, the loader that booted (the `LoaderInfo` EFI variable), and
//! the runtime values the changes would write. Planning is then a pure
//! function of these facts and the host snapshot.

mod reads;

pub use reads::{
    COMPOSITOR_PROGRAMS, CONFIG_DIRS, CONFIG_FILES, MARKERS, TOOLS, UKI_DIRS, files_read,
};

use crate::sysroot::{HostPath, HostRoot};
use crate::tuning::paths;
use reads::{BIN_DIRS, MAX_UKIS};
use std::collections::{BTreeMap, BTreeSet};

/// The systemd Boot Loader Interface's vendor GUID (systemd.io/BOOT_LOADER_INTERFACE).
const LOADER_GUID: &str = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";

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
        self.file(paths::ETC_PASSWD)?.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id: u32 = f.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_string())
        })
    }

    /// Whether `name` is a user of the host with a uid of a person (1000+).
    pub fn is_person(&self, name: &str) -> bool {
        self.file(paths::ETC_PASSWD).is_some_and(|t| {
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
    read_value(root, paths::KVMFR_REFCNT, v);
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

/// Gather the facts under `root`.
pub fn gather(root: &HostRoot) -> TuneFacts {
    let mut f = TuneFacts::default();
    for p in files_read() {
        let hp = host_path(p);
        let text = hp.as_ref().and_then(|hp| root.read_text(hp).ok());
        if text.is_none() && hp.is_some_and(|hp| root.is_file(&hp)) {
            f.unreadable.insert(p.to_string());
        }
        f.files.insert(p.to_string(), text);
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

    #[test]
    fn every_file_a_kind_may_write_is_read_once() {
        let read: Vec<&str> = files_read().collect();
        for k in super::super::kind::KINDS {
            for f in k.files.iter().filter(|f| !f.contains('*')) {
                assert!(read.contains(f), "{} writes {f}, which is not read", k.name);
                assert!(
                    !CONFIG_FILES.contains(f),
                    "{f}: named in its kind's line, not here too"
                );
            }
        }
        let once: BTreeSet<&str> = read.iter().copied().collect();
        assert_eq!(once.len(), read.len(), "each file read once");
    }
}
