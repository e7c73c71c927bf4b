//! Installing Windows into a VM: the installer media read (pure Rust,
//! bounded: UDF and ISO 9660 images, the WIM's image list), the answer
//! file and the media it goes on, the virtio-win drivers found on their
//! disc, the host's locale, and the install followed from the host.

mod extract;
pub mod iso;
mod iso9660;
mod udf;
pub mod wim;
pub mod windows_iso;

#[cfg(test)]
mod tests;
