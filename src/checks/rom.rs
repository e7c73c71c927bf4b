//! `device.rom`: what is in a graphics card's ROM (read from the card, or the
//! file a domain's `<rom file=…/>` names). OVMF can only show a picture before
//! Windows loads its driver if the ROM carries an x64 UEFI image (the GOP
//! driver); a dump with a header in front of it, or one for another card,
//! leaves the screen black or the card dead (Code 43).

use super::model::{Finding, Status};
use crate::parse::option_rom::{CodeType, OptionRom, parse_option_rom};

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

/// The finding for one ROM: `source` names where it came from (the sysfs
/// file or the ROM file), `card` is the (vendor, device) it is meant for.
pub fn rom_finding(
    device: Option<&str>,
    card: Option<(u16, u16)>,
    source: &str,
    bytes: &Result<Vec<u8>, String>,
) -> Finding {
    let mut f = Finding::new("device.rom", "", Status::Pass).why(WHY);
    if let Some(d) = device {
        f = f.device(d);
    }
    let who = device.unwrap_or("the card");
    // Titles name a file by its path, a card's own ROM as such.
    let name = if device.is_some() && source.ends_with("/rom") {
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
            .evidence(source.to_string(), reason.clone())
            .fix(if reason.contains("does not exist") {
                "This device exposes no ROM (integrated and virtual GPUs often do not): check a ROM file instead with `vfio-assistant rom --file FILE`."
            } else {
                "Run as root. Some cards give their ROM only while no driver uses them (bind to vfio-pci first); else dump it in Windows with GPU-Z, or take the card maker's file for the exact model."
            });
        }
    };
    let rom = match parse_option_rom(bytes) {
        Ok(r) => r,
        Err(e) => {
            return Finding {
                title: format!("{name} is not a usable PCI option ROM"),
                status: Status::Fail,
                ..f
            }
            .evidence(source.to_string(), format!("{} bytes: {e}", bytes.len()))
            .fix("Dump the ROM again (as root, with the card idle), or use the card maker's file; `vfio-assistant rom ADDRESS --save FILE` reads and checks it.");
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
        .fix(format!("QEMU hands the file to the guest as is, so the card sees garbage. Cut the header off: `tail -c +{} {source} > fixed.rom` (or `vfio-assistant rom --file {source} --save fixed.rom`) and point <rom file='…'/> at fixed.rom.", n + 1));
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
            "{source} has no UEFI x64 (GOP) driver: a black screen until Windows loads its driver"
        );
        return f.fix("Update the card's firmware with the maker's UEFI/GOP update, or use a ROM of the same model that has one (<rom file='…'/>); or boot the VM with SeaBIOS/CSM (legacy), which uses the VGA BIOS.");
    }
    f.title = format!("{name} carries a UEFI x64 (GOP) driver");
    if let (Some((_, d)), Some(i)) = (card, first)
        && i.device_id != d
    {
        f.status = Status::Info;
        f.title.push_str(&format!(
            ", made for device {:04x} (the card is {d:04x}: a sibling model? check it is the same board)",
            i.device_id
        ));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::option_rom::fixture;

    #[test]
    fn verdicts_on_real_roms() {
        let gop = Ok(fixture("efi-virtio.rom"));
        let f = rom_finding(
            Some("0000:01:00.0"),
            Some((0x1af4, 0x1041)),
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
        let f = rom_finding(None, Some((0x1234, 0x1111)), "vgabios-stdvga.bin", &vga);
        assert_eq!(f.status, Status::Warn);
        assert!(f.title.contains("no UEFI x64"));

        // The same vendor, another device id: said, not failed.
        let f = rom_finding(None, Some((0x1af4, 0x1000)), "efi-virtio.rom", &gop);
        assert_eq!(f.status, Status::Info);
        assert!(f.title.contains("made for device 1041"));
        // Meant for an NVIDIA card: the wrong vendor.
        let f = rom_finding(None, Some((0x10de, 0x1b80)), "efi-virtio.rom", &gop);
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

        let f = rom_finding(None, None, "x.rom", &Ok(b"<html>404</html>".to_vec()));
        assert_eq!(f.status, Status::Fail);
        let f = rom_finding(
            Some("0000:01:00.0"),
            None,
            "rom",
            &Err("permission denied".into()),
        );
        assert_eq!(f.status, Status::Unknown);
    }
}
