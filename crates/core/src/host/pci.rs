//! PCI devices from `sys/bus/pci/devices`: ids, names, class, driver, NUMA node,
//! IOMMU group, boot VGA, reset methods, link, slot, parent bridges and SR-IOV.

use super::hex::{Hex16, Hex24};
use super::pci_names;
use super::usage::HostUsage;
use super::warnings::Warnings;
use crate::parse::pci_config::{ConfigInfo, read_config};
use crate::parse::pci_resource::{Bar, parse_resource};
use crate::parse::values::{
    parse_hex_u16, parse_hex_u32, parse_i64, parse_link_speed_gts, parse_u64,
};
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::collections::BTreeMap;

/// `DDDD:BB:DD.F`, the way sysfs names a PCI function (`PciAddr`'s grammar,
/// the domain spelled).
pub fn is_pci_address(name: &str) -> bool {
    name.len() == 12 && super::pci_addr::PciAddr::parse(name).is_some()
}

/// An address as users type it (`01:00.0`) in sysfs form (`0000:01:00.0`).
pub fn full_address(addr: &str) -> String {
    if addr.len() == 7 {
        format!("0000:{addr}")
    } else {
        addr.to_string()
    }
}

/// `DDDD:BB:DD` of an address: functions with the same prefix are one card's siblings.
pub fn slot_of(address: &str) -> &str {
    address.get(..10).unwrap_or(address)
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResetInfo {
    /// `reset_method` as the kernel lists it (`flr`, `pm`, `bus`, `device_specific`…).
    pub methods: Vec<String>,
    /// The `reset` attribute exists (the kernel knows at least one way).
    pub reset_file: bool,
    /// Whether the kernel can reset this function at all.
    pub can_reset: bool,
    /// False when the tree is a partial capture (no `config` either), so the
    /// absence of `reset` says nothing.
    pub known: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkInfo {
    pub current_speed_gts: Option<f32>,
    pub current_width: Option<u32>,
    pub max_speed_gts: Option<f32>,
    pub max_width: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SriovInfo {
    pub total_vfs: u32,
    pub num_vfs: u32,
    /// Addresses of the virtual functions that exist now.
    pub vfs: Vec<String>,
}

/// One PCI function as the host sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PciDevice {
    pub address: String,
    pub vendor_id: Hex16,
    pub device_id: Hex16,
    pub subsystem_vendor_id: Option<Hex16>,
    pub subsystem_device_id: Option<Hex16>,
    pub vendor_name: Option<String>,
    pub device_name: Option<String>,
    pub subsystem_name: Option<String>,
    /// 24-bit class code: class, subclass, programming interface.
    pub class: Hex24,
    pub class_name: Option<String>,
    pub subclass_name: Option<String>,
    pub revision: Option<u8>,
    pub driver: Option<String>,
    /// The kernel module that driver lives in (`driver/module`): a driver's
    /// name is not always its module's (bochs-drm is in `bochs`, xhci_hcd
    /// in `xhci_pci`), and modprobe — softdeps, blacklists — speaks modules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_module: Option<String>,
    pub driver_override: Option<String>,
    /// `None` when the kernel does not know (-1) or does not say.
    pub numa_node: Option<u32>,
    pub iommu_group: Option<u32>,
    pub boot_vga: Option<bool>,
    /// `power_state` (D0, D3hot, D3cold, unknown, error), where the kernel
    /// has it (5.19 and newer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_state: Option<String>,
    pub reset: ResetInfo,
    pub link: LinkInfo,
    pub physical_slot: Option<String>,
    /// Bridges from the closest one up to the root port.
    pub parent_bridges: Vec<String>,
    pub sriov: Option<SriovInfo>,
    /// For a virtual function: its physical function.
    pub physfn: Option<String>,
    /// The legacy interrupt line (`irq`); MSI users show other numbers.
    pub irq: Option<u32>,
    /// Memory and I/O regions with their sizes (`resource`).
    pub bars: Vec<Bar>,
    /// Capabilities from the config space, when it could be read.
    pub config: Option<ConfigInfo>,
    /// What the host uses behind this function (filled by `usage`).
    pub host_usage: HostUsage,
}

impl PciDevice {
    pub fn class_code(&self) -> u32 {
        self.class.0
    }
    /// Class and subclass, e.g. `0x0300`.
    pub fn class_subclass(&self) -> u16 {
        (self.class.0 >> 8) as u16
    }
    /// VGA, 3D or other display controller.
    pub fn is_gpu(&self) -> bool {
        self.class.0 >> 16 == 0x03
    }
    pub fn is_host_bridge(&self) -> bool {
        self.class_subclass() == 0x0600
    }
    pub fn is_pci_bridge(&self) -> bool {
        matches!(self.class_subclass(), 0x0604 | 0x0609)
    }
    pub fn is_audio(&self) -> bool {
        matches!(self.class_subclass(), 0x0403 | 0x0401)
    }
    pub fn is_usb_controller(&self) -> bool {
        self.class_subclass() == 0x0c03
    }
    /// Bound to a driver that hands the device to a VM (or holds it for one).
    pub fn bound_for_vm(&self) -> bool {
        matches!(self.driver.as_deref(), Some("vfio-pci") | Some("pci-stub"))
    }
    /// Function number (the `F` of `BB:DD.F`).
    pub fn function(&self) -> u8 {
        self.address
            .get(11..12)
            .and_then(|f| u8::from_str_radix(f, 16).ok())
            .unwrap_or(0)
    }
    /// The best short name: "NVIDIA GeForce GTX 960" style.
    pub fn display_name(&self) -> String {
        match (&self.vendor_name, &self.device_name) {
            (Some(v), Some(d)) => format!("{} {}", short_vendor(v), d),
            (Some(v), None) => format!("{} device {}", short_vendor(v), self.device_id),
            _ => format!("device {}:{}", self.vendor_id, self.device_id),
        }
    }
    /// What kind of device, in words.
    pub fn kind_name(&self) -> String {
        self.subclass_name
            .clone()
            .or_else(|| self.class_name.clone())
            .unwrap_or_else(|| format!("class {}", self.class))
    }
}

/// "Advanced Micro Devices, Inc. [AMD/ATI]" -> "AMD/ATI"; "NVIDIA Corporation" -> "NVIDIA".
pub fn short_vendor(name: &str) -> String {
    if let (Some(a), Some(b)) = (name.rfind('['), name.rfind(']'))
        && a < b
    {
        return name[a + 1..b].to_string();
    }
    for suffix in [
        " Corporation",
        " Corp.",
        ", Inc.",
        " Inc.",
        " Co., Ltd.",
        " Technologies",
        " Semiconductor",
    ] {
        if let Some(s) = name.strip_suffix(suffix) {
            return s.to_string();
        }
    }
    name.to_string()
}

/// Read every PCI function. Missing or odd attributes become warnings.
pub fn read_pci_devices(root: &HostRoot, warnings: &mut Warnings) -> Vec<PciDevice> {
    let devices_dir = HostPath::sys("bus/pci/devices");
    let names = match root.list_dir(&devices_dir) {
        Ok(n) => n,
        Err(e) => {
            if !e.is_not_found() {
                warnings.push(&e);
            }
            return Vec::new();
        }
    };
    let slots = read_slots(root, warnings);
    let (good, bad): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| is_pci_address(n));
    for name in bad {
        warnings.note(
            devices_dir.join(&name).to_string(),
            "not a PCI address; skipped",
        );
    }
    // Two halves on two threads: config-space reads are slow on some hosts
    // (each dword traps on a VM), and sysfs reads are syscall-bound.
    let half = good.len().div_ceil(2);
    let read_half = |names: &[String]| {
        let mut w = Warnings::default();
        let devs: Vec<PciDevice> = names
            .iter()
            .filter_map(|name| read_device(root, &devices_dir.join(name), name, &slots, &mut w))
            .collect();
        (devs, w)
    };
    let (first, second) = good.split_at(half);
    let (mut out, w1, second) = std::thread::scope(|s| {
        let other = s.spawn(|| read_half(second));
        let (devs, w1) = read_half(first);
        (devs, w1, other.join())
    });
    warnings.extend(w1);
    match second {
        Ok((devs, w2)) => {
            out.extend(devs);
            warnings.extend(w2);
        }
        // A bug: let `scan` fail with it rather than lose half the devices.
        Err(payload) => std::panic::resume_unwind(payload),
    }
    out
}

fn read_device(
    root: &HostRoot,
    dir: &HostPath,
    address: &str,
    slots: &BTreeMap<String, String>,
    warnings: &mut Warnings,
) -> Option<PciDevice> {
    let vendor_id = warnings.take(root.read_parsed(&dir.join("vendor"), parse_hex_u16))?;
    let device_id = warnings.take(root.read_parsed(&dir.join("device"), parse_hex_u16))?;
    let (Some(vendor_id), Some(device_id)) = (vendor_id, device_id) else {
        warnings.note(dir.to_string(), "no vendor/device id; skipped");
        return None;
    };
    let class = warnings
        .take_opt(root.read_parsed(&dir.join("class"), parse_hex_u32))
        .unwrap_or(0);
    let sub_vendor =
        warnings.take_opt(root.read_parsed(&dir.join("subsystem_vendor"), parse_hex_u16));
    let sub_device =
        warnings.take_opt(root.read_parsed(&dir.join("subsystem_device"), parse_hex_u16));
    let revision = warnings
        .take_opt(root.read_parsed(&dir.join("revision"), parse_hex_u32))
        .and_then(|r| u8::try_from(r).ok());
    let (vendor_name, device_name) = pci_names::device_names(vendor_id, device_id);
    let subsystem_name = match (sub_vendor, sub_device) {
        (Some(sv), Some(sd)) if sv != 0 => pci_names::subsystem_name(vendor_id, device_id, sv, sd),
        _ => None,
    };
    let (class_name, subclass_name) = pci_names::class_names(class);
    let driver = warnings.take(root.link_name(&dir.join("driver"))).flatten();
    // Built-in drivers have no module link: None, not a warning.
    let driver_module = driver
        .as_ref()
        .and_then(|_| root.link_name(&dir.join("driver/module")).ok().flatten());
    let driver_override = warnings
        .take_opt(root.read_attr_opt(&dir.join("driver_override")))
        .filter(|s| !s.is_empty() && s != "(null)");
    let numa_node = warnings
        .take_opt(root.read_parsed(&dir.join("numa_node"), parse_i64))
        .and_then(|n| u32::try_from(n).ok());
    let iommu_group = warnings
        .take(root.link_name(&dir.join("iommu_group")))
        .flatten()
        .and_then(|g| g.parse().ok());
    let boot_vga = warnings
        .take_opt(root.read_attr_opt(&dir.join("boot_vga")))
        .map(|v| v == "1");
    let power_state = warnings
        .take_opt(root.read_attr_opt(&dir.join("power_state")))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && v.len() < 16);
    // Config reads trap into the hypervisor or hit slow ECAM, one per 4
    // bytes: only the header and the capability lists are read (pread).
    let config_path = dir.join("config");
    let config = match root.open_file(&config_path) {
        Ok(file) => {
            use std::os::unix::fs::FileExt;
            let info = read_config(|off, len| {
                let mut buf = vec![0u8; len];
                let n = file.read_at(&mut buf, off as u64).unwrap_or(0);
                buf.truncate(n);
                buf
            });
            (info.bytes > 0).then_some(info)
        }
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            warnings.push(&e);
            None
        }
    };
    let irq = warnings
        .take_opt(root.read_parsed(&dir.join("irq"), parse_u64))
        .and_then(|v| u32::try_from(v).ok());
    let bars = warnings
        .take_opt(root.read_parsed(&dir.join("resource"), parse_resource))
        .unwrap_or_default();
    let reset = read_reset(root, dir, warnings);
    let link = read_link(root, dir, warnings);
    let real = warnings.take(root.resolve_link(dir)).flatten();
    let parent_bridges = real
        .as_ref()
        .map(|p| parent_chain(p, address))
        .unwrap_or_default();
    let physical_slot = slots.get(slot_of(address)).cloned();
    let sriov = read_sriov(root, dir, warnings);
    let physfn = warnings
        .take(root.link_name(&dir.join("physfn")))
        .flatten()
        .filter(|a| is_pci_address(a));
    Some(PciDevice {
        address: address.to_string(),
        vendor_id: Hex16(vendor_id),
        device_id: Hex16(device_id),
        subsystem_vendor_id: sub_vendor.map(Hex16),
        subsystem_device_id: sub_device.map(Hex16),
        vendor_name: vendor_name.map(str::to_string),
        device_name: device_name.map(str::to_string),
        subsystem_name: subsystem_name.map(str::to_string),
        class: Hex24(class),
        class_name: class_name.map(str::to_string),
        subclass_name: subclass_name.map(str::to_string),
        revision,
        driver,
        driver_module,
        driver_override,
        numa_node,
        iommu_group,
        boot_vga,
        power_state,
        reset,
        link,
        physical_slot,
        parent_bridges,
        sriov,
        physfn,
        irq,
        bars,
        config,
        host_usage: HostUsage::default(),
    })
}

fn read_reset(root: &HostRoot, dir: &HostPath, warnings: &mut Warnings) -> ResetInfo {
    let methods: Vec<String> = warnings
        .take_opt(root.read_attr_opt(&dir.join("reset_method")))
        .map(|m| m.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let reset_file = root.exists(&dir.join("reset"));
    ResetInfo {
        can_reset: reset_file || !methods.is_empty(),
        known: reset_file || !methods.is_empty() || root.exists(&dir.join("config")),
        methods,
        reset_file,
    }
}

fn read_link(root: &HostRoot, dir: &HostPath, warnings: &mut Warnings) -> LinkInfo {
    let width = |name: &str, w: &mut Warnings| {
        w.take_opt(root.read_parsed(&dir.join(name), parse_u64))
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v > 0 && *v <= 32)
    };
    LinkInfo {
        current_speed_gts: warnings
            .take_opt(root.read_parsed(&dir.join("current_link_speed"), parse_link_speed_gts))
            .flatten(),
        current_width: width("current_link_width", warnings),
        max_speed_gts: warnings
            .take_opt(root.read_parsed(&dir.join("max_link_speed"), parse_link_speed_gts))
            .flatten(),
        max_width: width("max_link_width", warnings),
    }
}

fn read_sriov(root: &HostRoot, dir: &HostPath, warnings: &mut Warnings) -> Option<SriovInfo> {
    let total = warnings.take_opt(root.read_parsed(&dir.join("sriov_totalvfs"), parse_u64))?;
    let num = warnings
        .take_opt(root.read_parsed(&dir.join("sriov_numvfs"), parse_u64))
        .unwrap_or(0);
    let mut vfs: Vec<(u32, String)> = Vec::new();
    if let Some(entries) = warnings.take(root.list_dir(dir)) {
        for name in entries {
            if let Some(idx) = name
                .strip_prefix("virtfn")
                .and_then(|n| n.parse::<u32>().ok())
                && let Some(addr) = warnings.take(root.link_name(&dir.join(&name))).flatten()
            {
                vfs.push((idx, addr));
            }
        }
    }
    vfs.sort();
    Some(SriovInfo {
        total_vfs: u32::try_from(total).unwrap_or(u32::MAX),
        num_vfs: u32::try_from(num).unwrap_or(u32::MAX),
        vfs: vfs.into_iter().map(|(_, a)| a).collect(),
    })
}

/// The PCI addresses above `address` in its real sysfs path, closest first.
fn parent_chain(real: &HostPath, address: &str) -> Vec<String> {
    let mut chain: Vec<String> = real
        .relative()
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .filter(|c| is_pci_address(c) && *c != address)
        .map(str::to_string)
        .collect();
    chain.reverse();
    chain
}

/// `sys/bus/pci/slots/NAME/address` (`0000:01:00`) -> slot name.
fn read_slots(root: &HostRoot, warnings: &mut Warnings) -> BTreeMap<String, String> {
    let dir = HostPath::sys("bus/pci/slots");
    let mut map = BTreeMap::new();
    let Ok(names) = root.list_dir(&dir) else {
        return map;
    };
    for name in names {
        if let Some(addr) = warnings.take_opt(root.read_attr_opt(&dir.join(&name).join("address")))
        {
            // Hot-plug slots without a card report only the slot, keep the first name.
            map.entry(addr).or_insert(name);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert!(is_pci_address("0000:01:00.0"));
        assert!(!is_pci_address("10000:01:00.0"));
        assert!(!is_pci_address("0000:01:00"));
        assert!(!is_pci_address("pci0000:00"));
        assert_eq!(slot_of("0000:01:00.1"), "0000:01:00");
    }

    #[test]
    fn vendor_short_names() {
        assert_eq!(
            short_vendor("Advanced Micro Devices, Inc. [AMD/ATI]"),
            "AMD/ATI"
        );
        assert_eq!(short_vendor("NVIDIA Corporation"), "NVIDIA");
        assert_eq!(short_vendor("Intel Corporation"), "Intel");
    }

    #[test]
    fn chain_closest_first() {
        let p =
            HostPath::sys("devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0");
        assert_eq!(
            parent_chain(&p, "0000:03:00.0"),
            vec!["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"]
        );
    }
}
