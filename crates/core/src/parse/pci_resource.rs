//! PCI `resource` files: one line per region, `start end flags` in hex.

use super::ParseError;
use serde::Serialize;

/// One memory or I/O region (BAR) of a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bar {
    /// Line number in `resource` (0-5 are BARs, 6 the expansion ROM).
    pub index: usize,
    pub start: u64,
    pub size_bytes: u64,
    pub io: bool,
    pub prefetchable: bool,
    pub is_64bit: bool,
}

const IORESOURCE_IO: u64 = 0x100;
const IORESOURCE_PREFETCH: u64 = 0x2000;
const IORESOURCE_MEM_64: u64 = 0x0010_0000;

fn hex(s: &str) -> Result<u64, ParseError> {
    let t = s.trim();
    u64::from_str_radix(t.trim_start_matches("0x"), 16)
        .map_err(|_| ParseError::new(format!("{t:?} is not a hex number")))
}

/// The regions that exist (size > 0).
pub fn parse_resource(text: &str) -> Result<Vec<Bar>, ParseError> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() != 3 {
            return Err(ParseError::new(format!(
                "line {}: expected start end flags: {line:?}",
                index + 1
            )));
        }
        let (start, end, flags) = (hex(f[0])?, hex(f[1])?, hex(f[2])?);
        if end == 0 || end < start {
            continue;
        }
        out.push(Bar {
            index,
            start,
            size_bytes: end - start + 1,
            io: flags & IORESOURCE_IO != 0,
            prefetchable: flags & IORESOURCE_PREFETCH != 0,
            is_64bit: flags & IORESOURCE_MEM_64 != 0,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_bars() {
        // A GTX 1080 Ti-like layout: 16 MiB MMIO, 256 MiB prefetchable 64-bit, I/O.
        let text = "0x00000000f6000000 0x00000000f6ffffff 0x0000000000040200\n0x000000e000000000 0x000000e00fffffff 0x000000000014220c\n0x0000000000000000 0x0000000000000000 0x0000000000000000\n0x000000000000e000 0x000000000000e07f 0x0000000000040101\n";
        let bars = parse_resource(text).unwrap();
        assert_eq!(bars.len(), 3);
        assert_eq!(bars[0].size_bytes, 16 << 20);
        assert!(bars[1].prefetchable && bars[1].is_64bit && bars[1].start > u64::from(u32::MAX));
        assert_eq!(bars[1].size_bytes, 256 << 20);
        assert!(bars[2].io && bars[2].index == 3);
        assert!(parse_resource("0x1 0x2\n").is_err());
    }
}
