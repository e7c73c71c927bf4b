//! Which initramfs images the boot-time binding rebuilds, and with what:
//! the next boot's kernel's (boot/next_boot.rs) and the running one's
//! where they differ, by the generator that really builds them —
//! `update-initramfs -u -k R`, `dracut` with the image named as the
//! distribution names it, `mkinitcpio -P` (every preset) — and whether the
//! binding can be set up at all: never a rebuild dropped in silence.

use super::boot::{Generator, Loader};
use super::command::{Cmd, ImageName, Release, image_path};
use super::facts::TuneFacts;
use crate::tuning::paths;

/// The rebuild commands and the images they write, for `releases`.
pub fn images(
    f: &TuneFacts,
    generator: Generator,
    releases: &[&Release],
    uki_once: bool,
) -> (Vec<Cmd>, Vec<String>) {
    let in_boot = |name: &str| f.dir("/boot").is_some_and(|d| d.iter().any(|n| n == name));
    let mut rebuild = Vec::new();
    let mut images = Vec::new();
    match generator {
        Generator::InitramfsTools => {
            for release in releases {
                rebuild.push(if uki_once {
                    Cmd::UpdateInitramfsOnly {
                        release: (*release).clone(),
                    }
                } else {
                    Cmd::UpdateInitramfs {
                        release: (*release).clone(),
                    }
                });
                images.push(image_path(ImageName::InitrdImg, release));
            }
        }
        Generator::Dracut => {
            // Debian and Ubuntu name it initrd.img-R (their dracut package
            // too); Fedora, RHEL and Arch initramfs-R.img.
            let debian = f.markers.contains(paths::VAR_LIB_DPKG_INFO_DRACUT_LIST)
                || f.markers
                    .contains(paths::VAR_LIB_DPKG_INFO_DRACUT_CORE_LIST);
            for release in releases {
                let r = release.as_str();
                let image = if in_boot(&format!("initrd.img-{r}"))
                    || (debian && !in_boot(&format!("initramfs-{r}.img")))
                {
                    ImageName::InitrdImg
                } else {
                    ImageName::InitramfsImg
                };
                rebuild.push(Cmd::Dracut {
                    image,
                    release: (*release).clone(),
                });
                images.push(image_path(image, release));
            }
        }
        Generator::Mkinitcpio => {
            rebuild.push(Cmd::Mkinitcpio);
            images.extend(super::vfio_boot::initramfs_images(f));
        }
        Generator::Unknown => {}
    }
    (rebuild, images)
}

/// Why vfio-pci is not bound at boot: the plan's note in its place (the
/// runtime binding, or libvirt's managed hostdev, does the job then).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAtBoot {
    #[error(
        "vfio-pci is built into this kernel: its device IDs go on the kernel command line (modprobe.d does not reach a built-in driver)."
    )]
    Builtin,
    #[error(
        "vfio-pci is built into this kernel, and {twins} shares its ID with a device the host keeps: by ID vfio-pci would take both, and a built-in driver runs no modprobe.d line that could bind by address. Not bound at boot: libvirt binds the card when the VM starts (managed hostdev), or the runtime binding (vfio-bind) does it now."
    )]
    BuiltinTwins { twins: String },
    #[error(
        "vfio-pci is not set up at boot: no kernel release could be read (neither the boot loader's default entry nor /proc/sys/kernel/osrelease), so which initramfs to rebuild is not known. Bind the card when the VM starts instead (libvirt's managed hostdev), or add vfio-pci to the initramfs by hand."
    )]
    NoRelease,
    #[error(
        "vfio-pci is not set up at boot: which kernel the next boot starts could not be read from the {loader} boot loader, and more than one is installed ({installed}). Rebuilding only the running kernel's initramfs ({running}) could leave the next boot without vfio-pci, and the card's own driver would take it. Set the default entry (grub-set-default or the loader's own tool), or update the system so the loader's choice is readable, then plan again."
    )]
    NextKernelUnknown {
        loader: String,
        installed: String,
        running: String,
    },
}
/// Why the boot-time binding cannot be set up here, when it cannot: the
/// generator builds one kernel's image at a time and which kernel the next
/// boot starts is not known — a guessed image would leave the kernel that
/// does boot without vfio-pci, and its host driver would win the card.
pub fn refusal(f: &TuneFacts, loader: Loader, generator: Generator) -> Option<NotAtBoot> {
    if !matches!(generator, Generator::InitramfsTools | Generator::Dracut)
        || loader == Loader::RpmOstree
    {
        return None;
    }
    let installed: Vec<&str> = f
        .dir("/boot")
        .unwrap_or(&[])
        .iter()
        .filter_map(|n| n.strip_prefix("vmlinuz-"))
        .collect();
    match super::boot::next_boot(f, loader) {
        None => Some(NotAtBoot::NoRelease),
        Some(n) if n.guessed && installed.iter().any(|r| *r != n.release) => {
            Some(NotAtBoot::NextKernelUnknown {
                loader: loader.id().to_string(),
                installed: installed.join(", "),
                running: n.release,
            })
        }
        Some(_) => None,
    }
}
