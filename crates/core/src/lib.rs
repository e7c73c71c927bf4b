//! VFIO Assistant's core: everything the root helper is built from, and what
//! the app builds on. The host read through a `HostRoot` (sysroot, unpack),
//! pure parsers, the host model, CPU pinning, and host tuning as one
//! journaled, undoable transaction, with the helper's closed request. No GUI,
//! no libvirt, no SSH: this crate's dependencies cannot reach them, so
//! neither can the helper (crates/helper depends on this crate alone).

pub mod finding;
pub mod helper;
pub mod host;
pub mod parse;
pub mod pinning;
pub mod sysroot;
pub mod tuning;
pub mod units;
pub mod unpack;
pub mod userfile;
