//! libvirt domain XML: a lossless document (`xml.rs`); typed edits and the
//! Windows passthrough template build on it. `tune.rs` applies the tuning
//! to an existing domain, `template.rs` writes a new Windows domain,
//! `hostdev.rs` turns a passthrough set into multifunction hostdevs,
//! `validate.rs` runs libvirt's schema check.

pub mod from_host;
pub mod hostdev;
pub mod inspect;
pub mod template;
pub mod tune;
pub mod validate;
pub mod xml;
