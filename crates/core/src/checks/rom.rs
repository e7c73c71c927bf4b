//! `device.rom`: what is in a graphics card's ROM (read from the card, or the
//! file a domain's `<rom file=…/>` names). OVMF can only show a picture before
//! Windows loads its driver if the ROM carries an x64 UEFI image (the GOP
//! driver); a dump with a header in front of it, or one for another card,
//! leaves the screen black or the card dead (Code 43).

use super::model::{Action, Finding, Status};
use crate::parse::option_rom::{CodeType, OptionRom, parse_option_rom};
use crate::romread::RomError;
use crate::sysroot::HostPath;

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "rom",
    ids: &[super::CheckId("device.rom")],
    run: None,
};

const WHY: &str = "In a UEFI VM (OVMF, which Windows 11 and modern GPUs need) the card's ROM must carry an x64 UEFI driver (GOP) for anything to appear on screen before Windows loads the GPU driver; a ROM file with a header in front, or made for another card, leaves a black screen or Code 43.";

fn kind(i: &crate::parse::option_rom::RomImage) -> String {
    match (i.code_type, i.efi_machine) {
        (CodeType::X86Bios, _) => "legacy x86 BIOS (VGA BIOS)".into(),
        (CodeType::Efi, Some(0x8664)) => "UEFI x64 (GOP)".into(),
        (CodeType::Efi, Some(m)) => format!("UEFI for machine {m:#06x} (not x64)"),
        (CodeType::Efi, None) => "UEFI (machine unknown)".into(),
        (CodeType::OpenFirmware, _) => "Open Firmware".into(),
        (CodeType::PaRisc, _) => "PA-RISC".into(),
        (CodeType::Other(n), _) => format!("code type {n}"),
    }
}

/// The images, one evidence line each.
fn describe(f: Finding, source: &str, rom: &OptionRom) -> Finding {
    rom.images.iter().fold(f, |f, i| {
        f.evidence(
            source.to_string(),
            format!(
                "image at {:#x}: {}, {:04x}:{:04x}, {} KiB{}",
                i.offset,
                kind(i),
                i.vendor_id,
                i.device_id,
                i.length / 1024,
                if i.last { ", last" } else { "" }
            ),
        )
    })
}

/// The card a ROM is meant for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Card {
    pub vendor: u16,
    pub device: u16,
    /// The firmware booted on it: its sysfs `rom` may be the legacy shadow
    /// copy of the VGA BIOS, not the card's flash.
    pub boot_vga: bool,
}

impl Card {
    pub fn of(d: &crate::host::pci::PciDevice) -> Card {
        Card {
            vendor: d.vendor_id.0,
            device: d.device_id.0,
            boot_vga: d.boot_vga == Some(true),
        }
    }
}

/// The finding for one ROM: `source` names where it came from (the sysfs
/// file or the ROM file), `card` is the card it is meant for.
pub fn rom_finding(
    device: Option<&str>,
    card: Option<Card>,
    source: &str,
    bytes: &Result<Vec<u8>, RomError>,
) -> Finding {
    let f = judge(device, card.map(|c| (c.vendor, c.device)), source, bytes);
    // The boot GPU's sysfs ROM is often the shadow copy at 0xC0000: legacy
    // only, its chain broken. Say so rather than blame the card's flash.
    let from_sysfs = is_sysfs_rom(source);
    if card.is_some_and(|c| c.boot_vga)
        && from_sysfs
        && matches!(f.status, Status::Fail | Status::Warn)
    {
        let fix = f.fix.clone().unwrap_or_default();
        return Finding {
            title: format!("{} (the boot GPU: this may be the shadow copy of its VGA BIOS, not its flash)", f.title),
            ..f
        }
        .fix(format!("This card showed the firmware's screen, and the kernel then often gives the legacy shadow copy instead of the card's ROM. Make another GPU (or the iGPU) primary in the firmware and read it again, or check the maker's file for this model. {fix}"))
        .terminal("vfio-assistant rom --file FILE");
    }
    f
}

/// Whether `source` names a card's ROM file in sysfs (`…/rom` under the
/// host's `/sys`, by any of its paths).
fn is_sysfs_rom(source: &str) -> bool {
    let sys = HostPath::sys("").to_string();
    source
        .strip_prefix(sys.trim_end_matches('/'))
        .is_some_and(|rest| rest.starts_with('/'))
        && source.ends_with("/rom")
}

fn judge(
    device: Option<&str>,
    card: Option<(u16, u16)>,
    source: &str,
    bytes: &Result<Vec<u8>, RomError>,
) -> Finding {
    let mut f = Finding::new("device.rom", "", Status::Pass).why(WHY);
    if let Some(d) = device {
        f = f.device(d);
    }
    let who = device.unwrap_or("the card");
    let addr = device.unwrap_or("ADDRESS");
    // Titles name a file by its path, a card's own ROM as such.
    let name = if device.is_some() && is_sysfs_rom(source) {
        "The card's ROM"
    } else {
        source
    };
    let bytes = match bytes {
        Ok(b) => b,
        Err(reason) => {
            return Finding {
                title: format!("Could not read the ROM of {who}"),
                status: Status::Unknown,
                ..f
            }
            .evidence(source.to_string(), reason.to_string())
            .fix(if reason.no_rom_bar() {
                "This device exposes no ROM (integrated and virtual GPUs often do not): check a ROM file instead, such as the card maker's for this model."
            } else {
                "Run as root. Some cards give their ROM only while no driver uses them (bind to vfio-pci first); else dump it in Windows with GPU-Z, or take the card maker's file for the exact model."
            })
            .terminal(if reason.no_rom_bar() {
                "vfio-assistant rom --file FILE".to_string()
            } else {
                format!("sudo vfio-assistant rom {addr}")
            });
        }
    };
    let rom =
        match parse_option_rom(bytes) {
            Ok(r) => r,
            Err(e) => {
                return Finding {
                title: format!("{name} is not a usable PCI option ROM"),
                status: Status::Fail,
                ..f
            }
            .evidence(source.to_string(), format!("{} bytes: {e}", bytes.len()))
            .fix("Read the ROM again (as root, with the card idle), or use the card maker's file.")
            .action(Action::ReadRom, format!("sudo vfio-assistant rom {addr} --save FILE"));
            }
        };
    let mut f = describe(f, source, &rom);
    let first = rom.images.first();
    if rom.leading_bytes > 0 {
        let n = rom.leading_bytes;
        return Finding {
            title: format!("{name} has {n} bytes in front of the ROM (a flash-tool header)"),
            status: Status::Fail,
            ..f
        }
        .fix(format!("QEMU hands the file to the guest as is, so the card sees garbage. Cut the header off (`tail -c +{} '{source}' > fixed.rom`) and point <rom file='…'/> at fixed.rom.", n + 1))
        .terminal(format!("vfio-assistant rom --file '{source}' --save fixed.rom"));
    }
    if let Some(problem) = &rom.chain_problem {
        f = f.evidence(
            source.to_string(),
            format!("the image chain breaks: {problem}"),
        );
        if !rom.has_uefi_x64() {
            f.status = Status::Fail;
            f.title = format!(
                "{name} is cut off or damaged after {} image(s)",
                rom.images.len()
            );
            return f.fix("Dump the ROM again (as root, with the card idle and not the boot GPU), or use the card maker's file for the exact model.");
        }
    }
    if let (Some((v, d)), Some(i)) = (card, first)
        && i.vendor_id != v
    {
        f.status = Status::Warn;
        f.title = format!(
            "{name} is for another vendor's card ({:04x}:{:04x}, the card is {v:04x}:{d:04x})",
            i.vendor_id, i.device_id
        );
        return f.fix("Use a ROM for this exact card (same vendor, model and memory): the wrong one leaves it dead.");
    }
    if !rom.has_uefi_x64() {
        f.status = Status::Warn;
        f.title = format!(
            "{name} has no UEFI x64 (GOP) driver: a black screen until Windows loads its driver"
        );
        return f.fix("Update the card's firmware with the maker's UEFI/GOP update, or use a ROM of the same model that has one (<rom file='…'/>); or boot the VM with SeaBIOS/CSM (legacy), which uses the VGA BIOS.");
    }
    f.title = format!("{name} carries a UEFI x64 (GOP) driver");
    if rom.chain_problem.is_some() {
        f.status = Status::Warn;
        f.title
            .push_str(", but its image chain breaks after it (a cut-off dump?)");
        return f.fix(
            "The GOP image is whole; to be safe, dump the ROM again or use the maker's file.",
        );
    }
    if let (Some((_, d)), Some(i)) = (card, first)
        && i.device_id != d
    {
        f.status = Status::Info;
        f.title.push_str(&format!(
            ", made for device {:04x} (the card is {d:04x}: a sibling model? check it is the same board)",
            i.device_id
        ));
        let read = format!("sudo vfio-assistant rom {addr} --save FILE");
        return f.action(Action::ReadRom, read).fix("Prefer the ROM read from this very card (as root). A file for another device id of the same family can work, but often leaves the screen dark or gives Code 43.");
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real ROM from tests/fixtures/roms.
    fn fixture(name: &str) -> Vec<u8> {
        let p = format!(
            "{}/../../tests/fixtures/roms/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn sysfs_roms_by_any_path() {
        assert!(is_sysfs_rom("/sys/bus/pci/devices/0000:01:00.0/rom"));
        assert!(is_sysfs_rom(
            "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/rom"
        ));
        for not in [
            "/sysfs/x/rom",
            "/var/lib/libvirt/vbios/rom",
            "card.rom",
            "/sys/x/rom.bin",
        ] {
            assert!(!is_sysfs_rom(not), "{not}");
        }
    }

    #[test]
    fn verdicts_on_real_roms() {
        let gop = Ok(fixture("efi-virtio.rom"));
        let card = |vendor, device| {
            Some(Card {
                vendor,
                device,
                boot_vga: false,
            })
        };
        let f = rom_finding(
            Some("0000:01:00.0"),
            card(0x1af4, 0x1041),
            "efi-virtio.rom",
            &gop,
        );
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert!(
            f.evidence
                .iter()
                .any(|e| e.value.contains("UEFI x64 (GOP)"))
        );
        assert_eq!(f.device.as_deref(), Some("0000:01:00.0"));

        let vga = Ok(fixture("vgabios-stdvga.bin"));
        let f = rom_finding(None, card(0x1234, 0x1111), "vgabios-stdvga.bin", &vga);
        assert_eq!(f.status, Status::Warn);
        assert!(f.title.contains("no UEFI x64"));

        // The same vendor, another device id: said, not failed.
        let f = rom_finding(None, card(0x1af4, 0x1000), "efi-virtio.rom", &gop);
        assert_eq!(f.status, Status::Info);
        assert!(f.title.contains("made for device 1041"));
        // Meant for an NVIDIA card: the wrong vendor.
        let f = rom_finding(None, card(0x10de, 0x1b80), "efi-virtio.rom", &gop);
        assert_eq!(f.status, Status::Warn);
        assert!(f.title.contains("another vendor"));

        let mut dump = vec![0u8; 0x9a0];
        dump.extend(fixture("efi-virtio.rom"));
        let f = rom_finding(None, None, "/var/lib/libvirt/vbios/1080ti.rom", &Ok(dump));
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.fix.as_deref().unwrap().contains("tail -c +2465"),
            "{f:#?}"
        );

        // The boot GPU's sysfs ROM: legacy only is said to be maybe the shadow copy.
        let boot = Some(Card {
            vendor: 0x1234,
            device: 0x1111,
            boot_vga: true,
        });
        let f = rom_finding(
            Some("0000:00:02.0"),
            boot,
            "/sys/bus/pci/devices/0000:00:02.0/rom",
            &vga,
        );
        assert_eq!(f.status, Status::Warn);
        assert!(f.title.contains("shadow copy"), "{}", f.title);
        // A cut-off dump: the images before the cut, and a fail without GOP.
        let whole = fixture("efi-virtio.rom");
        let cut = Ok(whole[..whole.len() / 3].to_vec());
        let f = rom_finding(None, None, "cut.rom", &cut);
        assert_eq!(f.status, Status::Fail, "{f:#?}");
        assert!(
            f.title.contains("cut off or damaged after 1 image"),
            "{}",
            f.title
        );
        let f = rom_finding(None, None, "x.rom", &Ok(b"<html>404</html>".to_vec()));
        assert_eq!(f.status, Status::Fail);
        let f = rom_finding(Some("0000:01:00.0"), None, "rom", &Err(RomError::NotRoot));
        assert_eq!(f.status, Status::Unknown);
        assert!(f.command.as_deref().unwrap().starts_with("sudo"), "{f:#?}");
        let f = rom_finding(
            Some("0000:01:00.0"),
            None,
            "rom",
            &Err(RomError::NoRomBar { path: "rom".into() }),
        );
        assert!(
            f.fix.as_deref().unwrap().contains("exposes no ROM"),
            "{f:#?}"
        );
    }
}
