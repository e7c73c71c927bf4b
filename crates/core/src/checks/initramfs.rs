//! `boot.initramfs_vfio`: binding a GPU to vfio-pci at boot
//! (`options vfio-pci ids=…`, `softdep amdgpu pre: vfio-pci`) happens inside
//! the initramfs, so the image must carry those lines and vfio-pci itself.
//! Compared with the image the scan read (host/initramfs.rs).

use super::model::{Finding, Status};
use crate::host::HostSnapshot;
use crate::host::initramfs::{InitramfsState, binds_at_boot};

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "initramfs",
    ids: &[super::CheckId("boot.initramfs_vfio")],
    run: Some(|s, _, out| check(s, out)),
};

const WHY: &str = "The GPU driver and vfio-pci race for the card early in boot, inside the initramfs. Your /etc/modprobe.d lines only take part if they were copied into the image, which happens only when it is rebuilt; without them (or without the vfio-pci module) the host driver takes the card and the VM cannot have it.";

const REBUILD: &str = "Rebuild the initramfs and reboot: Debian/Ubuntu `sudo update-initramfs -u -k all`; Fedora `sudo dracut -f --regenerate-all` (with `force_drivers+=\" vfio vfio_iommu_type1 vfio_pci \"` in /etc/dracut.conf.d/vfio.conf); Arch `sudo mkinitcpio -P` (with `MODULES=(vfio_pci vfio vfio_iommu_type1)` and the modconf hook in /etc/mkinitcpio.conf).";

fn norm(l: &str) -> String {
    l.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('_', "-")
}

pub fn check(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let conf: Vec<(String, String)> = s
        .system
        .modprobe
        .iter()
        .filter(|l| binds_at_boot(&[(l.file.clone(), l.line.clone())]))
        .map(|l| (l.file.clone(), l.line.clone()))
        .collect();
    let f = Finding::new("boot.initramfs_vfio", "", Status::Unknown).why(WHY);
    let f = conf
        .iter()
        .fold(f, |f, (file, line)| f.evidence(file.clone(), line.clone()));
    match &s.system.initramfs {
        InitramfsState::NotChecked => {}
        InitramfsState::NotFound { looked } => out.push(
            Finding {
                title: "No initramfs image found for the running kernel".into(),
                ..f
            }
            .evidence("looked at", if looked.is_empty() { "(kernel release unknown)".to_string() } else { looked.join(", ") })
            .fix("If this system boots a unified kernel image (systemd-boot UKI) or keeps the image elsewhere, make sure it was rebuilt after the last change to /etc/modprobe.d. ".to_string() + REBUILD),
        ),
        InitramfsState::Unreadable { image, reason } => out.push(
            Finding {
                title: format!("Could not read the initramfs {image}"),
                ..f
            }
            .evidence(image.clone(), reason.clone())
            .fix(if reason.contains("ermission") {
                "Run the check as root: the image is readable only by root on some distributions.".to_string()
            } else if reason.contains("is needed") {
                format!("Install the decompressor named above, or compare by hand: lsinitramfs / lsinitrd {image} | grep vfio")
            } else {
                format!("Compare by hand: lsinitramfs (Debian/Ubuntu) / lsinitrd (Fedora) / lsinitcpio (Arch) {image} | grep vfio")
            }),
        ),
        InitramfsState::Read(info) => {
            let inside: Vec<String> = info.modprobe_lines.iter().map(|(_, l)| norm(l)).collect();
            let missing: Vec<&(String, String)> =
                conf.iter().filter(|(_, l)| !inside.contains(&norm(l))).collect();
            let module = info
                .vfio_modules
                .iter()
                .any(|m| m.replace('_', "-").contains("vfio-pci.ko"));
            let mut f = f.evidence(
                info.image.clone(),
                format!(
                    "{} files{}{}; vfio modules: {}",
                    info.files,
                    info.compression.as_deref().map(|c| format!(", {c}")).unwrap_or_default(),
                    if info.generic_name {
                        ", a generic name: it may belong to another installed kernel"
                    } else {
                        ""
                    },
                    if info.vfio_pci_builtin {
                        "vfio-pci built into the kernel".to_string()
                    } else if info.vfio_modules.is_empty() {
                        "none".to_string()
                    } else {
                        info.vfio_modules.join(" ")
                    }
                ),
            );
            for (file, line) in &info.modprobe_lines {
                f = f.evidence(format!("{file} (in the image)"), line.clone());
            }
            if info.vfio_pci_builtin {
                // Options in modprobe.d never reach a built-in driver: only the
                // kernel command line does.
                let on_cmdline = s
                    .kernel
                    .cmdline
                    .as_ref()
                    .map(|c| c.has("vfio-pci.ids") || c.has("vfio_pci.ids"));
                f = f.evidence(
                    super::cmdline::path(),
                    match on_cmdline {
                        Some(true) => "has vfio-pci.ids".to_string(),
                        Some(false) => "no vfio-pci.ids".to_string(),
                        None => super::cmdline::seen(s),
                    },
                );
                if on_cmdline.is_none() {
                    f.status = Status::Unknown;
                    f.title = "vfio-pci is built into this kernel; whether the command line gives it ids is unknown".into();
                    f = f.fix(super::cmdline::read_it())
                .terminal(super::cmdline::SNAPSHOT);
                } else if on_cmdline == Some(true) {
                    f.status = Status::Pass;
                    f.title = "vfio-pci is built into the kernel and takes its ids from the command line".into();
                } else {
                    f.status = Status::Warn;
                    f.title = "vfio-pci is built into this kernel: `options vfio-pci ids=` in modprobe.d does not reach it".into();
                    f = f.fix("A built-in driver reads its options from the kernel command line only: add vfio-pci.ids=VENDOR:DEVICE,… (the ids from your vfio.conf) to the bootloader's kernel line and reboot.");
                }
                out.push(f);
                return;
            }
            f.status = if missing.is_empty() && module { Status::Pass } else { Status::Fail };
            f.title = match (missing.is_empty(), module) {
                (true, true) => "The initramfs carries vfio-pci and your vfio options".into(),
                (false, _) => format!(
                    "{} vfio line(s) from /etc/modprobe.d are not in the initramfs",
                    missing.len()
                ),
                (true, false) => "The initramfs has your vfio options but not the vfio-pci module".into(),
            };
            if f.status == Status::Fail {
                f = f.fix(format!("Usually the image predates the change: {REBUILD} If a rebuild does not help, the tool does not copy /etc/modprobe.d: on Arch add the modconf hook; on Fedora add install_items+=\" /etc/modprobe.d/vfio.conf \" to /etc/dracut.conf.d/vfio.conf."));
            }
            out.push(f);
        }
    }
}
