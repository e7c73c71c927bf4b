//! What Windows prints, read: `pnputil /enum-devices /class Display` (each
//! display device with its status and problem code: 43 is the GPU driver's
//! "Windows has stopped this device") and `reg query` of a function's
//! `MessageSignaledInterruptProperties` (MSISupported: message-signalled
//! interrupts on, or the line-based ones that stutter in a VM).

use serde::Serialize;

/// One device of pnputil's listing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PnpDevice {
    /// `PCI\VEN_10DE&DEV_2204&SUBSYS_…\4&16e2ac9c&0&0008`
    pub instance_id: String,
    pub description: String,
    /// `Started`, `Problem`, `Disabled`, `Stopped`…
    pub status: String,
    /// The problem code (43 for CM_PROB_FAILED_POST_START) and its name.
    pub problem: Option<(u32, String)>,
    pub driver: Option<String>,
}

impl PnpDevice {
    /// PCI vendor and device ID from the instance ID, for a PCI device.
    pub fn pci_ids(&self) -> Option<(u16, u16)> {
        let rest = self.instance_id.strip_prefix("PCI\\")?;
        let mut ven = None;
        let mut dev = None;
        for part in rest.split(['&', '\\']) {
            if let Some(v) = part.strip_prefix("VEN_") {
                ven = u16::from_str_radix(v, 16).ok();
            } else if let Some(d) = part.strip_prefix("DEV_") {
                dev = u16::from_str_radix(d, 16).ok();
            }
        }
        Some((ven?, dev?))
    }
}

/// pnputil's `/enum-devices` text: blocks of `Key: value` lines, a blank
/// line between devices. Lines it does not know are skipped; a block without
/// an instance ID is not a device.
pub fn pnputil_devices(text: &str) -> Vec<PnpDevice> {
    let mut out = Vec::new();
    let mut cur = PnpDevice::default();
    let mut flush = |cur: &mut PnpDevice| {
        let d = std::mem::take(cur);
        if !d.instance_id.is_empty() {
            out.push(d);
        }
    };
    for line in text.lines().take(100_000) {
        let Some((key, value)) = line.split_once(':') else {
            if line.trim().is_empty() {
                flush(&mut cur);
            }
            continue;
        };
        let value = value.trim().to_string();
        match key.trim() {
            "Instance ID" => {
                flush(&mut cur);
                cur.instance_id = value;
            }
            "Device Description" => cur.description = value,
            "Status" => cur.status = value,
            "Driver Name" => cur.driver = Some(value),
            // `43 (0x2B) [CM_PROB_FAILED_POST_START]`
            "Problem Code" => {
                let code = value.split_whitespace().next().and_then(|c| c.parse().ok());
                let name = value
                    .split_once('[')
                    .and_then(|(_, r)| r.split_once(']'))
                    .map(|(n, _)| n.to_string())
                    .unwrap_or_default();
                cur.problem = code.map(|c| (c, name));
            }
            _ => {}
        }
    }
    flush(&mut cur);
    out
}

/// `reg query …\MessageSignaledInterruptProperties /v MSISupported`: the
/// value's line `    MSISupported    REG_DWORD    0x1`. `None` when the
/// output has no such value (the key or the value is absent: Windows then
/// uses what the driver's INF asked for).
pub fn msi_supported(text: &str) -> Option<bool> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next()? == "MSISupported" && f.next()? == "REG_DWORD").then_some(())?;
        let v = f.next()?;
        let n = u32::from_str_radix(v.strip_prefix("0x").unwrap_or(v), 16).ok()?;
        Some(n != 0)
    })
}

/// The registry key holding a device's MSI setting.
pub fn msi_key(instance_id: &str) -> String {
    format!(
        "HKLM\\SYSTEM\\CurrentControlSet\\Enum\\{instance_id}\\Device Parameters\\Interrupt Management\\MessageSignaledInterruptProperties"
    )
}
