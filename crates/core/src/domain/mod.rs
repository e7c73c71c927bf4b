//! libvirt domain XML: a lossless document (`xml.rs`); typed edits and the
//! Windows passthrough template build on it. `tune.rs` applies the tuning
//! to an existing domain, `template.rs` writes a new Windows domain,
//! `hostdev.rs` turns a passthrough set into multifunction hostdevs,
//! `validate.rs` runs libvirt's schema check, `install_needs.rs` says
//! what a new VM lacks to install (its GPU, installer, drivers), `preflight.rs` adapts a domain
//! to what this host accepts and checks what would stop its start, and
//! `start_failure.rs` explains a failed start from QEMU's log.

pub mod caps;
pub mod from_host;
pub mod hostdev;
pub mod inspect;
pub mod install_needs;
pub mod merge;
pub mod playable;
pub mod preflight;
pub mod realities;
pub mod start_failure;
pub mod template;
pub mod tune;
pub mod validate;
pub mod xml;
