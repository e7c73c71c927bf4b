//! What the host itself uses behind each PCI function: network interfaces, block
//! devices (and where they are mounted), USB devices, DRM cards and connected
//! displays. Found from the class directories (`sys/class/net`, …), whose links
//! point into the device tree, and attributed to the closest PCI function above.

use super::pci::{PciDevice, is_pci_address};
use super::warnings::Warnings;
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NetInterface {
    pub name: String,
    /// `up`, `down`, `unknown`… from `operstate`.
    pub operstate: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    pub name: String,
    /// Mount points of the disk and its partitions (from the host's mount table).
    pub mounts: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DrmCard {
    pub name: String,
    /// Connectors with a display attached (`card0-HDMI-A-1`).
    pub connected: Vec<String>,
}

/// Everything the host uses behind one PCI function.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostUsage {
    pub net_interfaces: Vec<NetInterface>,
    pub block_devices: Vec<BlockDevice>,
    /// USB devices (not root hubs) behind a USB controller, by sysfs name (`1-2`).
    pub usb_devices: Vec<UsbDevice>,
    pub drm_cards: Vec<DrmCard>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsbDevice {
    pub name: String,
    pub product: Option<String>,
}

impl HostUsage {
    pub fn is_empty(&self) -> bool {
        self.net_interfaces.is_empty()
            && self.block_devices.is_empty()
            && self.usb_devices.is_empty()
            && self.drm_cards.is_empty()
    }

    /// Plain-words reasons why the host needs this function right now
    /// (a mounted disk, a live network link, attached USB devices).
    pub fn blocking_reasons(&self) -> Vec<String> {
        let mut out = Vec::new();
        for b in &self.block_devices {
            if b.mounts.is_empty() {
                out.push(format!("disk {} is attached to the host", b.name));
            } else {
                out.push(format!(
                    "disk {} is mounted at {}",
                    b.name,
                    b.mounts.join(", ")
                ));
            }
        }
        for n in &self.net_interfaces {
            if n.operstate.as_deref() == Some("up") {
                out.push(format!("network interface {} is up", n.name));
            }
        }
        if !self.usb_devices.is_empty() {
            let names: Vec<String> = self
                .usb_devices
                .iter()
                .map(|u| u.product.clone().unwrap_or_else(|| u.name.clone()))
                .collect();
            out.push(format!("USB devices are plugged in: {}", names.join(", ")));
        }
        out
    }

    /// Displays the host shows on this GPU.
    pub fn connected_displays(&self) -> Vec<String> {
        self.drm_cards
            .iter()
            .flat_map(|c| c.connected.iter().cloned())
            .collect()
    }

    /// One line for a report: "net enp5s0 (up); disk nvme0n1 at /".
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for n in &self.net_interfaces {
            parts.push(format!(
                "net {} ({})",
                n.name,
                n.operstate.as_deref().unwrap_or("?")
            ));
        }
        for b in &self.block_devices {
            if b.mounts.is_empty() {
                parts.push(format!("disk {}", b.name));
            } else {
                parts.push(format!("disk {} at {}", b.name, b.mounts.join(",")));
            }
        }
        if !self.usb_devices.is_empty() {
            parts.push(format!("{} USB device(s)", self.usb_devices.len()));
        }
        for c in &self.drm_cards {
            if c.connected.is_empty() {
                parts.push(format!("{} (no display)", c.name));
            } else {
                parts.push(format!("{} driving {}", c.name, c.connected.join(",")));
            }
        }
        parts.join("; ")
    }
}

/// The closest PCI function above a sysfs device path.
fn owning_function(real: &HostPath) -> Option<String> {
    real.relative()
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .rfind(|c| is_pci_address(c))
        .map(str::to_string)
}

/// Parse a mount table (`/proc/mounts` format): device -> mount points.
pub fn parse_mounts(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        if let (Some(dev), Some(mnt)) = (f.next(), f.next())
            && let Some(name) = dev.rsplit('/').next()
            && dev.starts_with('/')
        {
            map.entry(name.to_string())
                .or_default()
                .push(mnt.replace("\\040", " "));
        }
    }
    map
}

/// Fill `host_usage` of every device.
pub fn attach_host_usage(root: &HostRoot, devices: &mut [PciDevice], warnings: &mut Warnings) {
    let mut by_addr: BTreeMap<String, HostUsage> = BTreeMap::new();
    read_net(root, &mut by_addr, warnings);
    read_block(root, &mut by_addr, warnings);
    read_usb(root, &mut by_addr, warnings);
    read_drm(root, &mut by_addr, warnings);
    for dev in devices.iter_mut() {
        if let Some(u) = by_addr.remove(&dev.address) {
            dev.host_usage = u;
        }
    }
}

/// `(name, real device path)` for every entry of a class directory.
fn class_entries(
    root: &HostRoot,
    class_dir: &HostPath,
    warnings: &mut Warnings,
) -> Vec<(String, HostPath)> {
    let Ok(names) = root.list_dir(class_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for name in names {
        if let Some(real) = warnings
            .take(root.resolve_link(&class_dir.join(&name)))
            .flatten()
        {
            out.push((name, real));
        }
    }
    out
}

fn read_net(root: &HostRoot, map: &mut BTreeMap<String, HostUsage>, warnings: &mut Warnings) {
    let dir = HostPath::sys("class/net");
    for (name, real) in class_entries(root, &dir, warnings) {
        let Some(addr) = owning_function(&real) else {
            continue;
        };
        let operstate = warnings.take_opt(root.read_attr_opt(&dir.join(&name).join("operstate")));
        map.entry(addr)
            .or_default()
            .net_interfaces
            .push(NetInterface { name, operstate });
    }
}

fn read_block(root: &HostRoot, map: &mut BTreeMap<String, HostUsage>, warnings: &mut Warnings) {
    let dir = HostPath::sys("class/block");
    let mounts = warnings
        .take(root.read_text(&HostPath::proc("mounts")))
        .map(|t| parse_mounts(&t))
        .unwrap_or_default();
    let swaps = root
        .read_text(&HostPath::proc("swaps"))
        .map(|t| parse_mounts(&t))
        .unwrap_or_default();
    let mut disks: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for (name, real) in class_entries(root, &dir, warnings) {
        let Some(addr) = owning_function(&real) else {
            continue;
        };
        // A partition's real path is .../block/<disk>/<partition>.
        let comps: Vec<String> = real
            .relative()
            .components()
            .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
            .collect();
        let disk = match comps.iter().position(|c| c == "block") {
            Some(i) if i + 1 < comps.len() => comps[i + 1].clone(),
            _ => name.clone(),
        };
        let entry = disks.entry(disk).or_insert_with(|| (addr, Vec::new()));
        if let Some(m) = mounts.get(&name) {
            entry.1.extend(m.iter().cloned());
        }
        if swaps.contains_key(&name) {
            entry.1.push("swap".to_string());
        }
    }
    for (disk, (addr, mut mnts)) in disks {
        mnts.sort();
        mnts.dedup();
        map.entry(addr)
            .or_default()
            .block_devices
            .push(BlockDevice {
                name: disk,
                mounts: mnts,
            });
    }
}

fn read_usb(root: &HostRoot, map: &mut BTreeMap<String, HostUsage>, warnings: &mut Warnings) {
    let dir = HostPath::sys("bus/usb/devices");
    for (name, real) in class_entries(root, &dir, warnings) {
        // Devices are `1-2`, `1-2.3`; root hubs are `usb1`; interfaces have a colon.
        if name.starts_with("usb") || name.contains(':') {
            continue;
        }
        let Some(addr) = owning_function(&real) else {
            continue;
        };
        let product = warnings.take_opt(root.read_attr_opt(&dir.join(&name).join("product")));
        map.entry(addr)
            .or_default()
            .usb_devices
            .push(UsbDevice { name, product });
    }
}

fn read_drm(root: &HostRoot, map: &mut BTreeMap<String, HostUsage>, warnings: &mut Warnings) {
    let dir = HostPath::sys("class/drm");
    let entries = class_entries(root, &dir, warnings);
    let mut cards: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for (name, real) in &entries {
        let is_card = name.starts_with("card") && name[4..].chars().all(|c| c.is_ascii_digit());
        if is_card && let Some(addr) = owning_function(real) {
            cards
                .entry(name.clone())
                .or_insert_with(|| (addr, Vec::new()));
        }
    }
    for (name, _) in &entries {
        if let Some((card, _connector)) = name.split_once('-')
            && let Some((_, connected)) = cards.get_mut(card)
        {
            let status = warnings.take_opt(root.read_attr_opt(&dir.join(name).join("status")));
            if status.as_deref() == Some("connected") {
                connected.push(name.clone());
            }
        }
    }
    for (name, (addr, connected)) in cards {
        map.entry(addr)
            .or_default()
            .drm_cards
            .push(DrmCard { name, connected });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_by_device_name() {
        // A host's mount table, its device paths spelled through HostPath.
        let table = format!(
            "{} / ext4 rw 0 0\nproc {} proc rw 0 0\n{} /mnt/my\\040disk ext4 rw 0 0\n",
            HostPath::dev("nvme0n1p2"),
            HostPath::proc(""),
            HostPath::dev("sda1")
        );
        let m = parse_mounts(&table);
        assert_eq!(m.get("nvme0n1p2").unwrap(), &vec!["/".to_string()]);
        assert_eq!(m.get("sda1").unwrap(), &vec!["/mnt/my disk".to_string()]);
        assert!(!m.contains_key("proc"));
    }

    #[test]
    fn owner_is_deepest_function() {
        let p = HostPath::sys("devices/pci0000:00/0000:00:1c.0/0000:03:00.0/net/enp3s0");
        assert_eq!(owning_function(&p).as_deref(), Some("0000:03:00.0"));
        assert_eq!(
            owning_function(&HostPath::sys("devices/virtual/net/lo")),
            None
        );
    }
}
