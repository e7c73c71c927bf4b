//! A device's details in words, row by row: what the Devices page shows
//! when a row is opened and what `scan --device ADDRESS` prints. Pure over
//! the snapshot.

use crate::host::{HostSnapshot, PciEntry};
use crate::units::human_kib;

/// One row: a label and its value in plain words.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DetailRow {
    pub label: &'static str,
    pub value: String,
}

fn row(label: &'static str, value: impl Into<String>) -> DetailRow {
    DetailRow {
        label,
        value: value.into(),
    }
}

fn size(bytes: u64) -> String {
    if bytes >= 1024 {
        human_kib(bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// The link as running against what the device and slot can do; a link
/// below its maximum is said (a x16 card in a x4 slot, a riser at Gen 3).
fn link_words(e: &PciEntry) -> Option<String> {
    let l = &e.device.link;
    let now = match (l.current_speed_gts, l.current_width) {
        (Some(s), Some(w)) => format!("{s} GT/s x{w}"),
        _ => return None,
    };
    let max = match (l.max_speed_gts, l.max_width) {
        (Some(s), Some(w)) => format!("{s} GT/s x{w}"),
        _ => return Some(now),
    };
    let below = l.current_width < l.max_width
        || l.current_speed_gts
            .zip(l.max_speed_gts)
            .is_some_and(|(c, m)| c < m);
    Some(if below {
        format!(
            "{now}, below its maximum of {max} (an idle GPU slows its link to save power; under load it should reach the maximum)"
        )
    } else {
        format!("{now} (its maximum)")
    })
}

/// Every detail the snapshot holds for `e`, in reading order.
pub fn device_details(snap: &HostSnapshot, e: &PciEntry) -> Vec<DetailRow> {
    let d = &e.device;
    let mut out = vec![row(
        "IDs",
        format!(
            "{}:{}{}{}",
            d.vendor_id,
            d.device_id,
            match (&d.subsystem_vendor_id, &d.subsystem_device_id) {
                // 0000:0000 is "none given" (a capture without it).
                (Some(v), Some(s)) if format!("{v}{s}") != "00000000" => {
                    format!(", subsystem {v}:{s}")
                }
                _ => String::new(),
            },
            d.revision
                .map(|r| format!(", revision {r:02x}"))
                .unwrap_or_default()
        ),
    )];
    if let Some(s) = &d.subsystem_name {
        out.push(row("Made by", s.clone()));
    }
    out.push(row("Kind", d.kind_name()));
    if d.is_gpu() {
        // Which card is the VM's: the Overview's and the wizard's rule.
        let class = super::vm_card::class_of(snap, e);
        out.push(row(
            "GPU",
            format!("{}: {}", class.kind.word(), class.because),
        ));
        let order = super::vm_card::candidates(snap);
        let place = order.iter().position(|c| c.address() == d.address);
        let screen = super::vm_card::host_screen(snap, &d.address);
        out.push(row(
            "For a VM",
            match (place, screen) {
                (Some(0), None) => "the card this app proposes for the VM".to_string(),
                (Some(0), Some(why)) => format!(
                    "the card this app proposes for the VM; the host's screen is on it now ({why}): the Overview says how it moves"
                ),
                (Some(i), _) => format!("offered after {}", order[..i].iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")),
                (None, _) => "never proposed: a virtual display device has no hardware to pass".to_string(),
            },
        ));
    }
    out.push(row(
        "Driver",
        match (&d.driver, &d.driver_override) {
            (Some(drv), Some(o)) => format!("{drv} (driver_override: {o})"),
            (Some(drv), None) => drv.clone(),
            (None, Some(o)) => format!("none (driver_override: {o})"),
            (None, None) => "none".into(),
        },
    ));
    out.push(row(
        "IOMMU group",
        d.iommu_group
            .map_or_else(|| "none (no IOMMU)".into(), |g| g.to_string()),
    ));
    out.push(row("Passthrough", e.passthrough.reason.clone()));
    if let Some(n) = d.numa_node {
        out.push(row("NUMA node", n.to_string()));
    }
    if let Some(s) = &d.physical_slot {
        out.push(row("Slot", s.clone()));
    }
    if let Some(l) = link_words(e) {
        out.push(row("PCIe link", l));
    }
    if !d.parent_bridges.is_empty() {
        out.push(row("Behind", d.parent_bridges.join(" → ")));
    }
    let bars: Vec<String> = d
        .bars
        .iter()
        .filter(|b| b.size_bytes > 0)
        .map(|b| {
            format!(
                "{} {}{}{}",
                if b.index == 6 {
                    "ROM".to_string()
                } else {
                    format!("BAR {}", b.index)
                },
                size(b.size_bytes),
                if b.io {
                    " I/O"
                } else if b.is_64bit {
                    " 64-bit"
                } else {
                    " 32-bit"
                },
                if b.prefetchable { " prefetchable" } else { "" }
            )
        })
        .collect();
    if !bars.is_empty() {
        out.push(row("Memory", bars.join(", ")));
    }
    let r = &d.reset;
    out.push(row(
        "Reset",
        if !r.known {
            "unknown (not in what was read)".to_string()
        } else if r.methods.is_empty() {
            if r.can_reset {
                "resettable (method not listed by this kernel)".into()
            } else {
                "none: the card cannot be reset between VM starts (the reset bug)".into()
            }
        } else {
            r.methods.join(", ")
        },
    ));
    if let Some(c) = &d.config {
        let mut caps = c.capabilities.join(", ");
        if caps.is_empty() {
            caps = format!(
                "none read ({} bytes of config space: root reads all)",
                c.bytes
            );
        }
        out.push(row("Capabilities", caps));
    }
    if d.boot_vga == Some(true) {
        out.push(row(
            "Boot display",
            "the firmware shows its picture on this card (boot VGA)",
        ));
    }
    if !d.host_usage.is_empty() {
        out.push(row("The host uses", d.host_usage.summary()));
    }
    if let Some(s) = &d.sriov {
        out.push(row(
            "SR-IOV",
            format!(
                "{} of {} virtual functions on{}",
                s.num_vfs,
                s.total_vfs,
                if s.vfs.is_empty() {
                    String::new()
                } else {
                    format!(": {}", s.vfs.join(", "))
                }
            ),
        ));
    }
    if let Some(pf) = &d.physfn {
        out.push(row("Virtual function of", pf.clone()));
    }
    if let Some(g) = d
        .iommu_group
        .and_then(|g| snap.iommu_groups.iter().find(|x| x.id == g))
    {
        let others: Vec<&str> = g
            .devices
            .iter()
            .filter(|a| **a != d.address)
            .map(String::as_str)
            .collect();
        if !others.is_empty() {
            out.push(row("Shares its group with", others.join(", ")));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    /// Real sysfs from prometheus/procfs' fixtures (see its SOURCE.txt).
    #[test]
    fn real_sysfs_devices_have_their_rows() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/pci-sysfs/prometheus-procfs"
        );
        let snap = crate::host::scan(&crate::sysroot::HostRoot::at(p)).unwrap();
        assert!(!snap.pci_devices.is_empty());
        let mut links = 0;
        for e in snap.pci_devices.iter() {
            let rows = device_details(&snap, e);
            let labels: Vec<&str> = rows.iter().map(|r| r.label).collect();
            for l in [
                "IDs",
                "Kind",
                "Driver",
                "IOMMU group",
                "Passthrough",
                "Reset",
            ] {
                assert!(labels.contains(&l), "{}: {labels:?}", e.device.address);
            }
            links += rows.iter().filter(|r| r.label == "PCIe link").count();
        }
        assert!(links > 0, "the fixture has link speeds and widths");
    }
}
