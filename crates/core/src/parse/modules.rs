//! `/proc/modules`: the loaded kernel modules.

use super::ParseError;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadedModule {
    pub name: String,
    pub size_bytes: u64,
    pub used_by: Vec<String>,
}

/// Parse `/proc/modules` (`name size refcount users state address` per
/// line) with procfs-core's reader; sorted by name. A line it cannot read
/// fails the whole file, with procfs-core's reason.
pub fn parse_modules(text: &str) -> Result<Vec<LoadedModule>, ParseError> {
    use procfs_core::FromBufRead;
    let m = procfs_core::KernelModules::from_buf_read(text.as_bytes())
        .map_err(|e| ParseError::new(format!("/proc/modules: {e}")))?;
    let mut out: Vec<LoadedModule> =
        m.0.into_values()
            .map(|k| LoadedModule {
                name: k.name,
                size_bytes: u64::from(k.size),
                used_by: k.used_by,
            })
            .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
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
        let names: Vec<&str> = m.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["kvm_amd", "vfio_pci", "vfio_pci_core"]);
        assert_eq!(m[2].used_by, vec!["vfio_pci"]);
        assert_eq!(m[2].size_bytes, 94208);
        assert!(m[1].used_by.is_empty());
        assert!(parse_modules("garbage\n").is_err());
    }
}
