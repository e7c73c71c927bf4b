//! Secure Boot and the modules that are not the kernel's own. Under Secure
//! Boot the kernel is locked down and loads only modules signed by a key it
//! trusts (the distribution's, or a Machine Owner Key enrolled with shim):
//! the modules a passthrough desktop adds itself — Looking Glass's kvmfr,
//! vendor-reset, NVIDIA's — are built by DKMS on the machine and are
//! unsigned unless DKMS was given a key. Such a module is refused at load,
//! and the VM that needs it fails at its start: said here first.

use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::os::unix::fs::FileExt;

/// EFI's global variable GUID: `SecureBoot-…` holds 4 attribute bytes and
/// the state (1: on).
const SECURE_BOOT_VAR: &str =
    "firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";

/// What a signed module ends with (`scripts/sign-file` in the kernel).
pub const SIGNATURE_MAGIC: &[u8] = b"~Module signature appended~\n";

/// How much of a module's end is read (and kept in a snapshot): the
/// signature is at the very end.
pub const MODULE_TAIL: u64 = 4096;

/// The modules a passthrough desktop adds that are not the kernel's own,
/// by the name the kernel gives them.
pub const WATCHED: &[&str] = &[
    "kvmfr",
    "vendor_reset",
    "nvidia",
    "nvidia_drm",
    "nvidia_modeset",
    "nvidia_uvm",
];

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Signing {
    /// None: not booted through UEFI, or the variable could not be read.
    pub secure_boot: Option<bool>,
    /// The kernel's lockdown mode (`none`, `integrity`, `confidentiality`).
    pub lockdown: Option<String>,
    /// The watched modules this kernel has (installed or loaded).
    pub modules: Vec<ModuleSigning>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleSigning {
    pub name: String,
    /// Its file, as modules.dep names it (under /lib/modules/RELEASE).
    pub file: Option<String>,
    pub loaded: bool,
    /// Whether the file carries a signature; None: compressed (the
    /// signature is inside), or not read.
    pub signed: Option<bool>,
}

fn normal(name: &str) -> String {
    name.replace('-', "_")
}

/// The module name of a modules.dep path (`updates/dkms/vendor-reset.ko.xz`
/// is `vendor_reset`), and whether the file is compressed.
fn module_of(path: &str) -> Option<(String, bool)> {
    let file = path.rsplit('/').next()?;
    let (stem, compressed) = match file.split_once(".ko") {
        Some((stem, "")) => (stem, false),
        Some((stem, _)) => (stem, true),
        None => return None,
    };
    Some((normal(stem), compressed))
}

/// The last `MODULE_TAIL` bytes of a module file (what a snapshot keeps).
pub fn module_tail(root: &HostRoot, path: &HostPath) -> Option<Vec<u8>> {
    let file = root.open_file(path).ok()?;
    let len = file.metadata().ok()?.len();
    let from = len.saturating_sub(MODULE_TAIL);
    let mut buf = vec![0u8; usize::try_from(len - from).ok()?];
    let n = file.read_at(&mut buf, from).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// Secure Boot, lockdown, and — when Secure Boot is on — whether the
/// watched modules this kernel has are signed. Nothing here is read when
/// Secure Boot is off (modules.dep is large; every module loads anyway).
pub fn read_signing(root: &HostRoot, release: Option<&str>, loaded: &[String]) -> Signing {
    let secure_boot = root
        .read_bytes(&HostPath::sys(SECURE_BOOT_VAR), 64)
        .ok()
        .and_then(|b| b.get(4).map(|v| *v == 1));
    let lockdown = root
        .read_attr_opt(&HostPath::sys("kernel/security/lockdown"))
        .ok()
        .flatten()
        .and_then(|t| {
            t.split_whitespace()
                .find(|w| w.starts_with('['))
                .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
        });
    let mut modules: Vec<ModuleSigning> = WATCHED
        .iter()
        .filter(|w| loaded.iter().any(|l| normal(l) == **w))
        .map(|w| ModuleSigning {
            name: (*w).to_string(),
            file: None,
            loaded: true,
            signed: None,
        })
        .collect();
    if secure_boot == Some(true)
        && let Some(release) = release
    {
        let dir = HostPath::lib(&format!("modules/{release}"));
        let dep = root
            .read_bytes(&dir.join("modules.dep"), 16 << 20)
            .unwrap_or_default();
        for line in String::from_utf8_lossy(&dep).lines() {
            let Some(path) = line.split(':').next() else {
                continue;
            };
            let Some((name, compressed)) = module_of(path) else {
                continue;
            };
            if !WATCHED.contains(&name.as_str()) {
                continue;
            }
            let signed = if compressed {
                None
            } else {
                module_tail(root, &dir.join(path)).map(|t| t.ends_with(SIGNATURE_MAGIC))
            };
            match modules.iter_mut().find(|m| m.name == name) {
                Some(m) => {
                    m.file = Some(path.to_string());
                    m.signed = signed;
                }
                None => modules.push(ModuleSigning {
                    name,
                    file: Some(path.to_string()),
                    loaded: false,
                    signed,
                }),
            }
        }
    }
    modules.sort_by(|a, b| a.name.cmp(&b.name));
    Signing {
        secure_boot,
        lockdown,
        modules,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_from_their_paths() {
        assert_eq!(
            module_of("updates/dkms/vendor-reset.ko.xz"),
            Some(("vendor_reset".into(), true))
        );
        assert_eq!(
            module_of("updates/dkms/kvmfr.ko"),
            Some(("kvmfr".into(), false))
        );
        assert_eq!(module_of("kernel/x/readme.txt"), None);
    }
}
