//! vfio-pci by address: where a device going to the VM shares its ID with
//! one the host keeps (two identical cards; a NIC or NVMe controller like
//! the host's), `vfio_pci.ids=` would take both at boot and the host boots
//! without its screen (or its disk). Then our modprobe.d file writes
//! `driver_override` for the VM's addresses when vfio-pci loads: an
//! `install vfio-pci` line, which modprobe runs in place of loading the
//! module (then loads it with `-i`). Each host driver's `softdep … pre:
//! vfio-pci` makes that happen before the driver itself loads, also when
//! udev loads it by modalias (libkmod honours softdeps there): the card
//! is vfio-pci's before its own driver probes it
//! (docs/research-grub-once.md §4, the Arch wiki's way for identical
//! cards). The line is shell the shell itself runs — `read`, `case`,
//! `for`, `echo` — as klibc's sh in an initramfs without busybox has no
//! grep or sed. The kernel command line's `vfio_assistant.bind=1` is the
//! switch, as `vfio_pci.ids=` is otherwise: a boot without it (the old
//! entry, a recovery entry) binds nothing.

use crate::host::HostSnapshot;
use crate::host::pci::is_pci_address;

/// The kernel parameter that turns the binding by address on.
pub const BIND_TOKEN: &str = "vfio_assistant.bind=1";

/// The set's devices whose ID a device outside the set shares, each with
/// those devices: `vfio_pci.ids=` would take them too.
pub fn shared_ids(snap: &HostSnapshot, set: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for a in set {
        let Some(e) = snap.device(a) else { continue };
        let d = &e.device;
        let twins: Vec<String> = snap
            .pci_devices
            .iter()
            .filter(|o| o.device.vendor_id == d.vendor_id && o.device.device_id == d.device_id)
            .filter(|o| !set.contains(&o.device.address))
            .map(|o| o.device.address.clone())
            .collect();
        if !twins.is_empty() {
            out.push((d.address.clone(), twins));
        }
    }
    out
}

/// The modprobe.d line that hands `addrs` to vfio-pci as it loads: only
/// on a boot whose command line has `BIND_TOKEN` when `gated`, always
/// otherwise (where the command line is not ours to change). `None` when
/// an address is not one (nothing but a PCI address goes into a line the
/// shell runs).
pub fn install_line(addrs: &[String], gated: bool) -> Option<String> {
    if addrs.is_empty() || !addrs.iter().all(|a| is_pci_address(a)) {
        return None;
    }
    let each = format!(
        "for d in {}; do [ -e /sys/bus/pci/devices/$d/driver ] || echo vfio-pci > /sys/bus/pci/devices/$d/driver_override; done",
        addrs.join(" ")
    );
    let body = if gated {
        format!("read -r c < /proc/cmdline; case \" $c \" in *\" {BIND_TOKEN} \"*) {each};; esac")
    } else {
        each
    };
    Some(format!(
        "install vfio-pci {body}; modprobe -i vfio-pci $CMDLINE_OPTS\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_addresses_go_into_the_line() {
        let l =
            install_line(&["0000:0c:00.0".into(), "0000:0c:00.1".into()], true).unwrap_or_default();
        assert!(
            l.starts_with("install vfio-pci read -r c < /proc/cmdline;"),
            "{l}"
        );
        assert!(l.contains("for d in 0000:0c:00.0 0000:0c:00.1;"), "{l}");
        assert!(l.ends_with("modprobe -i vfio-pci $CMDLINE_OPTS\n"), "{l}");
        assert_eq!(install_line(&["0000:0c:00.0; rm -rf /".into()], true), None);
        assert_eq!(install_line(&[], false), None);
        let open = install_line(&["0000:0c:00.0".into()], false).unwrap_or_default();
        assert!(!open.contains("/proc/cmdline"), "{open}");
    }
}
