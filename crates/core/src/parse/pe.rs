//! The section table of a PE image, from its headers alone. A unified
//! kernel image (UKI) is systemd's EFI stub with sections of its own —
//! `.osrel`, `.cmdline`, `.uname`, `.linux`, `.initrd` — so the command line
//! a UKI boots with is the bytes of its `.cmdline` section; an Authenticode
//! signature (what Secure Boot checks) sits in the Certificate Table that
//! the optional header's fifth data directory points at.
//!
//! Layout (Microsoft's PE format): the DOS header's `e_lfanew` at 0x3c
//! points at `PE\0\0`; the COFF header follows (section count at +6, the
//! optional header's size at +20), then the optional header (magic 0x10b
//! PE32 or 0x20b PE32+; the data directories at +96 or +112), then 40 bytes
//! a section: name, virtual size, virtual address, raw size, raw offset.

/// One section: where its bytes are in the file and how many count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeSection {
    pub name: String,
    /// File offset of the section's data.
    pub offset: u64,
    /// The bytes that belong to it: the smaller of its virtual and raw sizes
    /// (the raw size is padded to the file alignment).
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeImage {
    pub sections: Vec<PeSection>,
    /// A Certificate Table is present (an Authenticode signature).
    pub signed: bool,
}

impl PeImage {
    pub fn section(&self, name: &str) -> Option<&PeSection> {
        self.sections.iter().find(|s| s.name == name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeError {
    #[error("not a PE image: no MZ header")]
    NotMz,
    #[error("not a PE image: no PE signature at {0:#x}")]
    NoPeSignature(u64),
    #[error("the PE headers end past the {0} bytes read")]
    Truncated(usize),
    #[error("unknown optional header magic {0:#x}")]
    BadMagic(u16),
}

/// How many of a file's first bytes hold any sane image's headers (the
/// section table included): what a caller reads before `parse`.
pub const HEADER_BYTES: u64 = 64 * 1024;

/// More sections than any stub or kernel has: a bound on what a hostile
/// file's count can make us build.
const MAX_SECTIONS: usize = 96;

fn u16_at(b: &[u8], at: usize) -> Result<u16, PeError> {
    b.get(at..at + 2)
        .map(|x| u16::from_le_bytes([x[0], x[1]]))
        .ok_or(PeError::Truncated(b.len()))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, PeError> {
    b.get(at..at + 4)
        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
        .ok_or(PeError::Truncated(b.len()))
}

/// The section table and signature of the image whose first bytes are
/// `head` (at least its headers; `HEADER_BYTES` is plenty).
pub fn parse(head: &[u8]) -> Result<PeImage, PeError> {
    if head.get(..2) != Some(b"MZ") {
        return Err(PeError::NotMz);
    }
    let pe = u32_at(head, 0x3c)? as usize;
    if head.get(pe..pe + 4) != Some(b"PE\0\0") {
        return Err(PeError::NoPeSignature(pe as u64));
    }
    let coff = pe + 4;
    let count = usize::from(u16_at(head, coff + 2)?).min(MAX_SECTIONS);
    let opt_size = usize::from(u16_at(head, coff + 16)?);
    let opt = coff + 20;
    let dirs = match u16_at(head, opt)? {
        0x10b => opt + 96,
        0x20b => opt + 112,
        m => return Err(PeError::BadMagic(m)),
    };
    let dir_count = u32_at(head, dirs - 4)? as usize;
    // Data directory 4: the Certificate Table (a file offset and a size).
    let signed =
        dir_count > 4 && dirs + 5 * 8 <= opt + opt_size && u32_at(head, dirs + 4 * 8 + 4)? > 0;
    let table = opt + opt_size;
    let mut sections = Vec::with_capacity(count);
    for i in 0..count {
        let at = table + i * 40;
        let raw_name = head.get(at..at + 8).ok_or(PeError::Truncated(head.len()))?;
        let name: String = raw_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| char::from(c))
            .collect();
        let virtual_size = u32_at(head, at + 8)?;
        let raw_size = u32_at(head, at + 16)?;
        let offset = u32_at(head, at + 20)?;
        let size = if virtual_size == 0 {
            raw_size
        } else {
            virtual_size.min(raw_size)
        };
        sections.push(PeSection {
            name,
            offset: u64::from(offset),
            size: u64::from(size),
        });
    }
    Ok(PeImage { sections, signed })
}

/// A section's bytes as the text a UKI keeps there (`.cmdline`, `.uname`,
/// `.osrel`): NULs and the trailing newline dropped.
pub fn section_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end])
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        assert_eq!(parse(b""), Err(PeError::NotMz));
        assert_eq!(parse(b"MZ"), Err(PeError::Truncated(2)));
        let mut b = vec![0u8; 0x100];
        b[..2].copy_from_slice(b"MZ");
        b[0x3c] = 0x80;
        assert_eq!(parse(&b), Err(PeError::NoPeSignature(0x80)));
        b[0x3c..0x40].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&b).is_err());
        b[0x3c] = 0x80;
        b[0x3d..0x40].fill(0);
        b[0x80..0x84].copy_from_slice(b"PE\0\0");
        // A section count of 65535 and headers cut short.
        b[0x86] = 0xff;
        b[0x87] = 0xff;
        b[0x98] = 0x0b;
        b[0x99] = 0x02;
        assert!(matches!(parse(&b), Err(PeError::Truncated(_))));
    }

    #[test]
    fn section_text_stops_at_the_first_nul() {
        assert_eq!(
            section_text(b"root=/dev/sda1 quiet\n\0\0\0"),
            "root=/dev/sda1 quiet"
        );
        assert_eq!(section_text(b""), "");
    }
}
