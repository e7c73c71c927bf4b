//! A PCI function's address, parsed once at the edge: `DDDD:BB:SS.F` as
//! sysfs names it, or `BB:SS.F` as people type it (domain 0000). The one
//! grammar for `tune --gpu/--device/--sriov`, the helper's check of a
//! request, the sysfs listing (`pci::is_pci_address`) and the domain's
//! `<address>` (`domain::hostdev`).

use std::fmt;

/// A PCI address split into its parts (slot below 32, function below 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddr {
    pub domain: u16,
    pub bus: u8,
    pub slot: u8,
    pub function: u8,
}

/// A value that is not a PCI address, with the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a PCI address (DDDD:BB:SS.F or BB:SS.F, e.g. 0000:0b:00.0)")]
pub struct NotPciAddr(pub String);

impl PciAddr {
    /// `0000:0a:00.1` or `0a:00.1`: hex digits, exactly so many of each.
    pub fn parse(addr: &str) -> Option<PciAddr> {
        let hex = |s: &str, n: usize| {
            (s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u16::from_str_radix(s, 16).ok())
                .flatten()
        };
        let parts: Vec<&str> = addr.split(':').collect();
        let (domain, bus, rest) = match parts.as_slice() {
            [d, b, r] => (hex(d, 4)?, *b, *r),
            [b, r] => (0, *b, *r),
            _ => return None,
        };
        let (slot, function) = rest.split_once('.')?;
        let a = PciAddr {
            domain,
            bus: u8::try_from(hex(bus, 2)?).ok()?,
            slot: u8::try_from(hex(slot, 2)?).ok()?,
            function: u8::try_from(hex(function, 1)?).ok()?,
        };
        (a.slot < 32 && a.function < 8).then_some(a)
    }
}

impl std::str::FromStr for PciAddr {
    type Err = NotPciAddr;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PciAddr::parse(s).ok_or_else(|| NotPciAddr(s.to_string()))
    }
}

/// As sysfs names it: `0000:0b:00.0`.
impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.slot, self.function
        )
    }
}

/// On the wire (a tuning request, the journal) as sysfs spells it; a value
/// that is not an address is refused where it is read, with its words.
/// Spaces around it are dropped when it is read: a journal written before
/// the request was typed may hold `" 0b:00.0"` as it was typed (the planner
/// trimmed it then), and that transaction must still load and undo.
impl serde::Serialize for PciAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for PciAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.trim().parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_grammar() {
        for (typed, sysfs) in [
            ("0000:0b:00.0", "0000:0b:00.0"),
            ("0b:00.1", "0000:0b:00.1"),
            ("0001:FF:1f.7", "0001:ff:1f.7"),
        ] {
            assert_eq!(typed.parse::<PciAddr>().unwrap().to_string(), sysfs);
        }
        for bad in [
            "",
            "0b:00",
            "0b:00.8",
            "0b:20.0",
            "zz:00.0",
            "10000:01:00.0",
            "0:1:2.3",
            "+b:00.0",
            " 0b:00.0",
            "../../etc",
            "pci0000:00",
            "0000:0b:00.0.0",
        ] {
            assert_eq!(
                bad.parse::<PciAddr>(),
                Err(NotPciAddr(bad.to_string())),
                "{bad:?}"
            );
        }
        assert!(
            NotPciAddr("x".into())
                .to_string()
                .contains("not a PCI address")
        );
    }
}
