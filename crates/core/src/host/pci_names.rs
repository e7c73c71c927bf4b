//! Human names for PCI ids and classes, from the PCI ID Repository bundled by the
//! `pci-ids` crate (no file is read at run time).

use pci_ids::{Device, Subclass, Vendors};

/// The vendor's name for a vendor id.
pub fn vendor_name(vendor_id: u16) -> Option<&'static str> {
    Vendors::iter()
        .find(|v| v.id() == vendor_id)
        .map(|v| v.name())
}

/// The device's name, and the vendor's name found through it (fast path).
pub fn device_names(
    vendor_id: u16,
    device_id: u16,
) -> (Option<&'static str>, Option<&'static str>) {
    match Device::from_vid_pid(vendor_id, device_id) {
        Some(dev) => (Some(dev.vendor().name()), Some(dev.name())),
        None => (vendor_name(vendor_id), None),
    }
}

/// The subsystem (board maker's) name, e.g. "ROG STRIX RTX 3080".
pub fn subsystem_name(
    vendor_id: u16,
    device_id: u16,
    sub_vendor: u16,
    sub_device: u16,
) -> Option<&'static str> {
    Device::from_vid_pid(vendor_id, device_id)?
        .subsystems()
        .find(|s| s.subvendor() == sub_vendor && s.subdevice() == sub_device)
        .map(|s| s.name())
}

/// `(class name, subclass name)` for a 24-bit class code (`0x030000`).
pub fn class_names(class_code: u32) -> (Option<&'static str>, Option<&'static str>) {
    let class = ((class_code >> 16) & 0xff) as u8;
    let sub = ((class_code >> 8) & 0xff) as u8;
    match Subclass::from_cid_sid(class, sub) {
        Some(sc) => (Some(sc.class().name()), Some(sc.name())),
        None => (
            pci_ids::Classes::iter()
                .find(|c| c.id() == class)
                .map(|c| c.name()),
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_common_gpus() {
        let (vendor, device) = device_names(0x10de, 0x1401);
        assert_eq!(vendor, Some("NVIDIA Corporation"));
        assert!(device.unwrap_or("").contains("GTX 960"));
        assert_eq!(class_names(0x030000).1, Some("VGA compatible controller"));
        assert_eq!(class_names(0x060400).1, Some("PCI bridge"));
        assert_eq!(device_names(0x1234, 0xfffe).1, None);
    }
}
