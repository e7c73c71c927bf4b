//! Which kernel the next boot starts (the loader's default entry), for the
//! boot files the apply checks and status reads.

use super::{Loader, grub_cfg, grub_texts, grub_var, systemd_boot};
use crate::tuning::facts::TuneFacts;

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
            let default = grub_var(&grub_texts(f, ""), "GRUB_DEFAULT");
            if !(default.is_empty() || default == "0") {
                return None;
            }
            let line = crate::tuning::verify::default_kernel_lines(cfg, f.file(cfg)?)
                .into_iter()
                .next()?;
            let release = release_from_kernel_path(line.split_whitespace().nth(1)?)?;
            Some(NextBoot {
                release,
                source: format!("{cfg}: the first entry (GRUB_DEFAULT=0)"),
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
            })
        })(),
        Loader::Uki => super::uki::next_uki(f),
        _ => None,
    };
    found.or_else(|| {
        f.kernel_release.clone().map(|release| NextBoot {
            release,
            source: "the running kernel (/proc/sys/kernel/osrelease)".into(),
            ..NextBoot::default()
        })
    })
}
