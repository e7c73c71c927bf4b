//! VFIO Assistant: reads a Linux host for GPU/PCI passthrough (VFIO), explains
//! what it finds, and shows it in a desktop app and a CLI over this library.
//!
//! This crate is the two faces (cli/, ui/) and the binary. The use cases
//! live in `vfio-assistant-core` (crates/core), libvirt's library in
//! `vfio-assistant-libvirt`, another machine over SSH in
//! `vfio-assistant-remote`; they are re-exported here under the module names
//! the faces use (`crate::host`, `vfio_assistant::tuning`, `crate::remote`).

pub use vfio_assistant_core::{
    capture, checks, demo, doctor, domain, finding, guest, helper, host, install, monitor, parse,
    pinning, report, romread, syspath, sysroot, tuning, units, unpack, userfile,
};
pub use vfio_assistant_remote as remote;

pub mod cli;
pub mod libvirt;
pub mod ui;
