//! IOMMU groups and, for any device, its *passthrough set* with a verdict.
//!
//! VFIO hands a whole IOMMU group to a VM: every endpoint in the group must go
//! with the device (bridges stay with the host). A card's sibling functions
//! (GPU + HDMI audio + USB-C) belong together too. The verdict says whether that
//! set can leave the host, and why in plain words.

use super::pci::{PciDevice, slot_of};
use super::warnings::Warnings;
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IommuGroup {
    pub id: u32,
    /// Member addresses, sorted.
    pub devices: Vec<String>,
}

/// Read `sys/kernel/iommu_groups/*/devices/*`. An absent directory means no IOMMU.
pub fn read_iommu_groups(root: &HostRoot, warnings: &mut Warnings) -> Vec<IommuGroup> {
    let dir = HostPath::sys("kernel/iommu_groups");
    let names = match root.list_dir(&dir) {
        Ok(n) => n,
        Err(e) => {
            if !e.is_not_found() {
                warnings.push(&e);
            }
            return Vec::new();
        }
    };
    let mut groups = Vec::new();
    for name in names {
        let Ok(id) = name.parse::<u32>() else {
            warnings.note(dir.join(&name).to_string(), "not a group number; skipped");
            continue;
        };
        let devices = warnings
            .take(root.list_dir(&dir.join(&name).join("devices")))
            .unwrap_or_default();
        groups.push(IommuGroup { id, devices });
    }
    groups.sort_by_key(|g| g.id);
    groups
}

/// Groups derived from the devices' own `iommu_group` links, for trees that carry
/// the links but not `sys/kernel/iommu_groups` (some captured snapshots).
pub fn groups_from_devices(devices: &[PciDevice]) -> Vec<IommuGroup> {
    let mut map: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for d in devices {
        if let Some(g) = d.iommu_group {
            map.entry(g).or_default().push(d.address.clone());
        }
    }
    map.into_iter()
        .map(|(id, mut devices)| {
            devices.sort();
            IommuGroup { id, devices }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// The device is alone in its group (bridges aside) and has no siblings.
    ViableAlone,
    /// It can go, together with the named companions.
    ViableWith,
    /// Something in the set cannot leave the host.
    NotViable,
    /// The host has no active IOMMU: nothing can be passed through yet.
    NoIommu,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocker {
    pub address: String,
    pub reason: String,
}

/// Whether a device can be passed through, with what, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PassthroughVerdict {
    pub verdict: VerdictKind,
    /// Everything that must go to the VM together, the device first.
    pub set: Vec<String>,
    /// `set` without the device itself.
    pub companions: Vec<String>,
    /// Bridges in the group: they stay with the host and need nothing.
    pub bridges_left_to_host: Vec<String>,
    pub blockers: Vec<Blocker>,
    /// Things to know that do not block (host drivers to unbind, the host's display).
    pub notes: Vec<String>,
    /// One plain sentence.
    pub reason: String,
}

/// Class codes the host cannot give away: its chipset's LPC/ISA bridge, SMBus and
/// memory controllers keep the machine running.
fn essential_class(dev: &PciDevice) -> Option<&'static str> {
    match dev.class_subclass() {
        0x0601 => Some("it is the chipset's ISA/LPC bridge, which the host needs to run"),
        0x0c05 => Some("it is the chipset's SMBus controller, which the host needs"),
        0x0500 => Some("it is a memory controller, which the host needs"),
        _ => None,
    }
}

/// Controllers a host usually relies on (disks, USB ports, network) that are
/// not blockers by themselves when we cannot see them in use.
fn host_side_kind(dev: &PciDevice) -> Option<&'static str> {
    match dev.class_subclass() >> 8 {
        0x01 => Some("storage controller (SATA/NVMe)"),
        0x02 => Some("network controller"),
        _ if dev.is_usb_controller() => Some("USB controller"),
        _ => None,
    }
}

/// The verdict for `address` among `devices`.
pub fn passthrough_verdict(
    address: &str,
    devices: &BTreeMap<String, PciDevice>,
    groups: &BTreeMap<u32, IommuGroup>,
    iommu_active: bool,
) -> PassthroughVerdict {
    let empty = |verdict, reason: String| PassthroughVerdict {
        verdict,
        set: vec![address.to_string()],
        companions: Vec::new(),
        bridges_left_to_host: Vec::new(),
        blockers: Vec::new(),
        notes: Vec::new(),
        reason,
    };
    if !iommu_active {
        return empty(
            VerdictKind::NoIommu,
            "The IOMMU is not active on this host, so no device can be passed through yet: enable VT-d (Intel) or AMD-Vi/IOMMU in the firmware and boot with it on.".into(),
        );
    }
    let Some(dev) = devices.get(address) else {
        return empty(
            VerdictKind::NotViable,
            format!("{address} is not a PCI device on this host."),
        );
    };
    let Some(group_id) = dev.iommu_group else {
        let mut v = empty(
            VerdictKind::NotViable,
            format!("{address} has no IOMMU group, so VFIO cannot isolate it."),
        );
        v.blockers.push(Blocker {
            address: address.to_string(),
            reason: "no IOMMU group".into(),
        });
        return v;
    };

    // Closure over groups and sibling functions.
    let mut set: BTreeSet<String> = BTreeSet::new();
    let mut bridges: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = vec![address.to_string()];
    let mut seen_groups: BTreeSet<u32> = BTreeSet::new();
    while let Some(a) = todo.pop() {
        if !set.insert(a.clone()) {
            continue;
        }
        let group = devices.get(&a).and_then(|d| d.iommu_group);
        if let Some(g) = group
            && seen_groups.insert(g)
        {
            for m in groups.get(&g).map(|g| g.devices.as_slice()).unwrap_or(&[]) {
                match devices.get(m) {
                    Some(md) if md.is_host_bridge() || md.is_pci_bridge() => {
                        bridges.insert(m.clone());
                    }
                    _ => todo.push(m.clone()),
                }
            }
        }
        // SR-IOV virtual functions are independent: a VF has no sibling
        // functions, and a PF's siblings are not its VFs (ARI packs many VFs
        // into one device number).
        let is_vf = devices.get(&a).is_some_and(|d| d.physfn.is_some());
        if is_vf {
            continue;
        }
        for (other, od) in devices.range(format!("{}.", slot_of(&a))..) {
            if slot_of(other) != slot_of(&a) {
                break;
            }
            if !(od.is_host_bridge() || od.is_pci_bridge() || od.physfn.is_some()) {
                todo.push(other.clone());
            }
        }
    }
    set.remove(address);
    let companions: Vec<String> = set.into_iter().collect();
    let mut ordered = vec![address.to_string()];
    ordered.extend(companions.iter().cloned());

    let mut blockers = Vec::new();
    let mut notes = Vec::new();
    for a in &ordered {
        let Some(d) = devices.get(a) else {
            blockers.push(Blocker {
                address: a.clone(),
                reason: "listed in the IOMMU group but missing from the PCI bus".into(),
            });
            continue;
        };
        if let Some(why) = essential_class(d) {
            blockers.push(Blocker {
                address: a.clone(),
                reason: why.to_string(),
            });
        }
        for why in d.host_usage.blocking_reasons() {
            blockers.push(Blocker {
                address: a.clone(),
                reason: format!("the host uses it: {why}"),
            });
        }
        let displays = d.host_usage.connected_displays();
        if !displays.is_empty() {
            notes.push(format!(
                "{a} drives the host's display ({}); passing it through leaves the host without that screen (single-GPU passthrough).",
                displays.join(", ")
            ));
        } else if d.boot_vga == Some(true) && !d.bound_for_vm() {
            notes.push(format!(
                "{a} is the boot GPU: the firmware and the host console start on it, so the host framebuffer may hold it."
            ));
        }
        if a != address
            && slot_of(a) != slot_of(address)
            && let Some(what) = host_side_kind(d)
        {
            notes.push(format!(
                    "{} is a {what} that would leave the host with the VM: make sure the host does not need it.",
                    short(a)
                ));
        }
        if let Some(drv) = &d.driver
            && !d.bound_for_vm()
        {
            notes.push(format!("{a} is bound to the host driver {drv}; it must be handed to vfio-pci before the VM starts."));
        }
    }
    let bridges_left_to_host: Vec<String> = bridges.into_iter().collect();
    let name = devices
        .get(address)
        .map(|d| d.display_name())
        .unwrap_or_else(|| address.to_string());
    let (verdict, reason) = if !blockers.is_empty() {
        let list: Vec<String> = blockers
            .iter()
            .map(|b| format!("{} ({})", short(&b.address), b.reason))
            .collect();
        (
            VerdictKind::NotViable,
            format!(
                "{name} cannot be passed through as things are: IOMMU group {group_id} also holds devices the host cannot give away: {}.",
                list.join("; ")
            ),
        )
    } else if companions.is_empty() {
        (
            VerdictKind::ViableAlone,
            format!(
                "{name} is alone in IOMMU group {group_id}{}: it can be passed through by itself.",
                bridge_words(&bridges_left_to_host)
            ),
        )
    } else {
        let list: Vec<String> = companions
            .iter()
            .map(|c| {
                let what = devices.get(c).map(|d| d.kind_name()).unwrap_or_default();
                format!("{} ({what})", short(c))
            })
            .collect();
        (
            VerdictKind::ViableWith,
            format!(
                "{name} can be passed through together with {}: they share IOMMU group {group_id} or are functions of the same card{}.",
                list.join(", "),
                bridge_words(&bridges_left_to_host)
            ),
        )
    };
    PassthroughVerdict {
        verdict,
        set: ordered,
        companions,
        bridges_left_to_host,
        blockers,
        notes,
        reason,
    }
}

fn short(address: &str) -> &str {
    address.strip_prefix("0000:").unwrap_or(address)
}

fn bridge_words(bridges: &[String]) -> String {
    if bridges.is_empty() {
        String::new()
    } else {
        let b: Vec<&str> = bridges.iter().map(|b| short(b)).collect();
        format!(
            " (the bridge{} {} in the group stay{} with the host)",
            if b.len() > 1 { "s" } else { "" },
            b.join(", "),
            if b.len() > 1 { "" } else { "s" }
        )
    }
}
