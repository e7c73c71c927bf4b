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

/// `powercfg /getactivescheme`: `Power Scheme GUID: 381b4222-…  (Balanced)`
/// → (GUID, name).
pub fn active_scheme(text: &str) -> Option<(String, String)> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("Power Scheme GUID:")?.trim();
        let (guid, name) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let name = name.trim().trim_start_matches('(').trim_end_matches(')');
        (guid.len() == 36).then(|| (guid.to_ascii_lowercase(), name.to_string()))
    })
}

/// The timer query's line `MIN MAX CURRENT` (ntdll's NtQueryTimerResolution,
/// in 100 ns units: the coarsest, the finest and the current period).
pub fn timer_resolution(text: &str) -> Option<(u32, u32, u32)> {
    text.lines().find_map(|l| {
        let v: Vec<u32> = l
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        (v.len() == 3 && v.iter().all(|n| *n > 0)).then(|| (v[0], v[1], v[2]))
    })
}

/// A Windows service's state from `sc.exe query NAME`, `None` when it is
/// not installed (sc's error 1060).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceState {
    Running,
    /// Any other state sc names (STOPPED, START_PENDING, …).
    Other(String),
}

/// `sc.exe query` prints `        STATE              : 4  RUNNING`; a
/// service that does not exist fails with `FAILED 1060`.
pub fn service_state(text: &str) -> Option<Option<ServiceState>> {
    if text.contains("1060") {
        return Some(None);
    }
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "STATE").then_some(())?;
        let word = v.split_whitespace().nth(1)?.to_string();
        Some(Some(if word == "RUNNING" {
            ServiceState::Running
        } else {
            ServiceState::Other(word)
        }))
    })
}

/// The last error line of a Looking Glass host log (`[E]` lines).
pub fn last_log_error(text: &str) -> Option<String> {
    text.lines()
        .rev()
        .find(|l| l.trim_start().starts_with("[E]"))
        .map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parsers_read_windows_words_and_refuse_garbage() {
        assert_eq!(
            active_scheme(
                "Power Scheme GUID: 8C5E7FDA-E8BF-4A96-9A85-A6E23A8C635C  (High performance)\r\n"
            ),
            Some((
                "8c5e7fda-e8bf-4a96-9a85-a6e23a8c635c".into(),
                "High performance".into()
            ))
        );
        assert_eq!(active_scheme("Access is denied.\r\n"), None);
        assert_eq!(
            timer_resolution("156250 5000 10000\r\n"),
            Some((156_250, 5_000, 10_000))
        );
        assert_eq!(timer_resolution("Add-Type : error\r\n0 0 0\r\n"), None);
        let missing = "[SC] EnumQueryServicesStatus:OpenService FAILED 1060:\r\n\r\nThe specified service does not exist as an installed service.\r\n";
        assert_eq!(service_state(missing), Some(None));
        assert_eq!(
            service_state("        STATE              : 4  RUNNING \r\n"),
            Some(Some(ServiceState::Running))
        );
        assert_eq!(service_state("garbage"), None);
        assert_eq!(
            last_log_error("[I] a\n[E] b\n[I] c\n").as_deref(),
            Some("[E] b")
        );
        assert_eq!(last_log_error(""), None);
    }
}
