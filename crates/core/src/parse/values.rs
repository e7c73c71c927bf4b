//! Small sysfs value formats: hex ids (`0x10de`), signed integers, link speeds
//! (`8.0 GT/s PCIe`), bracketed choices (`always [madvise] never`), sizes (`32K`).

use super::ParseError;

/// `0x10de` (or `10de`) as a number.
pub fn parse_hex_u32(text: &str) -> Result<u32, ParseError> {
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u32::from_str_radix(digits, 16)
        .map_err(|_| ParseError::new(format!("{t:?} is not a hex number")))
}

/// A 16-bit hex id such as a PCI vendor id.
pub fn parse_hex_u16(text: &str) -> Result<u16, ParseError> {
    let v = parse_hex_u32(text)?;
    u16::try_from(v).map_err(|_| ParseError::new(format!("{v:#x} does not fit 16 bits")))
}

/// A decimal integer (may be negative, e.g. `numa_node` = -1).
pub fn parse_i64(text: &str) -> Result<i64, ParseError> {
    let t = text.trim();
    t.parse()
        .map_err(|_| ParseError::new(format!("{t:?} is not a whole number")))
}

/// An unsigned decimal integer.
pub fn parse_u64(text: &str) -> Result<u64, ParseError> {
    let t = text.trim();
    t.parse()
        .map_err(|_| ParseError::new(format!("{t:?} is not a whole number")))
}

/// The selected word of a bracketed choice list: `always [madvise] never` -> `madvise`.
pub fn parse_bracket_choice(text: &str) -> Result<String, ParseError> {
    let t = text.trim();
    let start = t
        .find('[')
        .ok_or_else(|| ParseError::new(format!("no [selected] value in {t:?}")))?;
    let end = t[start..]
        .find(']')
        .ok_or_else(|| ParseError::new(format!("unclosed [ in {t:?}")))?;
    Ok(t[start + 1..start + end].to_string())
}

/// A PCIe link speed in GT/s: `8.0 GT/s PCIe`, `2.5 GT/s`, `Unknown` -> None.
pub fn parse_link_speed_gts(text: &str) -> Result<Option<f32>, ParseError> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("unknown") || t.starts_with("Unknown") {
        return Ok(None);
    }
    let num = t.split_whitespace().next().unwrap_or("");
    num.parse::<f32>()
        .map(Some)
        .map_err(|_| ParseError::new(format!("{t:?} is not a link speed")))
}

/// A cache size such as `32K`, `1280K`, `24576K`, `16M` in KiB.
pub fn parse_size_kib(text: &str) -> Result<u64, ParseError> {
    let t = text.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix('K') {
        (n, 1)
    } else if let Some(n) = t.strip_suffix('M') {
        (n, 1024)
    } else if let Some(n) = t.strip_suffix('G') {
        (n, 1024 * 1024)
    } else {
        (t, 1)
    };
    num.trim()
        .parse::<u64>()
        .map(|n| n.saturating_mul(mult))
        .map_err(|_| ParseError::new(format!("{t:?} is not a size")))
}

/// A memory size as people type it for a VM: `16G`, `16GiB`, `12288M`,
/// `12288MiB`, `1T`, or a bare number of MiB. In MiB; zero is refused.
pub fn parse_memory_mib(text: &str) -> Result<u64, ParseError> {
    let t = text.trim();
    let bad = || ParseError::new(format!("{t:?} is not a memory size (try 16G or 12288M)"));
    let lower = t.to_ascii_lowercase();
    let unitless = lower.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match unitless.char_indices().last() {
        Some((i, 'm')) => (&unitless[..i], 1),
        Some((i, 'g')) => (&unitless[..i], 1024),
        Some((i, 't')) => (&unitless[..i], 1024 * 1024),
        _ => (unitless, 1),
    };
    let n: u64 = num.trim().parse().map_err(|_| bad())?;
    if n == 0 {
        return Err(bad());
    }
    n.checked_mul(mult).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory_mib("16G").unwrap(), 16384);
        assert_eq!(parse_memory_mib("16GiB").unwrap(), 16384);
        assert_eq!(parse_memory_mib("12288M").unwrap(), 12288);
        assert_eq!(parse_memory_mib("12288mib").unwrap(), 12288);
        assert_eq!(parse_memory_mib(" 8192 ").unwrap(), 8192);
        assert_eq!(parse_memory_mib("1T").unwrap(), 1_048_576);
        for bad in [
            "",
            "0",
            "G",
            "-4G",
            "16X",
            "sixteen",
            "99999999999999999999T",
        ] {
            assert!(parse_memory_mib(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hex_ids() {
        assert_eq!(parse_hex_u16("0x10de\n").unwrap(), 0x10de);
        assert_eq!(parse_hex_u32("0x030000").unwrap(), 0x030000);
        assert!(parse_hex_u16("0x123456").is_err());
        assert!(parse_hex_u16("zz").is_err());
    }

    #[test]
    fn choices_and_speeds() {
        assert_eq!(
            parse_bracket_choice("always [madvise] never\n").unwrap(),
            "madvise"
        );
        assert!(parse_bracket_choice("always").is_err());
        assert_eq!(parse_link_speed_gts("8.0 GT/s PCIe").unwrap(), Some(8.0));
        assert_eq!(parse_link_speed_gts("16.0 GT/s PCIe").unwrap(), Some(16.0));
        assert_eq!(parse_link_speed_gts("Unknown").unwrap(), None);
        assert!(parse_link_speed_gts("fast").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size_kib("32K").unwrap(), 32);
        assert_eq!(parse_size_kib("16M").unwrap(), 16384);
        assert!(parse_size_kib("lots").is_err());
        assert_eq!(parse_i64("-1").unwrap(), -1);
    }
}
