//! ARM core types: the implementer and part number each processor reports
//! (`CPU implementer` / `CPU part` in `/proc/cpuinfo`, or the MIDR_EL1 register
//! in sysfs `regs/identification/midr_el1`), and the names of the well-known
//! parts. The part tells core kinds apart on big.LITTLE chips, as hwloc does.

use super::ParseError;
use procfs_core::{CpuInfo, FromRead};
use std::collections::BTreeMap;

/// One ARM core type: who designed it and which design it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ArmPart {
    pub implementer: u8,
    pub part: u16,
}

/// ARM Ltd's implementer code (`CPU implementer : 0x41`).
const ARM_LTD: u8 = 0x41;

impl ArmPart {
    /// The core's name when it is a well-known design (`Cortex-A725`).
    /// Part numbers from the Linux kernel's arch/arm64/include/asm/cputype.h.
    pub fn name(&self) -> Option<&'static str> {
        if self.implementer != ARM_LTD {
            return None;
        }
        Some(match self.part {
            0xd03 => "Cortex-A53",
            0xd04 => "Cortex-A35",
            0xd05 => "Cortex-A55",
            0xd07 => "Cortex-A57",
            0xd08 => "Cortex-A72",
            0xd09 => "Cortex-A73",
            0xd0a => "Cortex-A75",
            0xd0b => "Cortex-A76",
            0xd0c => "Neoverse N1",
            0xd0d => "Cortex-A77",
            0xd0e => "Cortex-A76AE",
            0xd40 => "Neoverse V1",
            0xd41 => "Cortex-A78",
            0xd42 => "Cortex-A78AE",
            0xd44 => "Cortex-X1",
            0xd46 => "Cortex-A510",
            0xd47 => "Cortex-A710",
            0xd48 => "Cortex-X2",
            0xd49 => "Neoverse N2",
            0xd4b => "Cortex-A78C",
            0xd4c => "Cortex-X1C",
            0xd4d => "Cortex-A715",
            0xd4e => "Cortex-X3",
            0xd4f => "Neoverse V2",
            0xd80 => "Cortex-A520",
            0xd81 => "Cortex-A720",
            0xd82 => "Cortex-X4",
            0xd84 => "Neoverse V3",
            0xd85 => "Cortex-X925",
            0xd87 => "Cortex-A725",
            0xd8e => "Neoverse N3",
            _ => return None,
        })
    }

    /// The name, or the raw ids when the part is not in the table.
    pub fn label(&self) -> String {
        match self.name() {
            Some(n) => n.to_string(),
            None => format!(
                "CPU part {:#05x} (implementer {:#04x})",
                self.part, self.implementer
            ),
        }
    }
}

fn hex(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    u64::from_str_radix(digits, 16).ok()
}

/// The part of every processor that `/proc/cpuinfo` describes, by CPU id
/// (its `processor` number). Empty on x86, whose cpuinfo has no such fields.
pub fn parse_cpuinfo_parts(text: &str) -> BTreeMap<u32, ArmPart> {
    let Ok(info) = CpuInfo::from_read(text.as_bytes()) else {
        return BTreeMap::new();
    };
    (0..info.num_cores())
        .filter_map(|i| {
            let id: u32 = info.get_field(i, "processor")?.trim().parse().ok()?;
            let implementer = u8::try_from(hex(info.get_field(i, "CPU implementer")?)?).ok()?;
            let part = u16::try_from(hex(info.get_field(i, "CPU part")?)?).ok()?;
            (part <= 0xfff).then_some((id, ArmPart { implementer, part }))
        })
        .collect()
}

/// `0x00000000410fd871` (sysfs `midr_el1`) -> implementer 0x41, part 0xd87.
pub fn parse_midr(text: &str) -> Result<ArmPart, ParseError> {
    let v =
        hex(text).ok_or_else(|| ParseError::new(format!("{:?} is not a hex MIDR", text.trim())))?;
    let implementer = ((v >> 24) & 0xff) as u8;
    let part = ((v >> 4) & 0xfff) as u16;
    Ok(ArmPart { implementer, part })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midr_fields() {
        // GB10's cpu0 and cpu5 (hwloc's nvidia-dgx-gb10 tree).
        let a = parse_midr("0x00000000410fd871\n").unwrap();
        assert_eq!((a.implementer, a.part), (0x41, 0xd87));
        assert_eq!(a.name(), Some("Cortex-A725"));
        assert_eq!(
            parse_midr("0x00000000410fd851").unwrap().name(),
            Some("Cortex-X925")
        );
        assert!(parse_midr("garbage").is_err());
    }

    #[test]
    fn unknown_parts_keep_their_ids() {
        // Kunpeng 920 (HiSilicon TSV110): implementer 0x48, part 0xd01.
        let p = ArmPart {
            implementer: 0x48,
            part: 0xd01,
        };
        assert_eq!(p.label(), "CPU part 0xd01 (implementer 0x48)");
    }

    #[test]
    fn x86_cpuinfo_has_no_parts() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: X\n\n";
        assert!(parse_cpuinfo_parts(text).is_empty());
    }
}
