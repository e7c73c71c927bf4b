//! The programs a tuning runs as root, as data: a closed set, each with its
//! parameters checked when it is planned and again when it is read back
//! (from the journal, from a caller), and its argv derived here and nowhere
//! else. The journal keeps a `Cmd`, never an argv: a forged or damaged
//! journal can name only these programs with parameters of these shapes
//! (STYLE rule 11; sudo's rule that a command run as root must not take
//! arguments that choose what it does).

use super::tokens;
use crate::tuning::paths;
use serde::{Deserialize, Serialize};

/// A kernel release as `uname -r` spells it (`6.1.0-18-amd64`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Release(String);

impl Release {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Text that is not a kernel release this tool names in a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a kernel release")]
pub struct NotRelease(pub String);

impl TryFrom<String> for Release {
    type Error = NotRelease;
    fn try_from(s: String) -> Result<Self, NotRelease> {
        let ok = !s.is_empty()
            && s.len() <= 128
            && !s.starts_with(['-', '.'])
            && !s.contains("..")
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._+~-".contains(&b));
        if ok {
            Ok(Release(s))
        } else {
            Err(NotRelease(s))
        }
    }
}

impl From<Release> for String {
    fn from(r: Release) -> String {
        r.0
    }
}

/// Kernel parameters from the closed set in `tokens::allowed`, at least one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct Tokens(Vec<String>);

impl Tokens {
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }
}

/// A kernel parameter list this tool does not write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTokens {
    #[error("a kernel parameter list must hold 1 to 64 parameters")]
    Count,
    #[error("{0:?} is not a kernel parameter this tool writes")]
    NotOurs(String),
}

impl TryFrom<Vec<String>> for Tokens {
    type Error = BadTokens;
    fn try_from(v: Vec<String>) -> Result<Self, BadTokens> {
        if v.is_empty() || v.len() > 64 {
            return Err(BadTokens::Count);
        }
        match v.iter().find(|t| !tokens::allowed(t)) {
            Some(t) => Err(BadTokens::NotOurs(t.clone())),
            None => Ok(Tokens(v)),
        }
    }
}

impl From<Tokens> for Vec<String> {
    fn from(t: Tokens) -> Vec<String> {
        t.0
    }
}

/// What `systemctl` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnitVerb {
    Start,
    Stop,
    TryRestart,
}

/// The services a tuning starts, stops or restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    Ksmtuned,
    Irqbalance,
    Libvirtd,
    Virtqemud,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Ksmtuned => "ksmtuned",
            Unit::Irqbalance => "irqbalance",
            Unit::Libvirtd => "libvirtd.service",
            Unit::Virtqemud => "virtqemud.service",
        }
    }
}

/// The modules a tuning loads (or, kvmfr only, unloads to load it again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Module {
    VfioPci,
    Kvmfr,
}

impl Module {
    fn name(self) -> &'static str {
        match self {
            Module::VfioPci => "vfio-pci",
            Module::Kvmfr => "kvmfr",
        }
    }
}

/// Add or take away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Edit {
    Add,
    Remove,
}

/// How a distribution names its initramfs image (dracut writes where it is
/// told).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageName {
    /// Debian and Ubuntu: `/boot/initrd.img-R`.
    InitrdImg,
    /// Fedora, RHEL, Arch: `/boot/initramfs-R.img`.
    InitramfsImg,
}

/// Where kernel-install finds the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelAt {
    /// `/boot/vmlinuz-R`.
    Boot,
    /// `/usr/lib/modules/R/vmlinuz`.
    UsrLib,
}

impl KernelAt {
    /// The kernel image of `release` here.
    pub fn path(self, release: &Release) -> String {
        match self {
            KernelAt::Boot => format!("/boot/vmlinuz-{}", release.as_str()),
            KernelAt::UsrLib => format!("/usr/lib/modules/{}/vmlinuz", release.as_str()),
        }
    }
}

/// GRUB's folder and the name its generator has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grub {
    /// `grub-mkconfig`, writing beside `/boot/grub/grub.cfg`.
    Grub,
    /// `grub-mkconfig` with `/boot/grub2` (some distributions).
    GrubInGrub2,
    /// `grub2-mkconfig`, `/boot/grub2`.
    Grub2,
    /// `grub2-mkconfig` with `/boot/grub`.
    Grub2InGrub,
}

impl Grub {
    pub fn dir(self) -> &'static str {
        match self {
            Grub::Grub | Grub::Grub2InGrub => paths::BOOT_GRUB,
            Grub::Grub2 | Grub::GrubInGrub2 => paths::BOOT_GRUB2,
        }
    }

    /// GRUB's tool of this name as this GRUB names it (`grub-…` or `grub2-…`).
    fn named(self, grub: &'static str, grub2: &'static str) -> &'static str {
        match self {
            Grub::Grub | Grub::GrubInGrub2 => grub,
            Grub::Grub2 | Grub::Grub2InGrub => grub2,
        }
    }

    fn tool(self) -> &'static str {
        self.named("grub-mkconfig", "grub2-mkconfig")
    }

    fn reboot_tool(self) -> &'static str {
        self.named("grub-reboot", "grub2-reboot")
    }

    fn editenv_tool(self) -> &'static str {
        self.named("grub-editenv", "grub2-editenv")
    }

    /// The one for this tool and folder.
    pub fn of(tool_is_grub2: bool, dir_is_grub2: bool) -> Grub {
        match (tool_is_grub2, dir_is_grub2) {
            (false, false) => Grub::Grub,
            (false, true) => Grub::GrubInGrub2,
            (true, true) => Grub::Grub2,
            (true, false) => Grub::Grub2InGrub,
        }
    }

    /// Where grub.cfg is staged before the rename (an allowlisted artifact).
    pub fn staging(self) -> String {
        format!("{}/{STAGED_GRUB}", self.dir())
    }
}

/// The name of the staged grub.cfg beside the real one.
pub const STAGED_GRUB: &str = ".vfio-assistant-grub.cfg";
/// The id of GRUB's menu entry of ours (`grub-reboot` names it; an id
/// must start with a letter, or GRUB reads it as an index).
pub const GRUB_ONCE_ID: &str = "vfio-assistant";
/// Our boot entry's name for `bootctl set-oneshot`.
pub const OUR_ENTRY: &str = "vfio-assistant.conf";
/// The entry token our unified kernel images are named by.
pub const UKI_TOKEN: &str = "vfio-assistant";

/// The file name of our unified kernel image of `release`, as
/// kernel-install's 90-uki-copy names it.
pub fn our_uki(release: &Release) -> String {
    format!("{UKI_TOKEN}-{}.efi", release.as_str())
}

/// One program run as root by a tuning, with its checked parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "program", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Cmd {
    Systemctl {
        verb: UnitVerb,
        unit: Unit,
    },
    Modprobe {
        module: Module,
    },
    /// `modprobe -r`: the module unloaded, to be loaded again with new
    /// options (the kernel refuses while anyone holds it).
    ModprobeRemove {
        module: Module,
    },
    /// `systemd-tmpfiles --create` of Looking Glass's tmpfiles.d file.
    TmpfilesLookingGlass,
    UpdateInitramfs {
        release: Release,
    },
    /// `update-initramfs -u -k R` with `KERNEL_INSTALL_BYPASS=1`: the image
    /// in /boot only, Debian's post-update hook not building the default
    /// unified kernel image again (it goes into an image of our own).
    UpdateInitramfsOnly {
        release: Release,
    },
    Dracut {
        image: ImageName,
        release: Release,
    },
    /// `mkinitcpio -P`: every preset.
    Mkinitcpio,
    KernelInstallAdd {
        release: Release,
        kernel: KernelAt,
    },
    /// grub.cfg generated to its staging place.
    GrubMkconfig {
        grub: Grub,
    },
    /// `grub-reboot vfio-assistant`: our menu entry booted once (GRUB's
    /// environment block's `next_entry`), the default unchanged.
    GrubReboot {
        grub: Grub,
    },
    /// `grub-editenv DIR/grubenv unset next_entry`: a boot once that was
    /// not booted yet, taken back.
    GrubUnsetOnce {
        grub: Grub,
    },
    Grubby {
        edit: Edit,
        tokens: Tokens,
    },
    Kernelstub {
        edit: Edit,
        tokens: Tokens,
    },
    RpmOstreeKargs {
        edit: Edit,
        tokens: Tokens,
    },
    /// rpm-ostree's initramfs-etc tracking of our modprobe.d file.
    RpmOstreeInitramfsEtc {
        edit: Edit,
    },
    /// `bootctl set-oneshot` of our entry.
    BootctlSetOneshot,
    /// `kernel-install --entry-token=literal:vfio-assistant add`: the
    /// unified kernel image of `release` built as a boot entry of our own
    /// (`EFI/Linux/vfio-assistant-RELEASE.efi`), the default image left as
    /// it is.
    KernelInstallAddOurs {
        release: Release,
        kernel: KernelAt,
    },
    /// `bootctl set-oneshot vfio-assistant-RELEASE.efi`: that image booted
    /// once.
    BootctlSetOneshotUki {
        release: Release,
    },
    /// `udevadm trigger` of the DRM devices (a rule of ours for them
    /// changed), waiting until udev has handled them.
    UdevadmTriggerDrm,
}

impl Cmd {
    /// The program, as looked up in `syspath::SYSTEM_PATH` (never the
    /// caller's PATH).
    pub fn program(&self) -> &'static str {
        match self {
            Cmd::Systemctl { .. } => "systemctl",
            Cmd::Modprobe { .. } | Cmd::ModprobeRemove { .. } => "modprobe",
            Cmd::TmpfilesLookingGlass => "systemd-tmpfiles",
            Cmd::UpdateInitramfs { .. } | Cmd::UpdateInitramfsOnly { .. } => "update-initramfs",
            Cmd::Dracut { .. } => "dracut",
            Cmd::Mkinitcpio => "mkinitcpio",
            Cmd::KernelInstallAdd { .. } | Cmd::KernelInstallAddOurs { .. } => "kernel-install",
            Cmd::GrubMkconfig { grub } => grub.tool(),
            Cmd::GrubReboot { grub } => grub.reboot_tool(),
            Cmd::GrubUnsetOnce { grub } => grub.editenv_tool(),
            Cmd::Grubby { .. } => "grubby",
            Cmd::Kernelstub { .. } => "kernelstub",
            Cmd::RpmOstreeKargs { .. } | Cmd::RpmOstreeInitramfsEtc { .. } => "rpm-ostree",
            Cmd::BootctlSetOneshot | Cmd::BootctlSetOneshotUki { .. } => "bootctl",
            Cmd::UdevadmTriggerDrm => "udevadm",
        }
    }

    /// What is set in the command's environment besides what it inherits.
    pub fn envs(&self) -> &'static [(&'static str, &'static str)] {
        match self {
            Cmd::UpdateInitramfsOnly { .. } => &[("KERNEL_INSTALL_BYPASS", "1")],
            _ => &[],
        }
    }

    /// The whole argv, derived from the parameters (never through a shell).
    pub fn argv(&self) -> Vec<String> {
        let mut v: Vec<String> = vec![self.program().into()];
        let mut push = |a: &str| v.push(a.to_string());
        match self {
            Cmd::Systemctl { verb, unit } => {
                push(match verb {
                    UnitVerb::Start => "start",
                    UnitVerb::Stop => "stop",
                    UnitVerb::TryRestart => "try-restart",
                });
                push(unit.name());
            }
            Cmd::Modprobe { module } => push(module.name()),
            Cmd::ModprobeRemove { module } => {
                push("-r");
                push(module.name());
            }
            Cmd::TmpfilesLookingGlass => {
                push("--create");
                push(super::paths::LG_TMPFILES);
            }
            Cmd::UpdateInitramfs { release } | Cmd::UpdateInitramfsOnly { release } => {
                for a in ["-u", "-k", release.as_str()] {
                    push(a);
                }
            }
            Cmd::Dracut { image, release } => {
                push("-f");
                push(&image_path(*image, release));
                push(release.as_str());
            }
            Cmd::Mkinitcpio => push("-P"),
            Cmd::KernelInstallAdd { release, kernel } => {
                push("add");
                push(release.as_str());
                push(&kernel.path(release));
            }
            Cmd::KernelInstallAddOurs { release, kernel } => {
                push(&format!("--entry-token=literal:{UKI_TOKEN}"));
                push("add");
                push(release.as_str());
                push(&kernel.path(release));
            }
            Cmd::GrubMkconfig { grub } => {
                push("-o");
                push(&grub.staging());
            }
            Cmd::GrubReboot { .. } => push(GRUB_ONCE_ID),
            Cmd::GrubUnsetOnce { grub } => {
                push(&format!("{}/grubenv", grub.dir()));
                push("unset");
                push("next_entry");
            }
            Cmd::Grubby { edit, tokens } => {
                push("--update-kernel=ALL");
                let joined = tokens.as_slice().join(" ");
                push(&match edit {
                    Edit::Add => format!("--args={joined}"),
                    Edit::Remove => format!("--remove-args={joined}"),
                });
            }
            Cmd::Kernelstub { edit, tokens } => {
                push(match edit {
                    Edit::Add => "-a",
                    Edit::Remove => "-d",
                });
                push(&tokens.as_slice().join(" "));
            }
            Cmd::RpmOstreeKargs { edit, tokens } => {
                push("kargs");
                for t in tokens.as_slice() {
                    push(&match edit {
                        Edit::Add => format!("--append={t}"),
                        Edit::Remove => format!("--delete={t}"),
                    });
                }
            }
            Cmd::RpmOstreeInitramfsEtc { edit } => {
                push("initramfs-etc");
                let f = super::paths::VFIO_MODPROBE;
                push(&match edit {
                    Edit::Add => format!("--track={f}"),
                    Edit::Remove => format!("--untrack={f}"),
                });
            }
            Cmd::BootctlSetOneshot => {
                push("set-oneshot");
                push(OUR_ENTRY);
            }
            Cmd::BootctlSetOneshotUki { release } => {
                push("set-oneshot");
                push(&our_uki(release));
            }
            Cmd::UdevadmTriggerDrm => {
                for a in [
                    "trigger",
                    "--action=change",
                    "--subsystem-match=drm",
                    "--settle",
                ] {
                    push(a);
                }
            }
        }
        v
    }
}

/// Where an initramfs image of `release` is, by the distribution's naming.
pub fn image_path(image: ImageName, release: &Release) -> String {
    match image {
        ImageName::InitrdImg => format!("/boot/initrd.img-{}", release.as_str()),
        ImageName::InitramfsImg => format!("/boot/initramfs-{}.img", release.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_back_only_in_the_closed_shapes() {
        let ok: Cmd =
            serde_json::from_str(r#"{"program":"update-initramfs","release":"6.1.0-18-amd64"}"#)
                .unwrap();
        assert_eq!(
            ok.argv(),
            ["update-initramfs", "-u", "-k", "6.1.0-18-amd64"]
        );
        for bad in [
            r#"{"program":"sh","argv":["sh","-c","id"]}"#,
            r#"{"program":"update-initramfs","release":"-k all; id"}"#,
            r#"{"program":"update-initramfs","release":"../../tmp/x"}"#,
            r#"{"program":"systemctl","verb":"start","unit":"evil.service"}"#,
            r#"{"program":"grubby","edit":"add","tokens":["init=/bin/sh"]}"#,
            r#"{"program":"grubby","edit":"add","tokens":[]}"#,
            r#"{"program":"modprobe","module":"vfio-pci","argv":["x"]}"#,
        ] {
            assert!(serde_json::from_str::<Cmd>(bad).is_err(), "{bad}");
        }
        let rm: Cmd =
            serde_json::from_str(r#"{"program":"modprobe-remove","module":"kvmfr"}"#).unwrap();
        assert_eq!(rm.argv(), ["modprobe", "-r", "kvmfr"]);
        for bad in [
            r#"{"program":"modprobe-remove","module":"snd-hda-intel"}"#,
            r#"{"program":"modprobe-remove","module":"kvmfr","force":true}"#,
            r#"{"program":"modprobe-remove"}"#,
        ] {
            assert!(serde_json::from_str::<Cmd>(bad).is_err(), "{bad}");
        }
        let g = Cmd::GrubMkconfig {
            grub: Grub::of(true, true),
        };
        assert_eq!(
            g.argv(),
            [
                "grub2-mkconfig",
                "-o",
                "/boot/grub2/.vfio-assistant-grub.cfg"
            ]
        );
    }
}
