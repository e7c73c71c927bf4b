//! Unified kernel images. Where kernel-install builds them with ukify
//! (`layout=uki` in /etc/kernel/install.conf, its 60-ukify plugin), the
//! click does what a kernel update does, into an image of its own: the
//! parameters go into `/etc/kernel/cmdline`, and `kernel-install
//! --entry-token=literal:vfio-assistant add` builds the kernel the next
//! boot starts as `EFI/Linux/vfio-assistant-RELEASE.efi` (with that
//! kernel's rebuilt initramfs; ukify signs it when uki.conf names the key),
//! which systemd-boot boots once (`bootctl set-oneshot`). The default image
//! is never written: a failed first boot or a power cut at any moment
//! leaves the old setup whole, the next power-on starts it. The new image
//! is checked by reading the command line out of its `.cmdline` section
//! (host/uki.rs), as the firmware will; undo removes it. Where
//! kernel-install counts boots (/etc/kernel/tries) the default image is
//! built again in place instead, the old one kept by the journal. Once
//! our image has booted well, the same request keeps it: the default image
//! is built in place the same way (our image stays beside it until undo).
//! Elsewhere (mkinitcpio presets, dracut --uefi, a signed image whose key
//! this host does not hold): exact manual steps, with what each UKI boots
//! with now.

use super::super::command::{KernelAt, Release, UKI_TOKEN, our_uki};
use super::next_boot::NextBoot;
use super::*;
use crate::host::uki::Uki;
use crate::tuning::paths;

/// Where kernel-install's plugins are (a file in /etc replaces its
/// namesake in /usr/lib).
const PLUGIN_DIRS: [&str; 2] = [paths::ETC_KERNEL_INSTALL_D, paths::USR_LIB_KERNEL_INSTALL_D];

/// Whether kernel-install runs a plugin named `*suffix`: one in /usr/lib
/// or /etc, unless /etc masks it (a symlink to /dev/null, which is not
/// read as a file, or an empty file of the same name).
fn plugin(f: &TuneFacts, suffix: &str) -> bool {
    let [etc, lib] = PLUGIN_DIRS;
    let named = |d: &str| -> Vec<String> {
        f.dir(d)
            .map(|n| n.iter().filter(|x| x.ends_with(suffix)).cloned().collect())
            .unwrap_or_default()
    };
    let in_etc = named(etc);
    let runs_in_etc = |n: &String| {
        f.file(&format!("{etc}/{n}"))
            .is_some_and(|t| !t.trim().is_empty())
    };
    in_etc.iter().any(runs_in_etc) || named(lib).iter().any(|n| !in_etc.contains(n))
}

/// A key ukify signs with (`SecureBootPrivateKey=` in uki.conf), or sbctl's
/// kernel-install plugin, which signs every image it installs.
fn signs_itself(f: &TuneFacts) -> bool {
    let conf = [paths::ETC_KERNEL_UKI_CONF, paths::USR_LIB_KERNEL_UKI_CONF]
        .iter()
        .find_map(|p| f.file(p))
        .unwrap_or("");
    conf.lines().any(|l| {
        l.trim_start()
            .strip_prefix("SecureBootPrivateKey")
            .is_some_and(|r| {
                r.trim_start().starts_with('=') && !r.trim_start()[1..].trim().is_empty()
            })
    }) || plugin(f, "-sbctl.install")
}

/// The readable UKIs that name their kernel, by path (ours, built for a
/// boot once, left out).
fn readable(f: &TuneFacts) -> Vec<(&String, &Uki, &str)> {
    let ours = format!("/{UKI_TOKEN}-");
    f.ukis
        .iter()
        .filter(|(p, _)| !p.contains(&ours))
        .filter_map(|(p, r)| {
            let u = r.as_ref().ok()?;
            let release = u.uname.as_deref()?.trim();
            (!release.is_empty()).then_some((p, u, release))
        })
        .collect()
}

/// The image systemd-boot starts next: the one loader.conf's `default`
/// names, else the newest kernel's (systemd-boot sorts these images newest
/// version first). `None` when no UKI names its kernel.
pub(super) fn next_uki(f: &TuneFacts) -> Option<NextBoot> {
    let ukis = readable(f);
    let default = systemd_boot::loader_default(f);
    let named = ukis.iter().find(|(p, ..)| {
        !default.is_empty()
            && p.rsplit('/')
                .next()
                .is_some_and(|n| systemd_boot::glob_match(&default, n))
    });
    let (path, _, release, why) = match named {
        Some((p, u, r)) => (p, u, r, "loader.conf's default"),
        None => {
            let (p, u, r) = ukis
                .iter()
                .max_by(|a, b| version_cmp(a.2, b.2).then_with(|| a.0.cmp(b.0)))?;
            (p, u, r, "the newest kernel's image, systemd-boot's default")
        }
    };
    Some(NextBoot {
        release: release.to_string(),
        source: format!("{path}: {why}"),
        entry: Some(path.to_string()),
        entry_initrds: Vec::new(),
        guessed: false,
    })
}

/// Kernel releases compared as systemd-boot does, number runs by value
/// (for kernel releases the same order as rpm's, grub_menu.rs).
use super::grub_menu::version_cmp;

/// The image the click builds again, where it can: kernel-install with
/// `layout=uki` and its ukify plugin, the next boot's image readable, and
/// a signed one only where ukify (or sbctl) signs.
struct Target<'a> {
    path: String,
    now: &'a Uki,
    release: Release,
    kernel: KernelAt,
}

fn target(f: &TuneFacts) -> Option<Target<'_>> {
    let layout_uki = f
        .file(paths::ETC_KERNEL_INSTALL_CONF)
        .is_some_and(|t| t.lines().any(|l| l.trim().replace(' ', "") == "layout=uki"));
    if !(layout_uki && f.has_tool("kernel-install") && plugin(f, "-ukify.install")) {
        return None;
    }
    let next = next_uki(f)?;
    let path = next.entry?;
    let now = f.ukis.get(&path)?.as_ref().ok()?;
    if now.signed && !signs_itself(f) {
        return None;
    }
    let release = Release::try_from(next.release).ok()?;
    let in_boot = f.dir("/boot").is_some_and(|d| {
        d.iter()
            .any(|n| *n == format!("vmlinuz-{}", release.as_str()))
    });
    let kernel = if in_boot {
        KernelAt::Boot
    } else {
        KernelAt::UsrLib
    };
    Some(Target {
        path,
        now,
        release,
        kernel,
    })
}

/// Whether the click builds an image of its own, booted once, here: then
/// the rebuilt initramfs goes only into that image (vfio_boot.rs), and
/// the default image is left as it was. Not where kernel-install counts
/// boots (/etc/kernel/tries: the image's name changes as it is tried) or
/// bootctl is missing.
pub fn boot_once_here(f: &TuneFacts) -> bool {
    f.file(paths::ETC_KERNEL_TRIES).is_none() && f.has_tool("bootctl") && target(f).is_some()
}

/// The click where kernel-install builds the UKIs with ukify; `Err` with
/// the manual steps where it cannot be done safely here.
pub(super) fn uki_change(
    f: &TuneFacts,
    tokens: &[String],
    base: Change,
) -> Result<Option<Change>, Manual> {
    let Some(Target {
        path,
        now,
        release,
        kernel,
    }) = target(f)
    else {
        return Err(uki_manual(f, tokens));
    };
    let boots_with = now.cmdline.clone().unwrap_or_default();
    let add = missing(&boots_with, tokens);
    let kc = f.file(paths::ETC_KERNEL_CMDLINE);
    // Without the file, kernel-install takes /proc/cmdline; the image's own
    // line is what this kernel boots with now, the better base (less the
    // systemd.machine_id= ukify adds by itself).
    let base_line = kc.map(str::to_string).unwrap_or_else(|| {
        if now.cmdline.is_some() {
            strip_boot_words(&boots_with)
        } else {
            strip_boot_words(f.proc_cmdline.as_deref().unwrap_or(""))
        }
    });
    let add_kc = missing(&base_line, tokens);
    let dir = path
        .rsplit_once('/')
        .map_or(paths::BOOT_EFI_EFI_LINUX, |(d, _)| d);
    let ours = format!("{dir}/{}", our_uki(&release));
    let once = boot_once_here(f);
    // Done when the file holds them and the image the next boot may start
    // does: the default one, or (tried once) ours.
    let ours_holds = f
        .ukis
        .get(&ours)
        .and_then(|r| r.as_ref().ok())
        .is_some_and(|u| missing(u.cmdline.as_deref().unwrap_or(""), tokens).is_empty());
    // Ours booted well (this boot holds every token the default image
    // lacks): the same request keeps it, building the default image the
    // same way, in place.
    let booted = f.proc_cmdline.as_deref().unwrap_or("");
    let keep = once && ours_holds && !add.is_empty() && missing(booted, &add).is_empty();
    if add_kc.is_empty() && (add.is_empty() || (once && ours_holds && !keep)) {
        return Ok(None);
    }
    let files = if add_kc.is_empty() {
        Vec::new()
    } else {
        vec![FileChange {
            path: paths::ETC_KERNEL_CMDLINE.into(),
            before: kc.map(str::to_string),
            after: Some(format!("{}\n", merge(base_line.trim(), &add_kc))),
        }]
    };
    if once && !keep {
        return Ok(Some(boot_once(
            &path,
            &ours,
            &release,
            kernel,
            now,
            files,
            base,
            add,
            add_kc,
            &boots_with,
            &base_line,
        )));
    }
    let step = CommandStep::new(
        Cmd::KernelInstallAdd {
            release: release.clone(),
            kernel,
        },
        format!(
            "builds the image of {} again from its kernel, its initramfs and /etc/kernel/cmdline{}, where systemd-boot finds it",
            release.as_str(),
            if now.signed {
                ", signed with uki.conf's key"
            } else {
                ""
            }
        ),
    );
    let mut shown = add.clone();
    shown.extend(add_kc.iter().filter(|t| !add.contains(t)).cloned());
    let others = readable(f).len().saturating_sub(1);
    let mut notes = vec![format!(
        "The image {path} is built again in place (kernel-install names it by its kernel); the journal keeps the old one, and undo puts it back. Every later kernel update builds its image with these parameters from /etc/kernel/cmdline."
    )];
    notes.push(if keep {
        format!("This boot came up from {ours} with these parameters; it stays beside the default image (the same setup, a way in from systemd-boot's menu should the rebuilt one not start) until the first transaction is undone.")
    } else if others == 0 {
        "It is the only kernel image here: there is no older entry in systemd-boot's menu to fall back to if the first boot fails — keep a live USB stick at hand, or install a second kernel first.".into()
    } else {
        format!("The other {others} kernel image(s) keep their command line: a way back in systemd-boot's menu (hold Space while the machine starts).")
    });
    Ok(Some(Change {
        title: if keep {
            format!(
                "Kernel parameters: keep {} (the image tried once booted well; the default image of {} built the same way)",
                shown.join(" "),
                release.as_str()
            )
        } else {
            format!(
                "Kernel parameters: {} (the unified kernel image of {} built again)",
                shown.join(" "),
                release.as_str()
            )
        },
        evidence: vec![
            ev(&path, format!(".cmdline {}", boots_with.trim())),
            ev(paths::ETC_KERNEL_CMDLINE, base_line.trim()),
        ],
        files,
        commands: vec![step.clone()],
        undo_commands: vec![step],
        artifacts: vec![super::super::model::Artifact {
            path: path.clone(),
            staging: None,
        }],
        verify: vec![Verify::BootEntriesHave {
            files: vec![path],
            tokens: shown,
        }],
        notes,
        ..base
    }))
}

/// The steps for a unified kernel image, with what each UKI on the host
/// boots with now (its `.cmdline` section) and whether it is signed: a
/// signed UKI rebuilt without the key no longer boots under Secure Boot.
pub(super) fn uki_manual(f: &TuneFacts, tokens: &[String]) -> Manual {
    let mut steps = vec![
        format!("Add the parameters to /etc/kernel/cmdline (or a file in /etc/cmdline.d/): {}", tokens.join(" ")),
        "Rebuild the image: `sudo mkinitcpio -P` (Arch) or `sudo kernel-install add-all` / `ukify build` (systemd), then sign it if you use Secure Boot.".into(),
    ];
    let mut signed = false;
    for (path, read) in &f.ukis {
        steps.push(match read {
            Ok(u) => {
                signed |= u.signed;
                let have = u.cmdline.as_deref().unwrap_or("");
                let lacking = missing(have, tokens);
                format!(
                    "Now {path}{} boots with: {} — {}{}",
                    u.uname
                        .as_deref()
                        .map(|r| format!(" (kernel {r})"))
                        .unwrap_or_default(),
                    if u.cmdline.is_some() {
                        format!("`{have}`")
                    } else {
                        "no command line of its own (the loader's)".into()
                    },
                    if lacking.is_empty() {
                        "every parameter is there".to_string()
                    } else {
                        format!("lacking {}", lacking.join(" "))
                    },
                    if u.signed { "; signed" } else { "; unsigned" },
                )
            }
            Err(e) => format!("{path} could not be read: {e}"),
        });
    }
    if signed {
        steps.push("A signed UKI must be signed again after the rebuild, with the key the firmware trusts (`sbctl sign-all`, or ukify's SecureBootPrivateKey=/SecureBootCertificate= in /etc/kernel/uki.conf): this tool does not hold or guess that key, and an unsigned image does not boot under Secure Boot.".into());
    }
    steps.push("Check it: the line above is read from the image's .cmdline section; `ukify inspect` shows the same.".into());
    Manual {
        id: crate::tuning::kind::ChangeId::of(crate::tuning::kind::Kind::Cmdline),
        title: format!("Kernel parameters in a unified kernel image: {}", tokens.join(" ")),
        why: "A UKI carries its command line inside the image (signed, under Secure Boot); it must be rebuilt (and re-signed for Secure Boot), which this tool does not yet do for you.".into(),
        steps,
    }
}

/// The tuned image built as a boot entry of our own and booted once: a
/// power cut while it is written, or a first boot that fails, leaves the
/// default image as it was (the next power-on starts it).
#[allow(clippy::too_many_arguments)]
fn boot_once(
    default: &str,
    ours: &str,
    release: &Release,
    kernel: KernelAt,
    now: &Uki,
    files: Vec<FileChange>,
    base: Change,
    add: Vec<String>,
    add_kc: Vec<String>,
    boots_with: &str,
    base_line: &str,
) -> Change {
    let mut shown = add.clone();
    shown.extend(add_kc.iter().filter(|t| !add.contains(t)).cloned());
    Change {
        title: format!(
            "Kernel parameters: {} (a unified kernel image of {} of its own, tried once)",
            shown.join(" "),
            release.as_str()
        ),
        evidence: vec![
            ev(default, format!(".cmdline {}", boots_with.trim())),
            ev(paths::ETC_KERNEL_CMDLINE, base_line.trim()),
        ],
        files,
        commands: vec![
            CommandStep::new(
                Cmd::KernelInstallAddOurs {
                    release: release.clone(),
                    kernel,
                },
                format!(
                    "builds {ours} from the kernel, its initramfs and /etc/kernel/cmdline{}; the default image stays as it was",
                    if now.signed {
                        ", signed with uki.conf's key"
                    } else {
                        ""
                    }
                ),
            ),
            CommandStep::new(
                Cmd::BootctlSetOneshotUki {
                    release: release.clone(),
                },
                "boots it once; the old default stays the default until you keep the new one",
            ),
        ],
        artifacts: vec![super::super::model::Artifact {
            path: ours.to_string(),
            staging: None,
        }],
        verify: vec![Verify::BootEntriesHave {
            files: vec![ours.to_string()],
            tokens: shown,
        }],
        notes: vec![
            format!(
                "{default} stays the default: if the new image does not come up, power the machine off and on and the old setup starts. After a good boot, keep it (the Tuning page's Keep button, `tune keep`): the default image is built with the new parameters, journaled and undone like this change (every later kernel update builds its image from /etc/kernel/cmdline by itself)."
            ),
            "Undo removes the image of our own and gives /etc/kernel/cmdline back.".into(),
        ],
        ..base
    }
}
