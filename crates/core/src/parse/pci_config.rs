//! PCI configuration space (`config` in sysfs): the capability lists. Unprivileged
//! reads see only the first 64 bytes, so everything here is optional.

use serde::Serialize;

/// What the capability lists say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConfigInfo {
    /// How many bytes could be read (64 when not root, 256 or 4096 as root).
    pub bytes: usize,
    /// Capability names in list order (standard, then extended).
    pub capabilities: Vec<String>,
    /// Function Level Reset advertised in the PCI Express capability.
    pub flr: Option<bool>,
    /// Access Control Services: the device/port can isolate peer traffic.
    pub acs: bool,
    /// Resizable BAR capability present.
    pub resizable_bar: bool,
    /// It reads all ones: the function does not answer (gone from the bus,
    /// or stuck after a reset or in D3cold).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dead: bool,
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(off)?,
        *b.get(off + 1)?,
        *b.get(off + 2)?,
        *b.get(off + 3)?,
    ]))
}

fn std_cap_name(id: u8) -> String {
    match id {
        0x01 => "Power Management".into(),
        0x05 => "MSI".into(),
        0x09 => "Vendor Specific".into(),
        0x0d => "Bridge Subsystem ID".into(),
        0x10 => "PCI Express".into(),
        0x11 => "MSI-X".into(),
        0x12 => "SATA".into(),
        0x13 => "Advanced Features".into(),
        other => format!("capability {other:#04x}"),
    }
}

fn ext_cap_name(id: u16) -> String {
    match id {
        0x0001 => "AER".into(),
        0x0002 | 0x0009 => "Virtual Channel".into(),
        0x0003 => "Device Serial Number".into(),
        0x0004 => "Power Budgeting".into(),
        0x000b => "Vendor Specific (ext)".into(),
        0x000d => "ACS".into(),
        0x000e => "ARI".into(),
        0x000f => "ATS".into(),
        0x0010 => "SR-IOV".into(),
        0x0013 => "PRI".into(),
        0x0015 => "Resizable BAR".into(),
        0x0018 => "LTR".into(),
        0x0019 => "Secondary PCI Express".into(),
        0x001b => "PASID".into(),
        0x001e => "L1 PM Substates".into(),
        0x0024 => "VF Resizable BAR".into(),
        0x0025 => "Data Link Feature".into(),
        0x0026 => "Physical Layer 16 GT/s".into(),
        other => format!("ext capability {other:#06x}"),
    }
}

/// Offsets of the extended capabilities (`(offset, id)`), bounded against loops.
fn ext_caps(b: &[u8]) -> Vec<(usize, u16)> {
    let mut out = Vec::new();
    let mut off = 0x100usize;
    for _ in 0..64 {
        let Some(hdr) = u32_at(b, off) else { break };
        if hdr == 0 || hdr == 0xffff_ffff {
            break;
        }
        out.push((off, (hdr & 0xffff) as u16));
        let next = ((hdr >> 20) & 0xffc) as usize;
        if next < 0x100 || next <= off {
            break;
        }
        off = next;
    }
    out
}

/// Parse a config space dump. Never panics; short or garbage dumps give less.
pub fn parse_config(b: &[u8]) -> ConfigInfo {
    let mut info = ConfigInfo {
        bytes: b.len(),
        ..ConfigInfo::default()
    };
    let status = u16_at(b, 0x06).unwrap_or(0);
    if status & 0x10 != 0 {
        let mut ptr = usize::from(b.get(0x34).copied().unwrap_or(0) & 0xfc);
        let mut seen = 0;
        while ptr >= 0x40 && seen < 48 {
            let (Some(&id), Some(&next)) = (b.get(ptr), b.get(ptr + 1)) else {
                break;
            };
            info.capabilities.push(std_cap_name(id));
            if id == 0x10 {
                info.flr = u32_at(b, ptr + 4).map(|devcap| devcap & (1 << 28) != 0);
            }
            ptr = usize::from(next & 0xfc);
            seen += 1;
        }
    }
    for (_, id) in ext_caps(b) {
        info.acs |= id == 0x000d;
        info.resizable_bar |= id == 0x0015;
        info.capabilities.push(ext_cap_name(id));
    }
    info
}

/// The same answer as `parse_config` on the whole dump, from the few bytes
/// the capability lists take: the status word and the capabilities pointer,
/// each standard capability's first 8 bytes, each extended capability's
/// header. `read(offset, len)`
/// gives what it could read there (less or nothing past what this reader may
/// see: 64 bytes unprivileged). Config space reads trap into the hypervisor
/// on a VM and are uncached ECAM reads on metal, one per 4 bytes: a whole
/// 4 KiB dump is 1024 of them per device, this is about twenty.
pub fn read_config(mut read: impl FnMut(usize, usize) -> Vec<u8>) -> ConfigInfo {
    // The header's two fields the lists need (the IDs and class come from
    // sysfs's own files): the status word and the capabilities pointer.
    let status = read(0x04, 4);
    if status.len() < 4 {
        return parse_config(&[]);
    }
    if status == [0xff; 4] {
        // A function that answers never has every command and status bit
        // set: it is not answering.
        return ConfigInfo {
            bytes: 64,
            dead: true,
            ..ConfigInfo::default()
        };
    }
    let mut b = vec![0u8; 256];
    b[0x04..0x08].copy_from_slice(&status);
    if let Some(&ptr) = read(0x34, 1).first() {
        b[0x34] = ptr;
    }
    let mut reached = 64;
    let mut fill = |b: &mut Vec<u8>, off: usize, len: usize, reached: &mut usize| -> bool {
        let got = read(off, len);
        let n = got.len().min(b.len().saturating_sub(off));
        b[off..off + n].copy_from_slice(&got[..n]);
        if n > 0 {
            *reached = (*reached).max(if off >= 0x100 { 4096 } else { 256 });
        }
        n == len
    };
    let mut express = false;
    if u16_at(&b, 0x06).unwrap_or(0) & 0x10 == 0 {
        // No capability list: how much this reader sees, from its last byte.
        fill(&mut b, 255, 1, &mut reached);
    } else {
        let mut ptr = usize::from(b[0x34] & 0xfc);
        for _ in 0..48 {
            if ptr < 0x40 || !fill(&mut b, ptr, 8.min(256 - ptr), &mut reached) {
                break;
            }
            express |= b[ptr] == 0x10;
            ptr = usize::from(b[ptr + 1] & 0xfc);
        }
    }
    if express {
        b.resize(4096, 0);
        let mut off = 0x100usize;
        for _ in 0..64 {
            if !fill(&mut b, off, 4, &mut reached) {
                break;
            }
            let hdr = u32_at(&b, off).unwrap_or(0);
            let next = ((hdr >> 20) & 0xffc) as usize;
            if hdr == 0 || hdr == 0xffff_ffff || next < 0x100 || next <= off {
                break;
            }
            off = next;
        }
    }
    b.truncate(reached);
    parse_config(&b)
}

/// The same dump with the Device Serial Number capability's serial zeroed, for
/// snapshots that leave the machine.
pub fn mask_serial_number(b: &[u8]) -> Vec<u8> {
    let mut out = b.to_vec();
    for (off, id) in ext_caps(b) {
        if id == 0x0003 {
            for byte in out.iter_mut().skip(off + 4).take(8) {
                *byte = 0;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_reading_all_ones_is_dead_and_one_that_answers_is_not() {
        let ones = vec![0xffu8; 4096];
        let info = read_config(|off, len| ones[off..off + len].to_vec());
        assert!(info.dead);
        assert!(info.capabilities.is_empty());
        let b = dump();
        let info = read_config(|off, len| b[off..(off + len).min(b.len())].to_vec());
        assert!(!info.dead);
    }

    /// A 4 KiB dump with PM -> PCIe (FLR) and AER -> DSN -> ACS -> Resizable BAR.
    fn dump() -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0x06] = 0x10; // capability list present
        b[0x34] = 0x40;
        b[0x40] = 0x01;
        b[0x41] = 0x50;
        b[0x50] = 0x10;
        b[0x51] = 0x00;
        b[0x54..0x58].copy_from_slice(&(1u32 << 28).to_le_bytes());
        let ext = |b: &mut Vec<u8>, off: usize, id: u32, next: u32| {
            b[off..off + 4].copy_from_slice(&(id | (1 << 16) | (next << 20)).to_le_bytes());
        };
        ext(&mut b, 0x100, 0x0001, 0x140);
        ext(&mut b, 0x140, 0x0003, 0x150);
        b[0x144..0x14c].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        ext(&mut b, 0x150, 0x000d, 0x160);
        ext(&mut b, 0x160, 0x0015, 0);
        b
    }

    /// Read piece by piece, the answer is the whole dump's, from a few
    /// dozen bytes; and an unprivileged reader's 64 bytes give what they did.
    #[test]
    fn piecewise_reads_agree_with_the_whole_dump() {
        let mut no_caps = dump()[..256].to_vec();
        no_caps[0x06] = 0;
        let mut dumps = vec![
            dump(),
            dump()[..256].to_vec(),
            dump()[..64].to_vec(),
            no_caps,
        ];
        let mut loop_dump = dump();
        loop_dump[0x162..0x164].copy_from_slice(&(0x150u16 << 4).to_le_bytes());
        dumps.push(loop_dump);
        for d in dumps {
            let mut asked = 0;
            let piecewise = read_config(|off, len| {
                asked += len;
                d.get(off..d.len().min(off + len))
                    .unwrap_or_default()
                    .to_vec()
            });
            assert_eq!(piecewise, parse_config(&d), "{} bytes", d.len());
            assert!(asked <= 5 + 8 * 4 + 4 * 8, "{asked} bytes asked");
        }
    }

    #[test]
    fn reads_capabilities() {
        let info = parse_config(&dump());
        assert_eq!(info.flr, Some(true));
        assert!(info.acs && info.resizable_bar);
        assert_eq!(
            info.capabilities[..2],
            ["Power Management".to_string(), "PCI Express".to_string()]
        );
        assert!(
            info.capabilities
                .contains(&"Device Serial Number".to_string())
        );
    }

    #[test]
    fn masks_the_serial_only() {
        let d = dump();
        let m = mask_serial_number(&d);
        assert_eq!(&m[0x144..0x14c], &[0u8; 8]);
        assert_eq!(m[0x140..0x144], d[0x140..0x144]);
        assert_eq!(m.len(), d.len());
    }

    #[test]
    fn short_and_looping_dumps_are_safe() {
        assert_eq!(parse_config(&[]).capabilities.len(), 0);
        let mut b = vec![0u8; 256];
        b[0x06] = 0x10;
        b[0x34] = 0x40;
        b[0x40] = 0x05;
        b[0x41] = 0x40; // points at itself
        let info = parse_config(&b);
        assert!(info.capabilities.len() <= 48);
        let mut b = vec![0xffu8; 4096];
        b[0x100..0x104].copy_from_slice(&(0x000du32 | (0x100 << 20)).to_le_bytes());
        assert!(parse_config(&b).capabilities.len() < 64);
    }
}
