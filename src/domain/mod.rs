//! libvirt domain XML: a lossless document (`xml.rs`); typed edits and the
//! Windows passthrough template build on it. `tune.rs` applies the tuning
//! to an existing domain.

pub mod tune;
pub mod xml;
