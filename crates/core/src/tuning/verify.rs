//! Checking what a change did — and, after an undo, that what it added is
//! gone again. Generated boot files are checked where they were written:
//! the initramfs image by reading its archive (our own cpio reader), the
//! boot entries by their kernel lines. Only the entries the change meant to
//! change: GRUB's "(recovery mode)" entries never get
//! `GRUB_CMDLINE_LINUX_DEFAULT` by design (they are the way back), so they
//! are skipped by their menu title, as are entries without a Linux kernel
//! (memtest, firmware setup).

use super::model::Verify;
use super::tokens::missing;
use super::txn::Env;
use super::txn::steps::read_value;
use crate::sysroot::{HostPath, HostRoot};
use crate::tuning::paths;

pub fn verify_name(v: &Verify) -> String {
    match v {
        Verify::ValueIs { path, value } => format!("{path} reads {value}"),
        Verify::PagesAtLeast { path, pages } => format!("{path} >= {pages}"),
        Verify::InitramfsHas { .. } => {
            "the initramfs holds vfio_pci and the modprobe.d file".into()
        }
        Verify::BootEntriesHave { tokens, .. } => {
            format!("the boot entries hold {}", tokens.join(" "))
        }
        Verify::CmdlineHas { tokens } => {
            format!("/proc/cmdline holds {} after the reboot", tokens.join(" "))
        }
        Verify::MenuEntryHas { id, tokens, .. } => {
            format!("the boot entry '{id}' holds {}", tokens.join(" "))
        }
        Verify::DriverIs { device, driver } => format!("{device} is on {driver}"),
        Verify::DriverAfterReboot { device, driver } => format!("{device} is on {driver}"),
        Verify::Executable { path } => format!("{path} is executable"),
        Verify::Exists { path } => format!("{path} is there"),
    }
}

/// The kernel lines of the entries in a boot configuration that a change
/// of the default command line reaches: a BLS entry's `options`, grub.cfg's
/// `linux` lines outside "(recovery mode)" menu entries.
pub fn default_kernel_lines(path: &str, text: &str) -> Vec<String> {
    if path.contains("/loader/entries/") {
        return text
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with("options"))
            .map(str::to_string)
            .collect();
    }
    let mut out = Vec::new();
    // The titles of the menu entries we are inside (submenus nest).
    let mut titles: Vec<String> = Vec::new();
    for raw in text.lines() {
        let l = raw.trim();
        if l.starts_with("menuentry ") || l.starts_with("submenu ") {
            let title = l
                .split(['\'', '"'])
                .nth(1)
                .unwrap_or("")
                .to_ascii_lowercase();
            titles.push(title);
            continue;
        }
        if l == "}" {
            titles.pop();
            continue;
        }
        // The recovery entries never get the parameters (the way back), and
        // GRUB's entry of ours tried once is not a default entry: it holds
        // them until the keep removes it (boot/grub_once.rs).
        let recovery = titles.iter().any(|t| {
            t.contains("recovery mode") || t.contains("rescue") || t.starts_with("vfio assistant")
        });
        let first = l.split_whitespace().next().unwrap_or("");
        let is_linux = first == "linux" || first == "linuxefi";
        if is_linux && !recovery && !titles.is_empty() {
            out.push(l.to_string());
        }
    }
    out
}

/// The entries among `files` that lack (`want`: true) or still hold (false)
/// any of `tokens`; each as "file: line lacks/holds …".
pub fn entries_check(
    root: &HostRoot,
    files: &[String],
    tokens: &[String],
    want: bool,
) -> Vec<String> {
    let mut bad = Vec::new();
    for f in files {
        let Some(hp) = HostPath::from_absolute(f) else {
            continue;
        };
        let lines = if f.ends_with(".efi") {
            // A unified kernel image boots with its `.cmdline` section.
            match crate::host::uki::read_uki(root, &hp) {
                Ok(u) => vec![u.cmdline.unwrap_or_default()],
                Err(e) => {
                    if want {
                        bad.push(format!("{f}: {e}"));
                    }
                    continue;
                }
            }
        } else {
            let Ok(text) = root.read_text(&hp) else {
                continue;
            };
            default_kernel_lines(f, &text)
        };
        for l in lines {
            let m = missing(&l, tokens);
            let short: String = l.chars().take(90).collect();
            if want && !m.is_empty() {
                bad.push(format!("{f}: `{short}` lacks {}", m.join(" ")));
                break;
            }
            let held: Vec<&String> = tokens.iter().filter(|t| !m.contains(t)).collect();
            if !want && !held.is_empty() {
                let held: Vec<&str> = held.iter().map(|s| s.as_str()).collect();
                bad.push(format!("{f}: `{short}` still holds {}", held.join(" ")));
                break;
            }
        }
    }
    bad
}

fn release_of(image: &str) -> &str {
    let name = image.rsplit('/').next().unwrap_or("");
    if name == "initrd" {
        // systemd-boot's layout: …/<entry token>/<release>/initrd
        return image.rsplit('/').nth(1).unwrap_or("");
    }
    name.strip_prefix("initrd.img-")
        .or_else(|| {
            name.strip_prefix("initramfs-")
                .and_then(|r| r.strip_suffix(".img"))
        })
        .unwrap_or("")
}

/// For each image: what it lacks of `modules` and `files` (want: true), or
/// which of `files` it still holds (want: false). Absent images are skipped.
pub fn initramfs_check(
    root: &HostRoot,
    images: &[String],
    modules: &[String],
    files: &[String],
    want: bool,
) -> Vec<String> {
    let mut bad = Vec::new();
    for img in images {
        let Some(hp) = HostPath::from_absolute(img) else {
            continue;
        };
        if !root.exists(&hp) {
            continue;
        }
        match crate::host::initramfs::read_initramfs(root, &hp, release_of(img)) {
            Ok(info) => {
                let holds = |f: &String| {
                    info.modprobe_lines
                        .iter()
                        .any(|(p, _)| p.trim_start_matches('/') == f.as_str())
                };
                if want {
                    let has_mod = info.vfio_pci_builtin
                        || modules.iter().all(|m| {
                            info.vfio_modules
                                .iter()
                                .any(|p| p.contains(&m.replace('_', "-")) || p.contains(m.as_str()))
                        });
                    if !has_mod {
                        bad.push(format!("{img} lacks vfio_pci"));
                    } else if !files.iter().all(holds) {
                        bad.push(format!("{img} lacks the modprobe.d file"));
                    }
                } else if let Some(f) = files.iter().find(|f| holds(f)) {
                    bad.push(format!("{img} still holds {f}"));
                }
            }
            Err(e) => bad.push(format!("{img}: {e}")),
        }
    }
    bad
}

/// What the menu entry `id` of grub.cfg `file` lacks of `tokens` (want:
/// true; an absent entry lacks everything unless `absent_ok`: status after
/// a keep removed it), or still holds (want: false; an absent entry holds
/// nothing).
pub fn menu_entry_check(
    root: &HostRoot,
    file: &str,
    id: &str,
    tokens: &[String],
    want: bool,
    absent_ok: bool,
) -> Vec<String> {
    let Some(hp) = HostPath::from_absolute(file) else {
        return vec![format!("{file}: not a host path")];
    };
    let Ok(text) = root.read_text(&hp) else {
        return if want {
            vec![format!("{file} cannot be read")]
        } else {
            Vec::new()
        };
    };
    let menu = super::boot::grub_menu::menu(&text);
    let Some(e) = menu.iter().find(|e| e.id.as_deref() == Some(id)) else {
        return if want && !absent_ok {
            vec![format!("{file} has no entry '{id}'")]
        } else {
            Vec::new()
        };
    };
    let line = e.linux.as_deref().unwrap_or("");
    let m = missing(line, tokens);
    if want && !m.is_empty() {
        vec![format!("{file}: entry '{id}' lacks {}", m.join(" "))]
    } else if !want {
        vec![format!("{file} still has the entry '{id}'")]
    } else {
        Vec::new()
    }
}

/// (ok, what was seen, whether a failure undoes the transaction).
/// Whether every default entry among `files` holds `tokens`: (ok, detail,
/// fatal), as `verify` says it.
fn entries_verified(root: &HostRoot, files: &[String], tokens: &[String]) -> (bool, String, bool) {
    let lacking = entries_check(root, files, tokens, true);
    (
        lacking.is_empty(),
        if lacking.is_empty() {
            "every default boot entry holds them (recovery entries left as they are)".into()
        } else {
            lacking.join("; ")
        },
        true,
    )
}

/// `verify`, for a change that writes its boot entries itself and runs no
/// command (keeping systemd-boot's entry tried once): they are checked as
/// written, on a test tree too (nothing there waits for a generator).
pub fn verify_written(env: &Env, v: &Verify) -> (bool, String, bool) {
    match v {
        Verify::BootEntriesHave { files, tokens } if !tokens.is_empty() => {
            entries_verified(&env.root, files, tokens)
        }
        other => verify(env, other),
    }
}

pub fn verify(env: &Env, v: &Verify) -> (bool, String, bool) {
    let root = &env.root;
    match v {
        Verify::ValueIs { path, value } => {
            let got = read_value(root, path).unwrap_or_default();
            let ok = got == *value || got.contains(&format!("[{value}]"));
            (ok, format!("{path} = {got}"), true)
        }
        Verify::PagesAtLeast { path, pages } => {
            let got: u64 = read_value(root, path)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let ok = got >= *pages;
            let detail = if ok {
                format!("the kernel gave {got} pages")
            } else {
                format!(
                    "the kernel gave {got} of {pages} pages (memory too fragmented): reserve them at boot instead (hugepages=N on the kernel command line), or free memory and apply again"
                )
            };
            (ok, detail, false)
        }
        Verify::InitramfsHas {
            images,
            modules,
            files,
        } => {
            if !env.run_commands {
                return (
                    true,
                    "not checked: the rebuild did not run (--root or --dry-run)".into(),
                    false,
                );
            }
            let bad = initramfs_check(root, images, modules, files, true);
            (
                bad.is_empty(),
                if bad.is_empty() {
                    format!(
                        "{} image(s) hold vfio_pci and the modprobe.d file",
                        images.len()
                    )
                } else {
                    bad.join("; ")
                },
                true,
            )
        }
        Verify::BootEntriesHave { files, tokens } => {
            if tokens.is_empty() {
                return (true, "nothing to add".into(), false);
            }
            if !env.run_commands
                && files
                    .iter()
                    .all(|f| !f.contains("/loader/entries/vfio-assistant.conf"))
            {
                return (
                    true,
                    "not checked: the boot configuration was not regenerated (--root or --dry-run)"
                        .into(),
                    false,
                );
            }
            entries_verified(root, files, tokens)
        }
        Verify::MenuEntryHas { file, id, tokens } => {
            if !env.run_commands {
                return (
                    true,
                    "not checked: the boot configuration was not regenerated (--root or --dry-run)"
                        .into(),
                    false,
                );
            }
            let bad = menu_entry_check(root, file, id, tokens, true, false);
            (
                bad.is_empty(),
                if bad.is_empty() {
                    format!("the entry '{id}' holds them; the default entries are as they were")
                } else {
                    bad.join("; ")
                },
                true,
            )
        }
        Verify::CmdlineHas { tokens } => {
            let line = read_value(root, paths::PROC_CMDLINE).unwrap_or_default();
            let m = missing(&line, tokens);
            (
                true,
                if m.is_empty() {
                    "already in /proc/cmdline".into()
                } else {
                    "after the reboot".into()
                },
                false,
            )
        }
        Verify::DriverAfterReboot { .. } => (true, "after the reboot".into(), false),
        Verify::Executable { path } => {
            let ok = HostPath::from_absolute(path).is_some_and(|p| root.is_executable(&p));
            (
                ok,
                format!(
                    "{path}: {}",
                    if ok {
                        "executable"
                    } else {
                        "missing or not executable"
                    }
                ),
                true,
            )
        }
        Verify::Exists { path } => {
            let ok = HostPath::from_absolute(path).is_some_and(|p| root.exists(&p));
            (
                ok || !root.is_live(),
                format!("{path}: {}", if ok { "there" } else { "not there" }),
                root.is_live(),
            )
        }
        Verify::DriverIs { device, driver } => {
            let link = root
                .link_name(&HostPath::sys(&format!("bus/pci/devices/{device}/driver")))
                .ok()
                .flatten();
            let ok = link.as_deref() == Some(driver.as_str()) || !root.is_live();
            (
                ok,
                format!("{device} driver: {}", link.unwrap_or_else(|| "none".into())),
                root.is_live(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian 12's grub.cfg shape (10_linux): the default entry gets
    /// GRUB_CMDLINE_LINUX and _DEFAULT, the recovery entry only the first.
    const GRUB_CFG: &str = "\
menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-x' {
\tlinux\t/boot/vmlinuz-6.1.0-50-amd64 root=UUID=x ro console=ttyS0 quiet iommu=pt
\tinitrd\t/boot/initrd.img-6.1.0-50-amd64
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-x' {
\tmenuentry 'Debian GNU/Linux, with Linux 6.1.0-50-amd64' --class debian {
\t\tlinux\t/boot/vmlinuz-6.1.0-50-amd64 root=UUID=x ro console=ttyS0 quiet iommu=pt
\t}
\tmenuentry 'Debian GNU/Linux, with Linux 6.1.0-50-amd64 (recovery mode)' --class debian {
\t\tlinux\t/boot/vmlinuz-6.1.0-50-amd64 root=UUID=x ro single console=ttyS0
\t}
}
menuentry 'Memory test (memtest86+x64.bin)' {
\tlinux16\t/boot/memtest86+x64.bin
}
";

    #[test]
    fn recovery_and_non_linux_entries_are_not_the_default_ones() {
        let lines = default_kernel_lines("/boot/grub/grub.cfg", GRUB_CFG);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.contains("iommu=pt")));
        assert!(lines.iter().all(|l| !l.contains("single")));
    }
}
