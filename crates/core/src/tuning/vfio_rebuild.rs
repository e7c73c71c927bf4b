//! Which initramfs images the boot-time binding rebuilds, and with what:
//! the next boot's kernel's (boot/next_boot.rs) and the running one's
//! where they differ, by the generator that really builds them —
//! `update-initramfs -u -k R`, `dracut` with the image named as the
//! distribution names it, `mkinitcpio -P` (every preset) — and whether the
//! binding can be set up at all: never a rebuild dropped in silence.

use super::boot::{Generator, Loader};
use super::command::{Cmd, ImageName, Release, image_path};
use super::facts::TuneFacts;

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
            let debian = f.markers.contains("/var/lib/dpkg/info/dracut.list")
                || f.markers.contains("/var/lib/dpkg/info/dracut-core.list");
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

/// Why the boot-time binding cannot be set up here, when it cannot: the
/// generator builds one kernel's image at a time and which kernel the next
/// boot starts is not known — a guessed image would leave the kernel that
/// does boot without vfio-pci, and its host driver would win the card.
pub fn refusal(f: &TuneFacts, loader: Loader, generator: Generator) -> Option<String> {
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
        None => Some(
            "vfio-pci is not set up at boot: no kernel release could be read (neither the boot loader's default entry nor /proc/sys/kernel/osrelease), so which initramfs to rebuild is not known. Bind the card when the VM starts instead (libvirt's managed hostdev), or add vfio-pci to the initramfs by hand.".into(),
        ),
        Some(n) if n.guessed && installed.iter().any(|r| *r != n.release) => Some(format!(
            "vfio-pci is not set up at boot: which kernel the next boot starts could not be read from the {} boot loader, and more than one is installed ({}). Rebuilding only the running kernel's initramfs ({}) could leave the next boot without vfio-pci, and the card's own driver would take it. Set the default entry (grub-set-default or the loader's own tool), or update the system so the loader's choice is readable, then plan again.",
            loader.id(),
            installed.join(", "),
            n.release
        )),
        Some(_) => None,
    }
}
