//! Installing Windows into a VM: the installer media read (pure Rust,
//! bounded: UDF and ISO 9660 images, the WIM's image list), the answer
//! file and the media it goes on, the virtio-win drivers found on their
//! disc, the host's locale, and the install followed from the host.

pub mod answer_media;
pub mod download;
mod extract;
pub mod first_logon;
pub mod for_domain;
pub mod host_locale;
pub mod iso;
mod iso9660;
pub mod progress;
mod udf;
pub mod unattend;
pub mod unattended;
pub mod virtio_win;
pub mod wim;
pub mod windows_iso;

#[cfg(any(test, feature = "test-hooks"))]
pub mod test_media;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unattended_tests;
