//! The host's USB as a map: each controller (a PCI function, so it has an
//! IOMMU group and can be passed to a VM whole) with the devices plugged
//! into its ports, from `/sys/bus/usb/devices` — root hubs `usbN` whose
//! link leads to their controller's PCI address, devices `B-P[.P…]` with
//! their IDs and names, interfaces `B-P:C.I` with their class (HID
//! keyboards are class 3, protocol 1; mice protocol 2).
//!
//! What it answers: which controller to pass for a hot-plug-proof USB setup,
//! what goes with it, and whether it holds the host's only keyboard (then
//! passing it is refused: the host would be left without one).

use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsbDevice {
    /// The kernel's name: bus and port path (`3-1.4`).
    pub path: String,
    pub vendor: Option<u16>,
    pub product: Option<u16>,
    pub manufacturer: Option<String>,
    pub name: Option<String>,
    pub keyboard: bool,
    pub mouse: bool,
    pub hub: bool,
}

impl UsbDevice {
    pub fn label(&self) -> String {
        let ids = match (self.vendor, self.product) {
            (Some(v), Some(p)) => format!(" [{v:04x}:{p:04x}]"),
            _ => String::new(),
        };
        let name = match (&self.manufacturer, &self.name) {
            (Some(m), Some(n)) if !n.starts_with(m.as_str()) => format!("{m} {n}"),
            (_, Some(n)) => n.clone(),
            (Some(m), None) => m.clone(),
            (None, None) => "USB device".into(),
        };
        format!("{name}{ids}")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsbController {
    /// The controller's PCI address (`0000:02:00.0`), when its root hub's
    /// link leads to one.
    pub pci_address: Option<String>,
    /// Its root hubs' bus numbers (an xHCI has two: USB 2 and USB 3).
    pub buses: Vec<u32>,
    /// What is plugged in, hubs included, in port order.
    pub devices: Vec<UsbDevice>,
}

impl UsbController {
    pub fn keyboards(&self) -> impl Iterator<Item = &UsbDevice> {
        self.devices.iter().filter(|d| d.keyboard)
    }
}

fn hex(root: &HostRoot, p: &HostPath) -> Option<u16> {
    root.read_attr(p)
        .ok()
        .and_then(|v| u16::from_str_radix(v.trim(), 16).ok())
}

/// Every controller with its devices, by PCI address.
pub fn read_usb(root: &HostRoot) -> Vec<UsbController> {
    let dir = HostPath::sys("bus/usb/devices");
    let Ok(mut names) = root.list_dir(&dir) else {
        return Vec::new();
    };
    names.sort();
    let mut out: Vec<UsbController> = Vec::new();
    // Root hubs first: bus → controller.
    for n in names.iter().filter(|n| n.starts_with("usb")) {
        let Ok(bus) = n[3..].parse::<u32>() else {
            continue;
        };
        let pci = root
            .resolve_link(&dir.join(n))
            .ok()
            .flatten()
            .and_then(|t| {
                t.relative()
                    .parent()
                    .and_then(|p| p.file_name())
                    .map(|s| s.to_string_lossy().into_owned())
            })
            .filter(|a| a.len() == 12 && a.as_bytes().get(4) == Some(&b':'));
        match out
            .iter_mut()
            .find(|c| c.pci_address.is_some() && c.pci_address == pci)
        {
            Some(c) => c.buses.push(bus),
            None => out.push(UsbController {
                pci_address: pci,
                buses: vec![bus],
                devices: Vec::new(),
            }),
        }
    }
    for n in names
        .iter()
        .filter(|n| !n.starts_with("usb") && !n.contains(':'))
    {
        let Some(bus) = n.split('-').next().and_then(|b| b.parse::<u32>().ok()) else {
            continue;
        };
        let d = dir.join(n);
        let attr = |a: &str| {
            root.read_attr(&d.join(a))
                .ok()
                .map(|v| v.trim().to_string())
        };
        // Its interfaces say what it is (a keyboard often has a second,
        // consumer-control interface that is not one).
        let (mut keyboard, mut mouse, mut hub) = (false, false, false);
        for i in names.iter().filter(|x| {
            x.strip_prefix(n.as_str())
                .is_some_and(|r| r.starts_with(':'))
        }) {
            let ia = |a: &str| root.read_attr(&dir.join(i).join(a)).ok();
            let class = ia("bInterfaceClass").unwrap_or_default();
            let proto = ia("bInterfaceProtocol").unwrap_or_default();
            match (class.trim(), proto.trim()) {
                ("03", "01") => keyboard = true,
                ("03", "02") => mouse = true,
                ("09", _) => hub = true,
                _ => {}
            }
        }
        let dev = UsbDevice {
            path: n.clone(),
            vendor: hex(root, &d.join("idVendor")),
            product: hex(root, &d.join("idProduct")),
            manufacturer: attr("manufacturer"),
            name: attr("product"),
            keyboard,
            mouse,
            hub,
        };
        if let Some(c) = out.iter_mut().find(|c| c.buses.contains(&bus)) {
            c.devices.push(dev);
        }
    }
    out
}

/// Why passing the controller at `address` to a VM would leave the host
/// without a keyboard, when it would: it holds every keyboard the host has
/// on USB (and the host has none elsewhere that the map can see).
pub fn holds_only_keyboard(controllers: &[UsbController], address: &str) -> Option<String> {
    let here: Vec<&UsbDevice> = controllers
        .iter()
        .filter(|c| c.pci_address.as_deref() == Some(address))
        .flat_map(|c| c.keyboards())
        .collect();
    let elsewhere = controllers
        .iter()
        .filter(|c| c.pci_address.as_deref() != Some(address))
        .any(|c| c.keyboards().next().is_some());
    (!here.is_empty() && !elsewhere).then(|| {
        format!(
            "{address} is the USB controller of the host's only keyboard ({}): passed to the VM, the host would have none until the VM stops. Plug the keyboard into another controller's port, or pass single devices by ID instead",
            here.iter().map(|d| d.label()).collect::<Vec<_>>().join(", ")
        )
    })
}
