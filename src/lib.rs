//! VFIO Assistant: reads a Linux host for GPU/PCI passthrough (VFIO), explains
//! what it finds, and shows it in a desktop app and a CLI over this library.
//!
//! The core (the host model, parsers, pinning, tuning, the helper's request)
//! is its own crate, `vfio-assistant-core` (crates/core), re-exported here
//! under the same module names, so `crate::host` and `vfio_assistant::tuning`
//! mean what they always did. What lives here needs libvirt, SSH or the GUI.

pub use vfio_assistant_core::{
    finding, helper, host, parse, pinning, sysroot, tuning, units, unpack, userfile,
};

pub mod capture;
pub mod checks;
pub mod cli;
pub mod demo;
pub mod doctor;
pub mod domain;
pub mod libvirt;
pub mod monitor;
pub mod remote;
pub mod report;
pub mod romread;
pub mod ui;
