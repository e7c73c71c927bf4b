//! vfio-pci at boot: the devices going to the VM are claimed by vfio-pci
//! before their own drivers load. A modprobe.d file of ours (`options
//! vfio-pci ids=…` and a `softdep … pre: vfio-pci` for each host driver),
//! then the generator that really builds the image told to carry vfio-pci
//! (initramfs-tools' modules list, a dracut drop-in ending in `.conf`, a
//! mkinitcpio drop-in) and the image rebuilt. `vfio_virqfd` is never listed
//! on kernels from 6.2 (it was merged into vfio; dracut fails or hangs on a
//! missing module). A vfio-pci built into the kernel reads its `ids` from
//! the command line instead: that case returns the token.

use super::boot::{Generator, Loader};
use super::command::{Cmd, Edit, KernelAt, Release};
use super::facts::TuneFacts;
use super::model::{Artifact, Change, CommandStep, Effect, FileChange, Verify};
use super::paths::{
    INITRAMFS_TOOLS_MODULES as ITOOLS_MODULES, VFIO_DRACUT as DRACUT_FILE,
    VFIO_MKINITCPIO as MKINITCPIO_FILE, VFIO_MODPROBE as MODPROBE_FILE,
};
use super::vfio_address::{BIND_TOKEN, install_line, shared_ids};
use super::vfio_rebuild::NotAtBoot;
use crate::finding::Evidence;
use crate::host::HostSnapshot;
use crate::tuning::paths;

/// The host drivers that would take each kind of device first.
fn known_drivers(vendor: u16, class: u32) -> &'static [&'static str] {
    match (vendor, class >> 16) {
        (0x10de, 0x03) => &["nvidia", "nouveau"],
        (0x1002, 0x03) => &["amdgpu", "radeon"],
        (0x8086, 0x03) => &["i915", "xe"],
        (_, 0x04) => &["snd_hda_intel"],
        (_, 0x0c) => &["xhci_pci"],
        _ => &[],
    }
}

/// Kernel (major, minor) of a release string like `6.1.0-18-amd64`.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The modules the image must carry, for this kernel.
pub fn modules_for(release: Option<&str>) -> Vec<&'static str> {
    let mut m = vec!["vfio_pci", "vfio", "vfio_iommu_type1"];
    if release.and_then(kernel_version).is_some_and(|v| v < (6, 2)) {
        m.push("vfio_virqfd");
    }
    m
}

/// What binding at boot asks for: (`vendor:device` ids, host drivers to
/// go after, notes). Two identical cards cannot be told apart by ID: then
/// the set is bound by address (vfio_address.rs).
pub fn ids_and_drivers(
    snap: &HostSnapshot,
    set: &[String],
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut ids: Vec<String> = Vec::new();
    let mut drivers: Vec<String> = Vec::new();
    let notes = Vec::new();
    for a in set {
        let Some(e) = snap.device(a) else { continue };
        let d = &e.device;
        let id = format!("{}:{}", d.vendor_id, d.device_id);
        if !ids.contains(&id) {
            ids.push(id.clone());
        }
        let mut add = |drv: &str| {
            let drv = drv.replace('-', "_");
            if drv != "vfio_pci" && !drivers.contains(&drv) {
                drivers.push(drv);
            }
        };
        // The module, not the driver's name: modprobe's softdep names
        // modules (bochs-drm is the `bochs` module's driver).
        if let Some(m) = d.driver_module.as_ref().or(d.driver.as_ref()) {
            add(m);
        }
        for k in known_drivers(d.vendor_id.0, d.class.0) {
            add(k);
        }
    }
    (ids, drivers, notes)
}

fn ev(source: &str, value: impl Into<String>) -> Evidence {
    Evidence {
        source: source.into(),
        value: value.into(),
    }
}

/// Where the boot-time binding's device IDs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdsAt {
    /// `vfio_pci.ids=` on the kernel command line (the cmdline change): the
    /// boot entry is then the one switch between the old and the new setup.
    /// The modprobe.d file only orders vfio-pci before the host drivers,
    /// which claims nothing on a boot without the IDs.
    Cmdline,
    /// `options vfio-pci ids=` in the modprobe.d file, where the command
    /// line cannot be changed automatically (then it is a manual step).
    Modprobe,
}

/// The boot-time binding change, or `None` when it is all in place. A
/// built-in vfio-pci: `Err(why)`, the plan's note instead.
pub fn vfio_boot_change(
    f: &TuneFacts,
    snap: &HostSnapshot,
    generator: Generator,
    loader: Loader,
    set: &[String],
    ids_at: IdsAt,
) -> Result<Option<Change>, NotAtBoot> {
    if set.is_empty() {
        return Ok(None);
    }
    let (ids, drivers, notes) = ids_and_drivers(snap, set);
    if ids.is_empty() {
        return Ok(None);
    }
    if f.vfio_builtin {
        let twins = shared_ids(snap, set);
        return Err(if twins.is_empty() {
            NotAtBoot::Builtin
        } else {
            NotAtBoot::BuiltinTwins {
                twins: twins
                    .iter()
                    .map(|(a, _)| a.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        });
    }
    let ostree = loader == Loader::RpmOstree;
    // The modules an earlier apply ordered after vfio-pci stay: once the
    // card is on vfio-pci its host driver is no longer seen on it, and a
    // plan made then must not drop (or reorder) what keeps it there.
    let mut drivers = drivers;
    for l in f.file(MODPROBE_FILE).unwrap_or("").lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if let ["softdep", m, "pre:", "vfio-pci"] = w.as_slice()
            && !drivers.iter().any(|d| d == m)
        {
            drivers.push((*m).to_string());
        }
    }
    drivers.sort();
    let mut modprobe = String::from(
        "# Written by vfio-assistant (tune): vfio-pci takes the VM's devices at boot,\n# before their own drivers. Undo: `sudo vfio-assistant tune undo ID` (`tune list` names it;\n# it puts the initramfs back too).\n",
    );
    let twins = shared_ids(snap, set);
    let mut notes = notes;
    if twins.is_empty() {
        match ids_at {
            IdsAt::Modprobe => modprobe.push_str(&format!("options vfio-pci ids={}\n", ids.join(","))),
            IdsAt::Cmdline => modprobe.push_str(&format!(
                "# The IDs it claims are on the kernel command line ({}): a boot without them\n# loads vfio-pci first and binds nothing.\n",
                ids_token(&ids)
            )),
        }
    } else {
        let Some(line) = install_line(set, ids_at == IdsAt::Cmdline) else {
            return Ok(None);
        };
        let shared: Vec<String> = twins
            .iter()
            .map(|(a, t)| format!("{a} (as {})", t.join(", ")))
            .collect();
        modprobe.push_str(&format!(
            "# By address, not by ID: the host keeps a device with the same ID ({}).\n",
            shared.join("; ")
        ));
        if ids_at == IdsAt::Cmdline {
            modprobe.push_str(&format!(
                "# Only on a boot whose kernel command line has {BIND_TOKEN}.\n"
            ));
        }
        modprobe.push_str(&line);
        notes.push(format!(
            "Bound by address: {} has the same ID as a device the host keeps ({}), so vfio-pci.ids would take both at boot. vfio-pci takes exactly {} as it loads, before their own drivers (driver_override, written by an install line in {MODPROBE_FILE}){}.",
            twins.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>().join(", "),
            twins.iter().flat_map(|(_, t)| t.iter().map(String::as_str)).collect::<Vec<_>>().join(", "),
            set.join(", "),
            if ids_at == IdsAt::Cmdline {
                format!(", on a boot with {BIND_TOKEN} on the kernel command line")
            } else {
                String::new()
            }
        ));
    }
    for d in &drivers {
        modprobe.push_str(&format!("softdep {d} pre: vfio-pci\n"));
    }
    let mut files = Vec::new();
    let before = f.file(MODPROBE_FILE).map(str::to_string);
    if before.as_deref() != Some(modprobe.as_str()) {
        files.push(FileChange {
            path: MODPROBE_FILE.into(),
            before,
            after: Some(modprobe.clone()),
        });
    }
    let modules = modules_for(f.kernel_release.as_deref());
    // rpm-ostree builds the initramfs itself: the file is tracked into the
    // next deployment's image (`initramfs-etc`), not rebuilt with dracut.
    let generator = if ostree {
        Generator::Unknown
    } else {
        generator
    };
    let next = super::boot::next_boot(f, loader);
    let release_text = next.as_ref().map(|n| n.release.clone()).unwrap_or_default();
    // A release we cannot name as a command's parameter is none to rebuild.
    let release = Release::try_from(release_text.clone()).ok();
    let in_boot = |name: &str| f.dir("/boot").is_some_and(|d| d.iter().any(|n| n == name));
    let gen_file = generator_file(f, generator, &modules);
    // UKIs tried once: the rebuilt initramfs goes only into the image of
    // our own that the command line change builds (booted once); the
    // default image stays the old setup, whole (boot/uki.rs).
    let uki_once = loader == Loader::Uki && super::boot::uki_boot_once(f);
    // The next boot's kernel, and the running one's where it differs and
    // is installed (a boot into it gets the new parameters too).
    let running = f
        .kernel_release
        .as_deref()
        .filter(|r| Some(*r) != next.as_ref().map(|n| n.release.as_str()))
        .filter(|r| in_boot(&format!("vmlinuz-{r}")))
        .and_then(|r| Release::try_from(r.to_string()).ok());
    let releases: Vec<&Release> = release.iter().chain(running.iter()).collect();
    let (mut rebuild, images) = super::vfio_rebuild::images(f, generator, &releases, uki_once); // systemd-boot with kernel-install: the entry loads a copy of the image
    // on the ESP; kernel-install puts it there (Debian's 85-initrd copies
    // /boot/initrd.img-*, a 50-dracut plugin builds it itself).
    let mut artifacts: Vec<Artifact> = images
        .iter()
        .map(|p| Artifact {
            path: p.clone(),
            staging: None,
        })
        .collect();
    let mut checked = images.clone();
    // A unified kernel image carries its initramfs inside: kernel-install
    // builds it again from the rebuilt one (Debian's initramfs hook would
    // too; said here, not left to the hook).
    let uki =
        loader == Loader::Uki && !uki_once && next.as_ref().is_some_and(|n| n.entry.is_some());
    if let Some((n, release)) = next.as_ref().zip(release.as_ref()).filter(|(n, _)| {
        (uki || loader == Loader::SystemdBoot
            && n.entry_initrds.iter().any(|i| !images.contains(i)))
            && f.has_tool("kernel-install")
    }) {
        let builds_itself = f
            .dir(paths::USR_LIB_KERNEL_INSTALL_D)
            .is_some_and(|d| d.iter().any(|x| x.ends_with("-dracut.install")));
        if builds_itself {
            rebuild.clear();
            artifacts.clear();
        }
        let kernel = if in_boot(&format!("vmlinuz-{release_text}")) {
            KernelAt::Boot
        } else {
            KernelAt::UsrLib
        };
        rebuild.push(Cmd::KernelInstallAdd {
            release: release.clone(),
            kernel,
        });
        artifacts.extend(n.entry_initrds.iter().map(|p| Artifact {
            path: p.clone(),
            staging: None,
        }));
        artifacts.extend(n.entry.iter().map(|p| Artifact {
            path: p.clone(),
            staging: None,
        }));
        if !uki {
            checked = n.entry_initrds.clone();
        }
    }
    files.extend(gen_file);
    if files.is_empty() {
        return Ok(None);
    }
    if generator == Generator::Mkinitcpio
        && f.file(paths::ETC_MKINITCPIO_CONF).is_some_and(|t| {
            t.lines()
                .find(|l| l.trim_start().starts_with("HOOKS="))
                .is_some_and(|l| !l.contains("modconf"))
        })
    {
        notes.push("mkinitcpio.conf's HOOKS lack `modconf`: the image then carries no modprobe.d, so the ids line does not apply early. Add modconf to HOOKS.".into());
    }
    if generator == Generator::Unknown && !ostree {
        notes.push("No initramfs generator was found: the modprobe.d file applies when vfio-pci loads from the root file system, which may be after the GPU driver took the card.".into());
    }
    if let Some(n) = &next
        && !rebuild.is_empty()
    {
        notes.push(format!(
            "Rebuilt: the initramfs of {} — the kernel the next boot starts ({}){}.",
            n.release,
            n.source,
            running
                .as_ref()
                .filter(|_| matches!(generator, Generator::InitramfsTools | Generator::Dracut))
                .map(|r| format!("; and of {}, the running kernel", r.as_str()))
                .unwrap_or_default()
        ));
        if uki_once {
            notes.push("The default unified kernel image is not built again (KERNEL_INSTALL_BYPASS=1 keeps Debian's hook from it): the new initramfs goes into the image of our own the kernel command line change builds and boots once.".into());
        }
        let others: Vec<String> = other_kernels(f, &n.release)
            .into_iter()
            .filter(|k| running.as_ref().is_none_or(|r| r.as_str() != k))
            .collect();
        if !others.is_empty() {
            notes.push(format!(
                "Not rebuilt: {} — their images stay as they were until their next update. {} Undo rebuilds any image made since from the restored files.",
                others.join(", "),
                other_kernel_boot(loader)
            ));
        }
    }
    let mut verify = Vec::new();
    // What the change is for, seen only after the reboot: each device on
    // vfio-pci (status says "did not take" when its own driver won).
    verify.extend(set.iter().map(|a| Verify::DriverAfterReboot {
        device: crate::host::pci::full_address(a.trim()),
        driver: "vfio-pci".into(),
    }));
    if !rebuild.is_empty() {
        verify.push(Verify::InitramfsHas {
            images: checked,
            modules: vec!["vfio_pci".into()],
            files: vec!["etc/modprobe.d/vfio-assistant.conf".into()],
        });
    }
    let (commands, undo): (Vec<CommandStep>, Vec<CommandStep>) = if ostree {
        artifacts.clear();
        (
            vec![CommandStep::new(
                Cmd::RpmOstreeInitramfsEtc { edit: Edit::Add },
                "puts the modprobe.d file into the next deployment's initramfs",
            )],
            vec![CommandStep::new(
                Cmd::RpmOstreeInitramfsEtc { edit: Edit::Remove },
                "takes it out again",
            )],
        )
    } else {
        let c: Vec<CommandStep> = rebuild
            .into_iter()
            .map(|cmd| {
                let why = if matches!(cmd, Cmd::UpdateInitramfsOnly { .. }) {
                    "rebuilds the initramfs of the kernel the next boot starts, with vfio-pci and the modprobe.d file (in /boot only: the default unified kernel image stays as it was)"
                } else if matches!(cmd, Cmd::KernelInstallAdd { .. }) {
                    if uki {
                        "builds the unified kernel image again with the rebuilt initramfs, where systemd-boot finds it"
                    } else {
                        "puts the rebuilt image where the boot entry loads it (the ESP) and rewrites that entry as it was"
                    }
                } else {
                    "rebuilds the initramfs of the kernel the next boot starts, with vfio-pci and the modprobe.d file"
                };
                CommandStep::new(cmd, why)
            })
            .collect();
        (c.clone(), c)
    };
    Ok(Some(Change {
        id: crate::tuning::kind::ChangeId::of(crate::tuning::kind::Kind::VfioBoot),
        title: format!("vfio-pci takes {} at boot", set.join(", ")),
        why: "Bound at boot, the VM's devices never meet their host drivers: no driver to unbind, no display the host holds on to, and the card reaches the VM in a clean state. The initramfs must carry vfio-pci and this file, or the host driver wins the race.".into(),
        evidence: vec![ev("PCI IDs", ids.join(",")), ev("host drivers", drivers.join(" ")), ev("initramfs generator", generator.id())],
        fixes: vec!["device.bound".into(), "device.host_driver_first".into(), "boot.initramfs_vfio".into()],
        effect: Effect::AfterReboot,
        files,
        undo_commands: undo,
        commands,
        artifacts,
        verify,
        notes,
        ..Change::default()
    }))
}

/// The kernel parameter that hands the devices to vfio-pci at boot.
pub fn ids_token(ids: &[String]) -> String {
    format!("vfio_pci.ids={}", ids.join(","))
}

/// The generator's own configuration, telling it to carry vfio-pci.
fn generator_file(f: &TuneFacts, generator: Generator, modules: &[&str]) -> Option<FileChange> {
    match generator {
        Generator::InitramfsTools => {
            let cur = f.file(ITOOLS_MODULES).unwrap_or("");
            let have: Vec<&str> = cur
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .collect();
            let add: Vec<&str> = modules
                .iter()
                .copied()
                .filter(|m| !have.contains(m))
                .collect();
            (!add.is_empty()).then(|| {
                let mut after = cur.to_string();
                if !after.is_empty() && !after.ends_with('\n') {
                    after.push('\n');
                }
                after.push_str(
                    "# vfio-assistant: vfio-pci in the initramfs, to bind the VM's devices early\n",
                );
                for m in &add {
                    after.push_str(m);
                    after.push('\n');
                }
                FileChange {
                    path: ITOOLS_MODULES.into(),
                    before: f.file(ITOOLS_MODULES).map(str::to_string),
                    after: Some(after),
                }
            })
        }
        Generator::Dracut => {
            // dracut copies /etc/modprobe.d only when hostonly: named here,
            // the file is in every image (its softdeps, and the install line
            // that binds by address, must be there before the GPU driver).
            let want = format!(
                "# Written by vfio-assistant (tune): vfio-pci in the initramfs, to bind the VM's devices early.\nforce_drivers+=\" {} \"\ninstall_items+=\" {MODPROBE_FILE} \"\n",
                modules.join(" ")
            );
            let before = f.file(DRACUT_FILE).map(str::to_string);
            (before.as_deref() != Some(want.as_str())).then(|| FileChange {
                path: DRACUT_FILE.into(),
                before,
                after: Some(want),
            })
        }
        Generator::Mkinitcpio => {
            let want = format!(
                "# Written by vfio-assistant (tune): vfio-pci in the initramfs, to bind the VM's devices early.\nMODULES+=({})\n",
                modules.join(" ")
            );
            let before = f.file(MKINITCPIO_FILE).map(str::to_string);
            (before.as_deref() != Some(want.as_str())).then(|| FileChange {
                path: MKINITCPIO_FILE.into(),
                before,
                after: Some(want),
            })
        }
        Generator::Unknown => None,
    }
}

/// The initramfs images in /boot (each installed kernel's).
pub fn initramfs_images(f: &TuneFacts) -> Vec<String> {
    f.dir("/boot")
        .unwrap_or(&[])
        .iter()
        .filter(|n| {
            (n.starts_with("initrd.img-") || n.starts_with("initramfs-"))
                && !n.ends_with(".old-dkms")
                && !n.contains("fallback")
                && !n.contains("kdump")
        })
        .map(|n| format!("/boot/{n}"))
        .collect()
}

/// What a boot into a kernel whose image was not rebuilt gets, by loader.
/// GRUB gives every entry the same parameters, so that kernel gets
/// `vfio_pci.ids=` too and vfio-pci claims the card when the modules load
/// from the root file system, our modprobe.d ordering it first: the new
/// setup (seen on a booted GRUB-on-UEFI host, scripts/e2e two-kernels) —
/// unless that image carries the card's driver (early KMS, a boot splash),
/// which then takes the card before the root file system is there.
/// systemd-boot's entry of ours is the default kernel's alone: the others
/// keep their entries, the old setup.
fn other_kernel_boot(loader: Loader) -> &'static str {
    match loader {
        Loader::GrubDebian | Loader::GrubMkconfig | Loader::GrubBls | Loader::Kernelstub => {
            "A boot into one of them still gets the new kernel parameters (the boot loader gives them to every entry), and vfio-pci takes the card when the modules load from the root file system — the new setup — unless that image carries the card's own driver (early KMS, a boot splash): then the host driver has it, and `check` says so."
        }
        _ => {
            "A boot into one of them is the old setup for the card (its entry has no new parameters; its host driver takes the card), never half of each."
        }
    }
}

/// The other kernels installed in /boot (`vmlinuz-RELEASE`), by release.
fn other_kernels(f: &TuneFacts, next: &str) -> Vec<String> {
    f.dir("/boot")
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.strip_prefix("vmlinuz-"))
        .filter(|r| *r != next && !r.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virqfd_only_before_6_2() {
        assert!(modules_for(Some("6.1.0-18-amd64")).contains(&"vfio_virqfd"));
        assert!(!modules_for(Some("6.2.0")).contains(&"vfio_virqfd"));
        assert!(!modules_for(Some("6.18.44-fc-v857")).contains(&"vfio_virqfd"));
        assert!(!modules_for(Some("garbage")).contains(&"vfio_virqfd"));
        assert_eq!(kernel_version("5.15.0-91-generic"), Some((5, 15)));
    }
}
