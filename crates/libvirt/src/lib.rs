//! VFIO Assistant's libvirt: the core's `Hypervisor` trait over a real
//! connection (the `virt` crate, libvirt's C library). The only crate that
//! links libvirt; the core and the helper know the trait alone, and the
//! app hands `connect` down where a use case must open a URI.

mod connection;
pub mod stats;

pub use connection::Libvirt;
use vfio_assistant_core::hypervisor::{Hypervisor, VirtError};

/// Open `uri` (the core's `Connect`): errors come back as values, never
/// printed by libvirt itself.
pub fn connect(uri: &str) -> Result<Box<dyn Hypervisor + Send>, VirtError> {
    Ok(Box::new(Libvirt::open(uri)?))
}
