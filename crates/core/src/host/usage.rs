//! What the host itself uses behind each PCI function: network interfaces, block
//! devices (and where they are mounted), USB devices, DRM cards and connected
//! displays. Found from the class directories (`sys/class/net`, …), whose links
//! point into the device tree, and attributed to the closest PCI function above.
//! And whose each GPU is — the VM's, the host's, or free to go — judged from
//! the snapshot alone (`gpu_owner`), so the checks and the next step agree.

use super::HostSnapshot;
use super::gpu_kind::{GpuKind, classify};
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

/// Whose a GPU is, from what the host says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuOwner {
    /// Every function of the card is on vfio-pci (or pci-stub): set aside
    /// for a VM already.
    Vm,
    /// The host shows itself on it (why, in words): it is never proposed
    /// for a VM, and its own driver holding it is right.
    Host(&'static str),
    /// Neither: a card a VM can be given.
    Free,
}

/// The card a function belongs to: its domain, bus and device (`0000:0b:00`).
fn slot(address: &str) -> &str {
    address.rsplit_once('.').map_or(address, |(s, _)| s)
}

/// Every function of the card is bound for a VM (vfio-pci, pci-stub).
fn all_functions_for_vm(s: &HostSnapshot, address: &str) -> bool {
    let card = slot(address);
    let mut functions = s
        .pci_devices
        .iter()
        .filter(|e| slot(&e.device.address) == card)
        .peekable();
    functions.peek().is_some() && functions.all(|e| e.device.bound_for_vm())
}

/// Where the host is told to give this device to vfio-pci at boot — by
/// ID (`options vfio-pci ids=` in modprobe.d, `vfio_pci.ids=` on the kernel
/// command line) or by address (an `install vfio-pci` line writing its
/// driver_override) — as (file, line).
pub fn vfio_ids_configured(s: &HostSnapshot, d: &PciDevice) -> Option<(String, String)> {
    let id = format!("{}:{}", d.vendor_id, d.device_id);
    s.system
        .modprobe
        .iter()
        .find(|l| {
            (l.line.contains("vfio") && l.line.contains(&id)) || binds_address(&l.line, &d.address)
        })
        .map(|l| (l.file.clone(), l.line.clone()))
        .or_else(|| {
            let c = s.kernel.cmdline.as_ref()?;
            let ids = c
                .value("vfio_pci.ids")
                .or_else(|| c.value("vfio-pci.ids"))?;
            ids.contains(&id).then(|| {
                (
                    HostPath::proc("cmdline").to_string(),
                    format!("vfio_pci.ids={ids}"),
                )
            })
        })
}

/// Whether a modprobe.d line binds `address` by its address (vfio-assistant's
/// `install vfio-pci` line, or one written the same way by hand).
pub fn binds_address(line: &str, address: &str) -> bool {
    let l = line.trim_start();
    (l.starts_with("install vfio-pci") || l.starts_with("install vfio_pci"))
        && l.contains("driver_override")
        && l.contains(address)
}

/// The firmware's boot framebuffers (efifb, simpledrm, BOOTFB… in
/// `/proc/iomem`) that lie in one of the device's memory BARs: the console
/// the host started on is drawn there.
pub fn boot_framebuffers_in(s: &HostSnapshot, d: &PciDevice) -> Vec<String> {
    s.system
        .iomem_framebuffers
        .iter()
        .filter(|fb| {
            fb.start != 0
                && d.bars.iter().any(|b| {
                    !b.io && fb.start >= b.start && fb.start < b.start.saturating_add(b.size_bytes)
                })
        })
        .map(|fb| format!("{:x}-{:x} {}", fb.start, fb.end, fb.name))
        .collect()
}

/// Whose the GPU at `address` is. The VM's: every function on vfio-pci.
/// The host's: the console is on it (the firmware's boot display, the boot
/// framebuffer in its memory), or every other GPU is the VM's, so it is
/// the only one left for the host's screen. A card the host is told to give
/// vfio-pci at boot is never the host's, whatever else holds it (the user
/// meant it for a VM). Free otherwise. A display connected to a card is no
/// sign of its owner: the VM's card has its monitor too.
pub fn gpu_owner(s: &HostSnapshot, address: &str) -> GpuOwner {
    let Some(e) = s.device(address) else {
        return GpuOwner::Free;
    };
    let d = &e.device;
    if all_functions_for_vm(s, address) {
        return GpuOwner::Vm;
    }
    if vfio_ids_configured(s, d).is_some() {
        return GpuOwner::Free;
    }
    // A desktop with the CPU's graphics and a card: the iGPU is the host's
    // screen, the card the VM's, wherever the firmware put the console
    // today (the screen moves: report::screen_move).
    let kind = |x: &PciDevice| classify(s.cpu.vendor.as_deref(), x).kind;
    let card = slot(address);
    let other_of_kind = |k: GpuKind| {
        s.gpus()
            .any(|g| slot(&g.device.address) != card && kind(&g.device) == k)
    };
    match kind(d) {
        GpuKind::Integrated if other_of_kind(GpuKind::Discrete) => {
            return GpuOwner::Host(
                "it is the CPU's own graphics: the host keeps it for its screen, the card goes to the VM",
            );
        }
        GpuKind::Discrete if other_of_kind(GpuKind::Integrated) => return GpuOwner::Free,
        _ => {}
    }
    if d.boot_vga == Some(true) {
        return GpuOwner::Host(
            "the firmware shows the boot screen and the console on it (boot_vga)",
        );
    }
    if !boot_framebuffers_in(s, d).is_empty() {
        return GpuOwner::Host("the boot framebuffer, the console, lies in its memory");
    }
    let mut others = s
        .gpus()
        .filter(|g| slot(&g.device.address) != card)
        .peekable();
    if others.peek().is_none() {
        return GpuOwner::Host("it is the host's only GPU");
    }
    if others.all(|g| all_functions_for_vm(s, &g.device.address)) {
        return GpuOwner::Host(
            "every other GPU is on vfio-pci for the VM, so it is the one left for the host's screen",
        );
    }
    GpuOwner::Free
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
