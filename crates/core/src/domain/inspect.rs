//! Reading an existing domain for the checks and the monitor: its pinning,
//! Hyper-V enlightenments, Code 43 workarounds and passed-through devices.

use super::xml::{Document, Element};
use crate::parse::cpulist::parse_cpulist;
use crate::pinning::model::GuestTopology;
use crate::pinning::validate::Pinning;
use std::collections::BTreeSet;

fn cpuset(el: &Element) -> BTreeSet<u32> {
    el.attr("cpuset")
        .and_then(|s| parse_cpulist(s).ok())
        .map(|v| v.into_iter().collect())
        .unwrap_or_default()
}

/// `<cputune>` vcpupin/emulatorpin and `<cpu><topology>`.
pub fn pinning_of(doc: &Document) -> Pinning {
    let mut p = Pinning::default();
    if let Some(ct) = doc.root.child("cputune") {
        for e in ct.elements() {
            match e.name.as_str() {
                "vcpupin" => {
                    if let Some(v) = e.attr("vcpu").and_then(|v| v.parse().ok()) {
                        p.vcpus.insert(v, cpuset(e));
                    }
                }
                "emulatorpin" => p.emulator = cpuset(e),
                _ => {}
            }
        }
    }
    let topo = doc.root.child("cpu").and_then(|c| c.child("topology"));
    p.guest = topo.map(|t| {
        let n = |k: &str| t.attr(k).and_then(|v| v.parse().ok()).unwrap_or(1);
        GuestTopology {
            sockets: n("sockets"),
            dies: n("dies"),
            cores: n("cores"),
            threads: n("threads"),
        }
    });
    p
}

/// The Hyper-V enlightenments turned on (empty with mode='passthrough').
pub fn hyperv_on(doc: &Document) -> Vec<String> {
    doc.root
        .child("features")
        .and_then(|f| f.child("hyperv"))
        .filter(|h| h.attr("mode") != Some("passthrough"))
        .map(|h| {
            h.elements()
                .filter(|e| e.attr("state") == Some("on"))
                .map(|e| e.name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Hyper-V mode='passthrough': every enlightenment the host has.
pub fn hyperv_passthrough(doc: &Document) -> bool {
    doc.root
        .child("features")
        .and_then(|f| f.child("hyperv"))
        .is_some_and(|h| h.attr("mode") == Some("passthrough"))
}

/// `<features><kvm><hidden state='on'/>` and `<hyperv><vendor_id value=…>`.
pub fn code43_workarounds(doc: &Document) -> (bool, Option<String>) {
    let features = doc.root.child("features");
    let hidden = features
        .and_then(|f| f.child("kvm"))
        .and_then(|k| k.child("hidden"))
        .is_some_and(|h| h.attr("state") == Some("on"));
    let vendor = features
        .and_then(|f| f.child("hyperv"))
        .and_then(|h| h.child("vendor_id"))
        .filter(|v| v.attr("state") == Some("on"))
        .and_then(|v| v.attr("value"))
        .map(str::to_string);
    (hidden, vendor)
}

/// A PCI hostdev: the host address, where the guest sees it, its ROM file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hostdev {
    /// `0000:0b:00.0`.
    pub host: String,
    /// (bus, slot, function) in the guest, when given.
    pub guest: Option<(u32, u32, u32)>,
    pub rom_file: Option<String>,
}

fn hex(el: &Element, k: &str) -> Option<u32> {
    let v = el.attr(k)?;
    u32::from_str_radix(v.trim_start_matches("0x"), 16).ok()
}

pub fn pci_hostdevs(doc: &Document) -> Vec<Hostdev> {
    let Some(devices) = doc.root.child("devices") else {
        return Vec::new();
    };
    devices
        .elements()
        .filter(|e| e.name == "hostdev" && e.attr("type") == Some("pci"))
        .filter_map(|h| {
            let s = h.child("source")?.child("address")?;
            let host = format!(
                "{:04x}:{:02x}:{:02x}.{:x}",
                hex(s, "domain").unwrap_or(0),
                hex(s, "bus")?,
                hex(s, "slot")?,
                hex(s, "function")?
            );
            let guest = h
                .child("address")
                .filter(|a| a.attr("type") == Some("pci"))
                .and_then(|a| Some((hex(a, "bus")?, hex(a, "slot")?, hex(a, "function")?)));
            Some(Hostdev {
                host,
                guest,
                rom_file: h
                    .child("rom")
                    .and_then(|r| r.attr("file"))
                    .map(str::to_string),
            })
        })
        .collect()
}
