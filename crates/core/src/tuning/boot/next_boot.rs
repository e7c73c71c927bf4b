//! Which kernel the next boot starts (the loader's default entry), for the
//! boot files the apply checks and status reads, and the initramfs the
//! boot-time binding rebuilds: GRUB's pending one-shot and saved default
//! (grub_menu.rs), BLS entries as blscfg and grubby order them, the
//! newest kernel with its initrd as kernelstub copies it, systemd-boot's
//! default entry and UKIs.

use super::grub_menu::{grubenv, menu, pick, version_cmp};
use super::{Loader, entries, grub_cfg, grub_texts, grub_var, systemd_boot};
use crate::tuning::facts::TuneFacts;
use crate::tuning::paths;
use std::collections::BTreeMap;

/// The kernel the next boot starts, and where that was read: the default
/// boot entry's (GRUB's first entry with `GRUB_DEFAULT=0`, systemd-boot's
/// default), else the running kernel's. Only its initramfs is rebuilt: a
/// desktop with three kernels would wait three times as long for images no
/// boot uses next (they keep their old contents; the next kernel update
/// builds its own from the new configuration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NextBoot {
    pub release: String,
    pub source: String,
    /// The default BLS entry file, when the loader reads one.
    pub entry: Option<String>,
    /// The initramfs images that entry loads, as host paths.
    pub entry_initrds: Vec<String>,
    /// The loader's choice could not be read: this is the running kernel
    /// as a guess.
    pub guessed: bool,
}

/// GRUB's environment block, where the host keeps one.
fn env_block(f: &TuneFacts) -> (Option<&'static str>, BTreeMap<String, String>) {
    for p in [paths::BOOT_GRUB_GRUBENV, paths::BOOT_GRUB2_GRUBENV] {
        if let Some(t) = f.file(p) {
            return (Some(p), grubenv(t));
        }
    }
    (None, BTreeMap::new())
}

/// What GRUB's `default` is on the next boot, and where that was read: a
/// pending `grub-reboot` first, then the saved entry or GRUB_DEFAULT.
fn grub_default(f: &TuneFacts) -> (String, String) {
    let (env_path, env) = env_block(f);
    let env_path = env_path.unwrap_or("grubenv");
    if let Some(n) = env.get("next_entry") {
        return (
            n.clone(),
            format!("{env_path}: next_entry={n} (grub-reboot, once)"),
        );
    }
    let default = grub_var(&grub_texts(f, ""), "GRUB_DEFAULT");
    match default.as_str() {
        "saved" => match env.get("saved_entry") {
            Some(s) => (
                s.clone(),
                format!("{env_path}: saved_entry={s} (GRUB_DEFAULT=saved)"),
            ),
            None => (
                "0".into(),
                format!("GRUB_DEFAULT=saved and no saved_entry in {env_path}: the first entry"),
            ),
        },
        "" | "0" => ("0".into(), "the first entry (GRUB_DEFAULT=0)".into()),
        d => (d.to_string(), format!("GRUB_DEFAULT={d}")),
    }
}

/// The BLS entry GRUB (blscfg) and grubby start: the named one, else the
/// newest by the entries' file names.
fn bls_default(f: &TuneFacts) -> Option<(String, String)> {
    let (wanted, how) = grub_default(f);
    let ents = entries(f);
    let stem = |p: &str| {
        p.rsplit('/')
            .next()
            .unwrap_or("")
            .trim_end_matches(".conf")
            .to_string()
    };
    let named = ents.iter().find(|p| stem(p) == wanted);
    let newest = || ents.iter().max_by(|a, b| version_cmp(&stem(a), &stem(b)));
    let (entry, how) = match named {
        Some(e) => (e, how),
        None => (
            newest()?,
            format!("{how}; no entry by that name, so the newest (blscfg's and grubby's order)"),
        ),
    };
    Some((entry.clone(), how))
}

fn release_from_kernel_path(p: &str) -> Option<String> {
    let name = p.rsplit('/').next()?;
    if let Some(r) = name.strip_prefix("vmlinuz-") {
        return Some(r.to_string());
    }
    // kernel-install's layout: /<entry token>/<release>/linux
    if name == "linux" {
        return p.rsplit('/').nth(1).map(str::to_string);
    }
    None
}

pub fn next_boot(f: &TuneFacts, loader: Loader) -> Option<NextBoot> {
    let found = match loader {
        Loader::GrubDebian | Loader::GrubMkconfig => (|| {
            let cfg = grub_cfg(f)?;
            let (wanted, how) = grub_default(f);
            let m = menu(f.file(cfg)?);
            let e = pick(&m, &wanted)?;
            let release = release_from_kernel_path(e.linux.as_deref()?.split_whitespace().nth(1)?)?;
            Some(NextBoot {
                release,
                source: format!("{cfg}: '{}', {how}", e.title),
                ..NextBoot::default()
            })
        })(),
        Loader::GrubBls => (|| {
            let (entry, how) = bls_default(f)?;
            let text = f.file(&entry)?;
            let linux = text.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("linux")
                    .filter(|r| r.starts_with([' ', '\t']))
            })?;
            let release = release_from_kernel_path(linux.trim())?;
            Some(NextBoot {
                release,
                source: format!("{entry}: {how}"),
                entry: Some(entry),
                ..NextBoot::default()
            })
        })(),
        Loader::Kernelstub => (|| {
            // kernelstub copies the newest /boot/vmlinuz-R that has its
            // initrd.img-R to the ESP (its Pop_OS-current entry).
            let boot = f.dir("/boot")?;
            let release = boot
                .iter()
                .filter_map(|n| n.strip_prefix("vmlinuz-"))
                .filter(|r| boot.iter().any(|n| *n == format!("initrd.img-{r}")))
                .max_by(|a, b| version_cmp(a, b))?
                .to_string();
            Some(NextBoot {
                release,
                source: "/boot: the newest kernel with its initrd, which kernelstub copies for Pop_OS-current".into(),
                ..NextBoot::default()
            })
        })(),
        Loader::SystemdBoot => (|| {
            let entry = systemd_boot::default_entry(f)?;
            let text = f.file(&entry)?;
            let esp = entry.split("/loader/entries/").next()?.to_string();
            let field = |k: &'static str| -> Vec<String> {
                text.lines()
                    .filter_map(|l| {
                        l.trim()
                            .strip_prefix(k)
                            .filter(|r| r.starts_with([' ', '\t']))
                            .map(|r| r.trim().to_string())
                    })
                    .collect()
            };
            let release = release_from_kernel_path(field("linux").first()?)?;
            let entry_initrds = field("initrd")
                .iter()
                .map(|p| format!("{esp}/{}", p.trim_start_matches('/')))
                .collect();
            Some(NextBoot {
                release,
                source: format!("{entry}: the default entry"),
                entry: Some(entry),
                entry_initrds,
                guessed: false,
            })
        })(),
        Loader::Uki => super::uki::next_uki(f),
        _ => None,
    };
    found.or_else(|| {
        f.kernel_release.clone().map(|release| NextBoot {
            release,
            source: "the running kernel (/proc/sys/kernel/osrelease): the boot loader's choice could not be read".into(),
            guessed: true,
            ..NextBoot::default()
        })
    })
}
