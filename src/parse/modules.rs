//! `/proc/modules`: the loaded kernel modules.

use super::ParseError;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadedModule {
    pub name: String,
    pub size_bytes: u64,
    pub used_by: Vec<String>,
}

/// Parse `/proc/modules`: `name size refcount users state address` per line.
pub fn parse_modules(text: &str) -> Result<Vec<LoadedModule>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.split_whitespace();
        let name = fields
            .next()
            .ok_or_else(|| ParseError::new(format!("line {}: empty", i + 1)))?;
        let size_bytes = fields
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ParseError::new(format!("line {}: no module size: {line:?}", i + 1)))?;
        let _refcount = fields.next();
        let used_by = fields
            .next()
            .map(|u| {
                u.split(',')
                    .filter(|s| !s.is_empty() && *s != "-")
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        out.push(LoadedModule {
            name: name.to_string(),
            size_bytes,
            used_by,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_lines() {
        let text = "vfio_pci 16384 0 - Live 0x0000000000000000\nvfio_pci_core 94208 1 vfio_pci, Live 0x0000000000000000\nkvm_amd 200704 0 - Live 0x0000000000000000\n";
        let m = parse_modules(text).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].name, "vfio_pci_core");
        assert_eq!(m[1].used_by, vec!["vfio_pci"]);
        assert!(m[0].used_by.is_empty());
        assert!(parse_modules("garbage\n").is_err());
    }
}
