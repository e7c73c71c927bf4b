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
