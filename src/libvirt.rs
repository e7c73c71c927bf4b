//! libvirt for the faces: the core's trait and values (`hypervisor`), and
//! `connect`, which opens a URI through the libvirt library when this
//! program links it. Only `vfio-assistant-virt` does (it `provide`s
//! crates/libvirt's opener at start); in `vfio-assistant`, which runs the
//! commands that never need libvirt, `connect` says why it cannot.

use std::sync::OnceLock;
pub use vfio_assistant_core::hypervisor::*;

static OPENER: OnceLock<Connect> = OnceLock::new();
static MISSING: OnceLock<String> = OnceLock::new();

/// The opener this program links (called once, at start).
pub fn provide(open: Connect) {
    let _ = OPENER.set(open);
}

/// Why libvirt cannot be opened here (said by `connect`).
pub fn missing(why: &str) {
    let _ = MISSING.set(why.to_string());
}

/// Open `uri`: libvirt's errors as values, or why this program cannot.
pub fn connect(uri: &str) -> Result<Box<dyn Hypervisor + Send>, VirtError> {
    match OPENER.get() {
        Some(open) => open(uri),
        None => Err(VirtError::new(
            format!("connecting to {uri}"),
            VirtErrorKind::Unsupported,
            MISSING
                .get()
                .map_or("this program does not load libvirt", String::as_str),
        )),
    }
}
