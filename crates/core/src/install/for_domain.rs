//! The unattended install joined to a new domain: the answer media built
//! for the VM's passthrough set and disk bus, then named in its spec. One
//! call for the wizard and `domain new --unattended`.

use super::unattended::{InstallError, UnattendRequest, Unattended, prepare};
use crate::domain::from_host::Prepared;
use crate::host::HostSnapshot;
use crate::sysroot::HostRoot;

/// What the user gives for the install (the rest comes from the spec).
#[derive(Debug, Clone)]
pub struct InstallChoices {
    pub windows_iso: std::path::PathBuf,
    pub virtio_iso: std::path::PathBuf,
    pub user: String,
    pub password: super::unattend::Secret,
    pub edition: Option<String>,
    pub looking_glass_installer: Option<std::path::PathBuf>,
    pub out: Option<std::path::PathBuf>,
}

/// The passthrough set's PCI IDs, for MSI mode inside Windows.
pub fn gpu_ids(snap: &HostSnapshot, set: &[String]) -> Vec<(u16, u16)> {
    let mut ids: Vec<(u16, u16)> = set
        .iter()
        .filter_map(|a| snap.device(a))
        .map(|e| (e.device.vendor_id.0, e.device.device_id.0))
        .collect();
    ids.dedup();
    ids
}

/// Build the media and put it in `p`'s spec: the third CD, the Windows
/// version the ISO holds (with a note when it differs from the choice).
pub fn add_install(
    root: &HostRoot,
    snap: &HostSnapshot,
    p: &mut Prepared,
    c: &InstallChoices,
) -> Result<Unattended, InstallError> {
    let req = UnattendRequest {
        vm_name: p.spec.name.clone(),
        windows_iso: c.windows_iso.clone(),
        virtio_iso: c.virtio_iso.clone(),
        user: c.user.clone(),
        password: c.password.clone(),
        edition: c.edition.clone(),
        disk_bus: p.spec.disk_bus,
        gpu_ids: gpu_ids(snap, &p.spec.gpu_set),
        looking_glass_installer: c.looking_glass_installer.clone(),
        out: c.out.clone(),
    };
    let u = prepare(root, &req)?;
    if u.windows != p.spec.windows {
        p.notes.push(format!(
            "The ISO holds {} (build {}): the VM is written for it.",
            u.edition.name, u.edition.build
        ));
        p.spec.windows = u.windows;
    }
    p.spec.install_iso = Some(c.windows_iso.display().to_string());
    p.spec.virtio_iso = Some(c.virtio_iso.display().to_string());
    p.spec.answer_iso = Some(u.media.display().to_string());
    p.notes.extend(u.notes.iter().cloned());
    Ok(u)
}
