//! New disk images for a VM, for the wizard's storage step (and scripts): a
//! qcow2 of a chosen size with its metadata preallocated, in libvirt's
//! `default` pool when the path is in it (libvirt creates it as root, with
//! the right owner and label), else with `qemu-img create` at the path the
//! user picked. Says how much space is free there before and after.

use crate::hypervisor::Hypervisor;
use std::path::Path;

/// Where a new image would go and the free space there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskPlace {
    pub path: String,
    /// Free bytes in its folder (the pool's own count when in a pool).
    pub free_bytes: Option<u64>,
    /// The libvirt pool that holds the folder, when there is one.
    pub pool: Option<String>,
}

/// Free bytes for an unprivileged user in the folder `dir` (statvfs).
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(dir).ok()?;
    st.f_bavail.checked_mul(st.f_frsize)
}

/// The folder libvirt keeps images in: the `default` pool's, else the
/// usual `/var/lib/libvirt/images`.
pub fn images_folder(hv: Option<&dyn Hypervisor>) -> (String, Option<String>) {
    if let Some(hv) = hv
        && let Ok(p) = hv.pool("default")
        && let Some(path) = p.path
    {
        return (path, Some(p.name));
    }
    ("/var/lib/libvirt/images".to_string(), None)
}

/// Where `NAME.qcow2` goes by default, and the space free there.
pub fn default_place(hv: Option<&dyn Hypervisor>, vm_name: &str) -> DiskPlace {
    let (folder, pool) = images_folder(hv);
    let file = format!("{}.qcow2", safe_file_name(vm_name));
    place_of(
        hv,
        &Path::new(&folder).join(file).display().to_string(),
        pool,
    )
}

/// The space free where `path` would go; `pool` when it is a pool's folder.
pub fn place_of(hv: Option<&dyn Hypervisor>, path: &str, pool: Option<String>) -> DiskPlace {
    let dir = Path::new(path).parent().unwrap_or(Path::new("/"));
    let pool_free = match (&pool, hv) {
        (Some(p), Some(hv)) => hv.pool(p).ok().map(|s| s.available),
        _ => None,
    };
    DiskPlace {
        path: path.to_string(),
        free_bytes: pool_free.or_else(|| free_bytes(dir)),
        pool,
    }
}

/// A name usable as a file name: letters, digits, `-`, `_`, `.`.
fn safe_file_name(name: &str) -> String {
    let s: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("vm{s}")
    } else {
        s
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("{0} already exists: pick another name, or use it as the disk")]
    Exists(String),
    #[error("the disk needs a size of at least 1 GiB")]
    TooSmall,
    #[error("{path}: {size_gib} GiB asked, {free_gib} GiB free there")]
    NoRoom {
        path: String,
        size_gib: u64,
        free_gib: u64,
    },
    #[error("{0}: give the whole path of the image (e.g. /var/lib/libvirt/images/win11.qcow2)")]
    Relative(String),
    #[error("creating {path} in pool '{pool}': {message}")]
    Pool {
        path: String,
        pool: String,
        message: String,
    },
    #[error(
        "qemu-img could not run ({0}); it comes with qemu-utils (Debian/Ubuntu), qemu-img (Fedora, Arch)"
    )]
    NoQemuImg(String),
    #[error("qemu-img create {path}: {message}{}", if message.contains("Permission denied") { ". Choose a folder you can write to (your home folder), or libvirt's images folder, where libvirt creates it" } else { "" })]
    QemuImg { path: String, message: String },
    #[error(
        "libvirt has no 'default' storage pool, and making one at {folder} failed: {message}. In a terminal: virsh -c qemu:///system pool-define-as default dir --target {folder}; then pool-build, pool-start and pool-autostart default"
    )]
    NoPool { folder: String, message: String },
}

/// Create a qcow2 image of `size_gib` at `path` (in its pool when the path
/// is in one, else with qemu-img). Refuses an existing file and a size
/// that does not fit. Qcow2 grows as the guest writes: "free" is checked
/// against the whole size so the guest cannot run the host out of space.
pub fn create_qcow2(
    hv: Option<&dyn Hypervisor>,
    path: &str,
    size_gib: u64,
) -> Result<String, DiskError> {
    const GIB: u64 = 1 << 30;
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(DiskError::Relative(path.to_string()));
    }
    if size_gib == 0 {
        return Err(DiskError::TooSmall);
    }
    if p.symlink_metadata().is_ok() {
        return Err(DiskError::Exists(path.to_string()));
    }
    let (folder, pool) = images_folder(hv);
    let in_folder = p.parent() == Some(Path::new(&folder));
    // No `default` pool yet (a fresh libvirt): made as virt-manager makes
    // it, so that libvirt (root) creates the image where the user cannot.
    let pool = match (pool, hv) {
        (None, Some(hv)) if in_folder => match hv.create_default_pool(&folder) {
            Ok(()) => Some("default".to_string()),
            Err(e) => {
                return Err(DiskError::NoPool {
                    folder,
                    message: e.message,
                });
            }
        },
        (pool, _) => pool,
    };
    let in_pool = pool.filter(|_| in_folder);
    let place = place_of(hv, path, in_pool.clone());
    if let Some(free) = place.free_bytes
        && free < size_gib.saturating_mul(GIB)
    {
        return Err(DiskError::NoRoom {
            path: path.to_string(),
            size_gib,
            free_gib: free / GIB,
        });
    }
    let bytes = size_gib.saturating_mul(GIB);
    if let (Some(pool), Some(hv)) = (in_pool, hv) {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return hv
            .create_volume(&pool, &name, bytes)
            .map_err(|e| DiskError::Pool {
                path: path.to_string(),
                pool,
                message: e.message,
            });
    }
    let out = crate::syspath::command("qemu-img")
        .args([
            "create",
            "-q",
            "-f",
            "qcow2",
            "-o",
            "preallocation=metadata",
        ])
        .arg(p)
        .arg(bytes.to_string())
        .output()
        .map_err(|e| DiskError::NoQemuImg(e.to_string()))?;
    if !out.status.success() {
        return Err(DiskError::QemuImg {
            path: path.to_string(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(path.to_string())
}

/// Bytes as GiB with one decimal, for "123.4 GiB free".
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_qcow2_is_made_and_never_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.qcow2").display().to_string();
        if Command::new("qemu-img").arg("--version").output().is_err() {
            eprintln!("skipped: no qemu-img");
            return;
        }
        assert_eq!(create_qcow2(None, &path, 1).unwrap(), path);
        let info = Command::new("qemu-img")
            .args(["info", &path])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&info.stdout);
        assert!(
            text.contains("file format: qcow2") && text.contains("virtual size: 1 GiB"),
            "{text}"
        );
        assert!(matches!(
            create_qcow2(None, &path, 1),
            Err(DiskError::Exists(_))
        ));
        assert!(matches!(
            create_qcow2(None, "w.qcow2", 1),
            Err(DiskError::Relative(_))
        ));
        let huge = dir.path().join("huge.qcow2").display().to_string();
        assert!(matches!(
            create_qcow2(None, &huge, 1 << 40),
            Err(DiskError::NoRoom { .. })
        ));
        assert!(free_bytes(dir.path()).is_some_and(|b| b > 0));
    }

    #[test]
    fn file_names_are_safe() {
        assert_eq!(safe_file_name("win 11/x"), "win-11-x");
        assert_eq!(safe_file_name(""), "vm");
        assert_eq!(safe_file_name(".."), "vm..");
    }
}
