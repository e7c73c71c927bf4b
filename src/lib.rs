//! VFIO Assistant: reads a Linux host for GPU/PCI passthrough (VFIO), explains
//! what it finds, and shows it in a desktop app and a CLI over this library.

pub mod capture;
pub mod checks;
pub mod cli;
pub mod demo;
pub mod doctor;
pub mod domain;
pub mod finding;
pub mod helper;
pub mod host;
pub mod libvirt;
pub mod monitor;
pub mod parse;
pub mod pinning;
pub mod remote;
pub mod report;
pub mod romread;
pub mod sysroot;
pub mod tuning;
pub mod ui;
pub mod units;
pub mod unpack;
pub mod userfile;
