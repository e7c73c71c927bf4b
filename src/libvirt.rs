//! libvirt for the faces: the core's trait and values (`hypervisor`) and
//! the real connection (crates/libvirt) under one name.

pub use vfio_assistant_core::hypervisor::*;
pub use vfio_assistant_libvirt::{Libvirt, connect, stats};
