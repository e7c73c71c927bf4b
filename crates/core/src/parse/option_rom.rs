//! PCI expansion ROMs (what a GPU's `rom` in sysfs holds, what `<rom file=…/>`
//! points at): a chain of images, each starting `55 AA`, with a pointer at
//! 0x18 to its "PCIR" data structure (vendor, device, length in 512-byte
//! units, code type, "last image" flag). Code type 3 is UEFI: there the image
//! header also names the machine (0x8664 = x64). A GPU ROM with an x64 UEFI
//! image carries the GOP driver OVMF needs to show anything before Windows
//! loads its own driver.

use super::ParseError;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeType {
    /// Legacy x86 BIOS code (the VGA BIOS CSM uses).
    X86Bios,
    OpenFirmware,
    PaRisc,
    Efi,
    Other(u8),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RomImage {
    /// Byte offset of this image's 55AA.
    pub offset: usize,
    pub vendor_id: u16,
    pub device_id: u16,
    pub length: usize,
    pub code_type: CodeType,
    /// For UEFI images: the machine type (0x8664 x64, 0x014c IA32, 0xaa64 ARM64, 0x0ebc EBC).
    pub efi_machine: Option<u16>,
    pub last: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OptionRom {
    /// Bytes before the first 55AA (0 for a clean ROM; nvflash-style dumps
    /// carry a header there that must be cut off).
    pub leading_bytes: usize,
    pub images: Vec<RomImage>,
    /// Where the image chain broke, when it did (a cut-off dump, a damaged
    /// image): the images before it are in `images`.
    pub chain_problem: Option<String>,
}

impl OptionRom {
    /// An x64 UEFI driver (the GOP, for a graphics card) is in the ROM.
    pub fn has_uefi_x64(&self) -> bool {
        self.images
            .iter()
            .any(|i| i.code_type == CodeType::Efi && i.efi_machine == Some(0x8664))
    }
    pub fn has_legacy(&self) -> bool {
        self.images.iter().any(|i| i.code_type == CodeType::X86Bios)
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|x| u16::from_le_bytes([x[0], x[1]]))
}

/// One image at `at`, or why not.
fn image_at(b: &[u8], at: usize) -> Result<RomImage, ParseError> {
    if b.get(at..at + 2) != Some(&[0x55, 0xaa]) {
        return Err(ParseError::new(format!(
            "no 55AA signature at byte {at:#x}"
        )));
    }
    let pcir = usize::from(
        u16_at(b, at + 0x18)
            .ok_or_else(|| ParseError::new(format!("the image at {at:#x} is cut short")))?,
    );
    let p = at + pcir;
    if b.get(p..p + 4) != Some(b"PCIR") {
        return Err(ParseError::new(format!(
            "image at {at:#x}: no PCIR structure where its header points ({p:#x})"
        )));
    }
    let field = |o: usize| {
        u16_at(b, p + o)
            .ok_or_else(|| ParseError::new(format!("the PCIR structure at {p:#x} is cut short")))
    };
    let code = *b
        .get(p + 0x14)
        .ok_or_else(|| ParseError::new(format!("the PCIR structure at {p:#x} is cut short")))?;
    let indicator = *b
        .get(p + 0x15)
        .ok_or_else(|| ParseError::new(format!("the PCIR structure at {p:#x} is cut short")))?;
    let code_type = match code {
        0 => CodeType::X86Bios,
        1 => CodeType::OpenFirmware,
        2 => CodeType::PaRisc,
        3 => CodeType::Efi,
        n => CodeType::Other(n),
    };
    // UEFI image header: signature 0x0EF1 (u32) at +4, machine type at +0x0A.
    let efi_machine = (code_type == CodeType::Efi && u16_at(b, at + 4) == Some(0x0ef1))
        .then(|| u16_at(b, at + 0x0a))
        .flatten();
    Ok(RomImage {
        offset: at,
        vendor_id: field(4)?,
        device_id: field(6)?,
        length: usize::from(field(0x10)?) * 512,
        code_type,
        efi_machine,
        last: indicator & 0x80 != 0,
    })
}

/// The images of a ROM dump. A header before the first 55AA is tolerated and
/// measured (`leading_bytes`) when a valid image follows it.
pub fn parse_option_rom(b: &[u8]) -> Result<OptionRom, ParseError> {
    if b.is_empty() {
        return Err(ParseError::new(
            "the ROM is empty (sysfs gives nothing until the ROM is enabled)",
        ));
    }
    // The first 55AA that starts a valid image (headers are a few KiB at most).
    let limit = b.len().min(256 * 1024);
    let start = (0..limit.saturating_sub(1))
        .filter(|&i| b[i] == 0x55 && b[i + 1] == 0xaa)
        .find(|&i| image_at(b, i).is_ok())
        .ok_or_else(|| {
            ParseError::new("not a PCI option ROM: no 55AA image with a PCIR structure")
        })?;
    let mut images = Vec::new();
    let mut chain_problem = None;
    let mut at = start;
    loop {
        let img = match image_at(b, at) {
            Ok(i) => i,
            Err(e) => {
                chain_problem = Some(format!("after {} image(s): {e}", images.len()));
                break;
            }
        };
        let (len, last) = (img.length, img.last);
        if at + len > b.len() {
            // A cut-off image is not one: its code is incomplete.
            chain_problem = Some(format!(
                "the image at {at:#x} is {len} bytes but the ROM ends at {:#x} (a cut-off dump?)",
                b.len()
            ));
            break;
        }
        images.push(img);
        if last || len == 0 {
            break;
        }
        at += len;
        if at >= b.len() {
            chain_problem = Some(format!(
                "the ROM ends at {:#x} but its image chain goes on (a cut-off dump?)",
                b.len()
            ));
            break;
        }
        if images.len() > 16 {
            break;
        }
    }
    Ok(OptionRom {
        leading_bytes: start,
        images,
        chain_problem,
    })
}

/// A real ROM from tests/fixtures/roms (for this crate's unit tests).
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let p = format!(
        "{}/../../tests/fixtures/roms/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vga_bios_without_uefi() {
        let rom = parse_option_rom(&fixture("vgabios-stdvga.bin")).unwrap();
        assert_eq!(rom.leading_bytes, 0);
        assert_eq!(rom.images.len(), 1);
        let i = &rom.images[0];
        assert_eq!((i.vendor_id, i.device_id), (0x1234, 0x1111));
        assert_eq!(i.code_type, CodeType::X86Bios);
        assert!(rom.has_legacy() && !rom.has_uefi_x64());
    }

    #[test]
    fn legacy_and_uefi_images() {
        let rom = parse_option_rom(&fixture("efi-virtio.rom")).unwrap();
        assert!(rom.images.len() >= 2, "{rom:?}");
        assert!(rom.has_legacy() && rom.has_uefi_x64(), "{rom:?}");
        assert!(rom.images.iter().all(|i| i.vendor_id == 0x1af4));
        assert!(rom.images.last().unwrap().last);
    }

    #[test]
    fn a_header_in_front_and_damage() {
        let real = fixture("vgabios-stdvga.bin");
        // An nvflash-style dump: a header before the ROM proper.
        let mut dump = vec![0u8; 0x600];
        dump[..4].copy_from_slice(b"NVGI");
        dump.extend_from_slice(&real);
        let rom = parse_option_rom(&dump).unwrap();
        assert_eq!(rom.leading_bytes, 0x600);
        // Cut off in the middle of the chain: the images before it, and why.
        let both = fixture("efi-virtio.rom");
        let cut = parse_option_rom(&both[..both.len() / 3]).unwrap();
        assert!(
            cut.chain_problem.as_deref().unwrap().contains("cut-off"),
            "{cut:?}"
        );
        assert_eq!(cut.images[0].code_type, CodeType::X86Bios);
        assert!(parse_option_rom(&both).unwrap().chain_problem.is_none());
        assert!(parse_option_rom(b"").is_err());
        assert!(parse_option_rom(&[0x55, 0xaa, 0, 0]).is_err());
        assert!(parse_option_rom(&vec![0xffu8; 70_000]).is_err());
    }
}
