//! libvirt domain XML: a lossless document (`xml.rs`); typed edits and the
//! Windows passthrough template build on it (issue 4, next).

pub mod xml;
