//! VFIO Assistant's core: every use case the two faces present, and
//! everything the root helper is built from. The host read through a
//! `HostRoot` (sysroot, unpack, capture), pure parsers, the host model, the
//! checks and the doctor, CPU pinning, the libvirt domain (XML, template,
//! preflight, playable), what the faces show (report), the live monitor, and
//! host tuning as one journaled, undoable transaction with the helper's
//! closed request. No GUI, no libvirt library, no SSH: this crate's
//! dependencies cannot reach them, so neither can the helper (crates/helper
//! depends on this crate alone). libvirt is the `hypervisor::Hypervisor`
//! trait here; crates/libvirt implements it.

pub mod capture;
pub mod checks;
pub mod demo;
pub mod doctor;
pub mod domain;
pub mod finding;
pub mod guest;
pub mod helper;
pub mod host;
pub mod hypervisor;
pub mod install;
pub mod monitor;
pub mod parse;
pub mod pinning;
pub mod report;
pub mod romread;
pub mod syspath;
pub mod sysroot;
pub mod tuning;
pub mod units;
pub mod unpack;
pub mod userfile;
