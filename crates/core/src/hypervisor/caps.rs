//! Asking libvirt for its domain capabilities; the model itself is pure
//! and lives in `domain::caps`.

pub use crate::domain::caps::{CapsError, DomainCaps};

/// The host's domain capabilities for q35 under KVM, else q35 under what the
/// driver offers (emulation, on a host without KVM: the q35 machine still,
/// whose firmware list has the Secure Boot builds i440fx's lacks), else the
/// driver's default, when it can tell.
pub fn caps_of(hv: &dyn super::Hypervisor) -> Option<DomainCaps> {
    let xml = hv
        .domain_capabilities(Some("q35"), Some("kvm"))
        .or_else(|_| hv.domain_capabilities(Some("q35"), None))
        .or_else(|_| hv.domain_capabilities(None, None))
        .ok()?;
    DomainCaps::parse(&xml).ok()
}
