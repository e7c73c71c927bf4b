//! The boot path, from what booted (the `LoaderInfo` EFI variable, the files
//! and tools that are there), never from the distribution's name; and the
//! kernel command line change for it (shared/research/host-tuning-mechanics.md):
//! * GRUB with Debian's `/etc/default/grub.d`: a drop-in of ours, `update-grub`;
//! * GRUB without it (Arch): `GRUB_CMDLINE_LINUX_DEFAULT` edited, `grub-mkconfig`
//!   (both first tried once: boot/grub.rs, boot/grub_once.rs);
//! * GRUB with BLS (Fedora/RHEL): `/etc/kernel/cmdline` and `GRUB_CMDLINE_LINUX`
//!   for new kernels, `grubby --update-kernel=ALL --args` for the installed ones;
//! * systemd-boot: a new entry of ours, copied from the default one with the
//!   tokens added, booted once with `bootctl set-oneshot` (the old default stays
//!   the default until the user keeps the new one); `/etc/kernel/cmdline` for
//!   kernel-install's future entries when it is in use;
//! * Pop!_OS kernelstub: `kernelstub -a` / `-d`;
//! * rpm-ostree: `rpm-ostree kargs --append` / `--delete` (a new deployment; the
//!   old one stays in the menu);
//! * unified kernel images that kernel-install builds with ukify:
//!   `/etc/kernel/cmdline`, the next boot's image built again
//!   (`kernel-install add`), checked from its `.cmdline` (boot/uki.rs);
//! * bootc, and UKIs built otherwise (mkinitcpio presets, dracut --uefi, a
//!   signed one without its key here): exact manual steps, nothing guessed.
//!
//! One boot into the new setup before it becomes the default is offered
//! where the loader can keep the old setup as the default meanwhile: GRUB (a
//! menu entry of ours made by a script in /etc/grub.d, `grub-reboot`;
//! boot/grub_once.rs — not where GRUB cannot write its environment block),
//! systemd-boot (`bootctl set-oneshot` on our copied entry), UKIs (an image
//! of ours) and rpm-ostree (the previous deployment). Where it cannot, the
//! words go into `GRUB_CMDLINE_LINUX_DEFAULT`, which the "(recovery mode)"
//! entries do not get: those stay a known-good way back, and the recovery
//! text says where they are and how to edit an entry at the menu.

use super::command::{Cmd, Edit, Tokens};
use super::facts::TuneFacts;
use super::model::{BootInfo, Change, CommandStep, Effect, FileChange, Manual, Verify};
use super::tokens::{merge, missing, split};
use crate::finding::Evidence;
use crate::tuning::paths;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loader {
    GrubDebian,
    GrubMkconfig,
    GrubBls,
    SystemdBoot,
    Kernelstub,
    RpmOstree,
    Bootc,
    Uki,
    Unknown,
}

impl Loader {
    pub fn id(self) -> &'static str {
        match self {
            Loader::GrubDebian => "grub-debian",
            Loader::GrubMkconfig => "grub-mkconfig",
            Loader::GrubBls => "grub-bls",
            Loader::SystemdBoot => "systemd-boot",
            Loader::Kernelstub => "kernelstub",
            Loader::RpmOstree => "rpm-ostree",
            Loader::Bootc => "bootc",
            Loader::Uki => "uki",
            Loader::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generator {
    InitramfsTools,
    Dracut,
    Mkinitcpio,
    Unknown,
}

impl Generator {
    pub fn id(self) -> &'static str {
        match self {
            Generator::InitramfsTools => "initramfs-tools",
            Generator::Dracut => "dracut",
            Generator::Mkinitcpio => "mkinitcpio",
            Generator::Unknown => "unknown",
        }
    }
}

fn ev(source: &str, value: impl Into<String>) -> Evidence {
    Evidence {
        source: source.into(),
        value: value.into(),
    }
}

/// The value of a shell assignment `NAME=…` in a GRUB defaults file, with
/// `$NAME` / `${NAME}` expanded from `prev` (what earlier files set).
fn assignment<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.trim().strip_prefix(name)?.strip_prefix('=')?;
    let rest = rest.trim();
    let unq = rest
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        .unwrap_or(rest);
    Some(unq)
}

/// The effective value of a GRUB variable after sourcing `texts` in order,
/// as grub-mkconfig does (main file, then grub.d/*.cfg sorted).
pub fn grub_var(texts: &[&str], name: &str) -> String {
    let mut value = String::new();
    for t in texts {
        for line in t.lines() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            if let Some(v) = assignment(line, name) {
                value = v
                    .replace(&format!("${{{name}}}"), &value)
                    .replace(&format!("${name}"), &value);
            }
        }
    }
    value.trim().to_string()
}

/// The GRUB default files in sourcing order, without `skip` (our drop-in).
fn grub_texts<'a>(f: &'a TuneFacts, skip: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = f.file(paths::ETC_DEFAULT_GRUB).into_iter().collect();
    if let Some(names) = f.dir(paths::ETC_DEFAULT_GRUB_D) {
        for n in names.iter().filter(|n| n.ends_with(".cfg")) {
            let p = format!("/etc/default/grub.d/{n}");
            if p != skip
                && let Some(t) = f.file(&p)
            {
                out.push(t);
            }
        }
    }
    out
}

fn grub_cfg(f: &TuneFacts) -> Option<&'static str> {
    [paths::BOOT_GRUB_GRUB_CFG, paths::BOOT_GRUB2_GRUB_CFG]
        .into_iter()
        .find(|p| f.file(p).is_some())
}

/// Entries folders of a BLS loader, with their `.conf` files.
fn entries(f: &TuneFacts) -> Vec<String> {
    let mut out = Vec::new();
    for d in [
        paths::BOOT_LOADER_ENTRIES,
        paths::BOOT_EFI_LOADER_ENTRIES,
        paths::EFI_LOADER_ENTRIES,
    ] {
        if let Some(names) = f.dir(d) {
            out.extend(
                names
                    .iter()
                    .filter(|n| n.ends_with(".conf"))
                    .map(|n| format!("{d}/{n}")),
            );
        }
    }
    out
}

/// Which loader booted and how its command line is set.
pub fn detect_loader(f: &TuneFacts) -> (Loader, Vec<Evidence>) {
    let mut e = Vec::new();
    if let Some(li) = &f.loader_info {
        e.push(ev("LoaderInfo EFI variable", li.clone()));
    }
    if f.markers.contains(paths::RUN_OSTREE_BOOTED) {
        e.push(ev(paths::RUN_OSTREE_BOOTED, "present"));
        if f.has_tool("bootc") && f.dir(paths::USR_LIB_BOOTC).is_some() {
            e.push(ev(paths::USR_LIB_BOOTC, "present"));
            return (Loader::Bootc, e);
        }
        return (Loader::RpmOstree, e);
    }
    if f.file(paths::ETC_KERNELSTUB_CONFIGURATION).is_some() {
        e.push(ev(paths::ETC_KERNELSTUB_CONFIGURATION, "present"));
        return (Loader::Kernelstub, e);
    }
    let li = f.loader_info.as_deref().unwrap_or("").to_ascii_lowercase();
    let install_conf = f.file(paths::ETC_KERNEL_INSTALL_CONF).unwrap_or("");
    let uki_layout = install_conf
        .lines()
        .any(|l| l.trim().replace(' ', "") == "layout=uki");
    let ukis = super::facts::UKI_DIRS.iter().any(|d| {
        f.dir(d)
            .is_some_and(|n| n.iter().any(|x| x.ends_with(".efi")))
    });
    if li.contains("systemd-boot") {
        if uki_layout || (ukis && entries(f).is_empty()) {
            e.push(ev(
                "UKI",
                if uki_layout {
                    "layout=uki in /etc/kernel/install.conf"
                } else {
                    "EFI/Linux/*.efi, no entries"
                },
            ));
            return (Loader::Uki, e);
        }
        return (Loader::SystemdBoot, e);
    }
    let cmdline = f.proc_cmdline.as_deref().unwrap_or("");
    let grub_booted = li.contains("grub") || cmdline.contains("BOOT_IMAGE=");
    if grub_booted || (f.loader_info.is_none() && grub_cfg(f).is_some()) {
        if cmdline.contains("BOOT_IMAGE=") {
            e.push(ev(paths::PROC_CMDLINE, "BOOT_IMAGE= (set by GRUB)"));
        }
        let bls = grub_var(&grub_texts(f, ""), "GRUB_ENABLE_BLSCFG") == "true";
        if bls && !entries(f).is_empty() {
            e.push(ev(
                paths::ETC_DEFAULT_GRUB,
                "GRUB_ENABLE_BLSCFG=true, /boot/loader/entries",
            ));
            return (Loader::GrubBls, e);
        }
        if f.dir(paths::ETC_DEFAULT_GRUB_D).is_some() && f.has_tool("update-grub") {
            e.push(ev(paths::ETC_DEFAULT_GRUB_D, "present, with update-grub"));
            return (Loader::GrubDebian, e);
        }
        if let Some(c) = grub_cfg(f) {
            e.push(ev(c, "present"));
        }
        return (Loader::GrubMkconfig, e);
    }
    if !entries(f).is_empty() && f.has_tool("bootctl") {
        e.push(ev(paths::BOOT_LOADER_ENTRIES, "BLS entries, bootctl"));
        return (Loader::SystemdBoot, e);
    }
    (Loader::Unknown, e)
}

/// Which generator builds the initramfs: the installed package where the
/// package list says, else the tool that is there.
pub fn detect_generator(f: &TuneFacts) -> (Generator, Vec<Evidence>) {
    let m = |p: &str| f.markers.contains(p);
    if f.has_tool("mkinitcpio") {
        return (Generator::Mkinitcpio, vec![ev("mkinitcpio", "installed")]);
    }
    if m(paths::VAR_LIB_DPKG_INFO_DRACUT_LIST) || m(paths::VAR_LIB_DPKG_INFO_DRACUT_CORE_LIST) {
        return (
            Generator::Dracut,
            vec![ev("/var/lib/dpkg/info", "dracut installed")],
        );
    }
    if m(paths::VAR_LIB_DPKG_INFO_INITRAMFS_TOOLS_LIST) {
        return (
            Generator::InitramfsTools,
            vec![ev("/var/lib/dpkg/info", "initramfs-tools installed")],
        );
    }
    if f.has_tool("dracut") {
        return (Generator::Dracut, vec![ev("dracut", "installed")]);
    }
    if f.has_tool("update-initramfs") {
        return (
            Generator::InitramfsTools,
            vec![ev("update-initramfs", "installed")],
        );
    }
    (Generator::Unknown, Vec::new())
}

pub fn boot_info(f: &TuneFacts) -> (Loader, Generator, BootInfo) {
    let (loader, mut e) = detect_loader(f);
    let (generator, e2) = detect_generator(f);
    e.extend(e2);
    let recovery = recovery(f, loader);
    (
        loader,
        generator,
        BootInfo {
            loader: loader.id().into(),
            initramfs: generator.id().into(),
            evidence: e,
            recovery,
        },
    )
}

/// On systemd-boot and GRUB, when the plan writes the default entry or image itself
/// (keeping the one tried once, or where kernel-install counts boots)
/// rather than an entry of its own booted once: how to get back then.
pub fn recovery_in_place(l: Loader) -> Option<String> {
    let undo = "Once booted, `sudo vfio-assistant tune undo --last` restores every file.";
    match l {
        Loader::SystemdBoot => Some(format!(
            "The parameters go into the default entry itself: if it does not come up, hold Space while the machine starts, press e on the entry in systemd-boot's menu, delete the added words and press Enter (or choose another kernel's entry). {undo}"
        )),
        Loader::Uki => Some(format!(
            "The default image is built again in place: if it does not come up, hold Space while the machine starts and choose another image in systemd-boot's menu (the one tried once, where it stays, or another kernel's). {undo}"
        )),
        Loader::GrubDebian | Loader::GrubMkconfig => Some(grub_in_place(undo)),
        _ => None,
    }
}

/// GRUB's default entries themselves get the parameters (a keep, or where
/// GRUB cannot boot an entry once): how to get back then.
fn grub_in_place(undo: &str) -> String {
    format!(
        "If it does not boot: in the GRUB menu (hold Shift, or press Esc, while the machine starts) choose 'Advanced options' and the '(recovery mode)' entry, which does not get these parameters; or press e on the first entry, delete the added words from the line starting with 'linux', and press Ctrl-X. {undo}"
    )
}

/// When the plan changes no kernel command line (no entry of ours, nothing
/// booted once), only the next boot's initramfs: how to get back then.
pub fn recovery_initramfs_only(l: Loader) -> Option<String> {
    let undo = "Once booted, `sudo vfio-assistant tune undo --last` restores every file and rebuilds the image.";
    match l {
        Loader::GrubDebian | Loader::GrubMkconfig | Loader::GrubBls => Some(format!(
            "No boot entry is added: the next boot's initramfs is rebuilt in place. If it does not come up, choose another kernel's entry in the GRUB menu (hold Shift, or press Esc, while the machine starts: 'Advanced options'), whose image is as it was. {undo}"
        )),
        Loader::SystemdBoot | Loader::Uki | Loader::Kernelstub => Some(format!(
            "No boot entry is added: the next boot's initramfs is rebuilt in place. If it does not come up, hold Space while the machine starts and choose another kernel's entry in systemd-boot's menu, whose image is as it was. {undo}"
        )),
        Loader::RpmOstree | Loader::Bootc | Loader::Unknown => None,
    }
}

/// How to get back if the new setup does not boot, in plain words.
fn recovery(f: &TuneFacts, l: Loader) -> String {
    let undo = "Once booted, `sudo vfio-assistant tune undo --last` restores every file.";
    let grub = matches!(l, Loader::GrubDebian | Loader::GrubMkconfig);
    if grub && grub_once::once_blocked(f).is_none() {
        return format!(
            "The new entry ('VFIO Assistant: the new setup, booted once') is booted once only: if it does not come up (no screen, no boot), power the machine off and on and GRUB starts the old default as before, with nothing to undo. After a good boot, keep it: the Tuning page's Keep button (`sudo vfio-assistant tune keep`) gives the default entries the parameters, journaled and undone like this change; until then the next reboot starts the old default again (`tune status` says so). {undo}"
        );
    }
    match l {
        Loader::GrubDebian | Loader::GrubMkconfig => grub_in_place(undo),
        Loader::GrubBls => format!("If it does not boot: in the GRUB menu press e on the entry, delete the added words from the 'options' (or 'linux') line, and press Ctrl-X. {undo}"),
        Loader::SystemdBoot => format!("The new entry is booted once only: if it does not come up, just power-cycle and the old default starts as before. After a good boot, keep it: the Tuning page's Keep button (`vfio-assistant tune keep`) writes the parameters into the default entry, journaled and undone like this change; until then the next reboot starts the old default again (`tune status` says so). {undo}"),
        Loader::Kernelstub => format!("If it does not boot: in the systemd-boot menu (hold Space while the machine starts) press e on 'Pop!_OS' and delete the added words, then Enter. {undo}"),
        Loader::RpmOstree => "If it does not boot: choose the previous deployment in the boot menu (the second entry), then `rpm-ostree rollback`.".into(),
        Loader::Uki => format!("The new unified kernel image (vfio-assistant-RELEASE.efi) is booted once only: if it does not come up, just power-cycle and the old default image starts as before. After a good boot, keep it: the Tuning page's Keep button (`vfio-assistant tune keep`) builds the default image with the new parameters, journaled and undone like this change; until then the next reboot starts the old image again (`tune status` says so). (Where kernel-install counts boots, /etc/kernel/tries, the default image is built again in place: choose another kernel in systemd-boot's menu, hold Space, if it does not boot.) {undo}"),
        Loader::Bootc | Loader::Unknown => "Nothing is changed automatically on this boot path.".into(),
    }
}

/// The kernel command line change adding `tokens` (those the configuration
/// lacks), or manual steps where nothing can be changed safely.
pub fn cmdline_change(
    f: &TuneFacts,
    loader: Loader,
    tokens: &[String],
) -> Result<Option<Change>, Manual> {
    let base = Change {
        id: crate::tuning::kind::ChangeId::of(crate::tuning::kind::Kind::Cmdline),
        why: "Kernel parameters take effect only at boot: they are written into the boot configuration, checked in the generated boot entries before the boot can see them, and active after a reboot.".into(),
        effect: Effect::AfterReboot,
        ..Change::default()
    };
    let title = |t: &[String]| format!("Kernel parameters: {}", t.join(" "));
    match loader {
        Loader::GrubDebian | Loader::GrubMkconfig => grub::grub_cmdline(f, loader, tokens, base),
        Loader::GrubBls => {
            let ents = entries(f);
            let current: Vec<&str> = ents.iter().filter_map(|p| f.file(p)).collect();
            let opts: String = current.iter().flat_map(|t| t.lines()).filter_map(|l| l.strip_prefix("options")).collect::<Vec<_>>().join(" ");
            let kc = f.file(paths::ETC_KERNEL_CMDLINE);
            let base_line = kc.map(str::to_string).unwrap_or_else(|| strip_boot_words(f.proc_cmdline.as_deref().unwrap_or("")));
            let add_entries = missing(&opts, tokens);
            let add_kc = missing(&base_line, tokens);
            let main = f.file(paths::ETC_DEFAULT_GRUB).unwrap_or("");
            let add_grub = missing(&grub_var(&[main], "GRUB_CMDLINE_LINUX"), tokens);
            if add_entries.is_empty() && add_kc.is_empty() && add_grub.is_empty() {
                return Ok(None);
            }
            let mut files = Vec::new();
            if !add_kc.is_empty() {
                files.push(FileChange { path: paths::ETC_KERNEL_CMDLINE.into(), before: kc.map(str::to_string), after: Some(format!("{}\n", merge(base_line.trim(), &add_kc))) });
            }
            if !add_grub.is_empty() && !main.is_empty() {
                files.push(FileChange { path: paths::ETC_DEFAULT_GRUB.into(), before: Some(main.into()), after: Some(set_grub_var(main, "GRUB_CMDLINE_LINUX", &add_grub)) });
            }
            let mut commands = Vec::new();
            let mut undo = Vec::new();
            if !add_entries.is_empty() {
                let t = checked_tokens(&add_entries)?;
                commands.push(CommandStep::new(Cmd::Grubby { edit: Edit::Add, tokens: t.clone() }, "adds the parameters to every installed kernel's boot entry"));
                undo.push(CommandStep::new(Cmd::Grubby { edit: Edit::Remove, tokens: t }, "removes them again"));
            }
            let mut all = add_entries.clone();
            for t in add_kc.iter().chain(&add_grub) {
                if !all.contains(t) {
                    all.push(t.clone());
                }
            }
            Ok(Some(Change {
                title: title(&all),
                evidence: vec![ev("options in /boot/loader/entries", opts.trim()), ev(paths::ETC_KERNEL_CMDLINE, base_line.trim())],
                files,
                commands,
                undo_commands: undo,
                verify: vec![Verify::BootEntriesHave { files: ents, tokens: add_entries }],
                notes: vec!["A kernel update before the reboot keeps the parameters: new kernels take them from /etc/kernel/cmdline (rhboot/grubby#55).".into()],
                ..base
            }))
        }
        Loader::SystemdBoot => systemd_boot(f, tokens, base),
        Loader::Kernelstub => {
            let cfg = f.file(paths::ETC_KERNELSTUB_CONFIGURATION).unwrap_or("");
            let have = kernelstub_options(cfg);
            let add = missing(&have, tokens);
            if add.is_empty() {
                return Ok(None);
            }
            let t = checked_tokens(&add)?;
            Ok(Some(Change {
                title: title(&add),
                evidence: vec![ev("/etc/kernelstub/configuration kernel_options", have)],
                commands: vec![CommandStep::new(Cmd::Kernelstub { edit: Edit::Add, tokens: t.clone() }, "adds them to kernelstub's configuration and rewrites the Pop_OS-current entry")],
                undo_commands: vec![CommandStep::new(Cmd::Kernelstub { edit: Edit::Remove, tokens: t }, "removes them again")],
                verify: vec![Verify::BootEntriesHave { files: vec!["/boot/efi/loader/entries/Pop_OS-current.conf".into()], tokens: add }],
                notes: vec!["Pop_OS-oldkern gets the new parameters too, so it is no fallback for this change: see the recovery below.".into()],
                ..base
            }))
        }
        Loader::RpmOstree => {
            let add = missing(f.proc_cmdline.as_deref().unwrap_or(""), tokens);
            if add.is_empty() {
                return Ok(None);
            }
            let t = checked_tokens(&add)?;
            Ok(Some(Change {
                title: title(&add),
                evidence: vec![ev(paths::PROC_CMDLINE, f.proc_cmdline.clone().unwrap_or_default())],
                commands: vec![CommandStep::new(Cmd::RpmOstreeKargs { edit: Edit::Add, tokens: t.clone() }, "stages a new deployment with the parameters; the current one stays in the boot menu")],
                undo_commands: vec![CommandStep::new(Cmd::RpmOstreeKargs { edit: Edit::Remove, tokens: t }, "stages a deployment without them")],
                verify: vec![Verify::CmdlineHas { tokens: add }],
                ..base
            }))
        }
        Loader::Bootc => Err(Manual {
            id: crate::tuning::kind::ChangeId::of(crate::tuning::kind::Kind::Cmdline),
            title: format!("Kernel parameters on a bootc system: {}", tokens.join(" ")),
            why: "An image-based (bootc) host takes kernel arguments from its image or from bootc itself; editing /etc does nothing.".into(),
            steps: vec![
                format!("In the image: add /usr/lib/bootc/kargs.d/90-vfio.toml with kargs = [{}], rebuild and `bootc upgrade`.", tokens.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(", ")),
                format!("Or on this host (newer bootc): `sudo bootc loader-entries set-options-for-source --source vfio-assistant --options \"{}\"`.", tokens.join(" ")),
            ],
        }),
        Loader::Uki => uki::uki_change(f, tokens, base),
        Loader::Unknown => Err(manual_cmdline(tokens, "the boot loader could not be told (no LoaderInfo EFI variable, no GRUB or systemd-boot configuration found)")),
    }
}

/// The parameters as a command's checked parameter (every one is from the
/// closed set the planner makes; one that is not is a manual step).
fn checked_tokens(t: &[String]) -> Result<Tokens, Manual> {
    Tokens::try_from(t.to_vec()).map_err(|why| manual_cmdline(t, &why.to_string()))
}

fn manual_cmdline(tokens: &[String], why: &str) -> Manual {
    Manual {
        id: crate::tuning::kind::ChangeId::of(crate::tuning::kind::Kind::Cmdline),
        title: format!("Kernel parameters: {}", tokens.join(" ")),
        why: format!("Not changed automatically: {why}."),
        steps: vec![
            format!(
                "Add these words to your boot loader's kernel command line and reboot: {}",
                tokens.join(" ")
            ),
            "After the reboot, `vfio-assistant tune status` checks /proc/cmdline.".into(),
        ],
    }
}

/// `/proc/cmdline` without the words a loader adds itself.
fn strip_boot_words(line: &str) -> String {
    split(line)
        .into_iter()
        .filter(|t| {
            !t.starts_with("BOOT_IMAGE=")
                && !t.starts_with("initrd=")
                && !t.starts_with("systemd.machine_id=")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `NAME="…"` in a GRUB defaults file with `add` merged into its value; the
/// line is appended when the file has none.
pub fn set_grub_var(text: &str, name: &str, add: &[String]) -> String {
    let mut out = String::new();
    let mut done = false;
    for line in text.split_inclusive('\n') {
        if !done
            && !line.trim_start().starts_with('#')
            && let Some(v) = assignment(line.trim_end_matches('\n'), name)
        {
            out.push_str(&format!("{name}=\"{}\"\n", merge(v, add)));
            done = true;
            continue;
        }
        out.push_str(line);
    }
    if !done {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("{name}=\"{}\"\n", add.join(" ")));
    }
    out
}

/// The `kernel_options` of kernelstub's JSON configuration (`user` first).
fn kernelstub_options(json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let pick = |k: &str| {
        v.get(k)
            .and_then(|u| u.get("kernel_options"))
            .and_then(|o| o.as_array())
            .cloned()
    };
    pick("user")
        .or_else(|| pick("default"))
        .unwrap_or_default()
        .iter()
        .filter_map(|x| x.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

mod grub;
pub(crate) mod grub_menu;
pub mod grub_once;
mod next_boot;
mod systemd_boot;
mod uki;

pub use next_boot::{NextBoot, next_boot};
use systemd_boot::systemd_boot;
pub use uki::boot_once_here as uki_boot_once;

#[cfg(test)]
mod tests;
