//! PCI hostdevs for a passthrough set: every function of one card goes to one
//! guest slot as a multifunction device, the way it sits on the host. Split
//! across guest slots, a GPU's HDMI audio and its USB-C controller look like
//! separate cards to the guest driver, which some drivers (and Code 43
//! workarounds) do not like.

use super::xml::Element;
use crate::host::pci::{full_address, slot_of};
use std::collections::BTreeMap;

pub use crate::host::pci_addr::PciAddr;

impl PciAddr {
    fn set_on(&self, el: &mut Element) {
        el.set_attr("domain", &format!("0x{:04x}", self.domain));
        el.set_attr("bus", &format!("0x{:02x}", self.bus));
        el.set_attr("slot", &format!("0x{:02x}", self.slot));
        el.set_attr("function", &format!("0x{:x}", self.function));
    }
}

/// The host functions grouped by card (host slot), in address order.
pub fn cards(set: &[String]) -> Result<Vec<Vec<PciAddr>>, crate::parse::ParseError> {
    let mut by_slot: BTreeMap<String, Vec<PciAddr>> = BTreeMap::new();
    for a in set {
        let p = PciAddr::parse(a.trim())
            .ok_or_else(|| crate::parse::ParseError(format!("'{a}' is not a PCI address")))?;
        by_slot
            .entry(slot_of(&full_address(a)).to_string())
            .or_default()
            .push(p);
    }
    Ok(by_slot
        .into_values()
        .map(|mut v| {
            v.sort();
            v.dedup();
            v
        })
        .collect())
}

/// `<controller type='pci' model='pcie-root-port'>` with the given index: the
/// guest slot one card plugs into.
pub fn root_port(index: u32) -> Element {
    let mut c = Element::new("controller");
    c.set_attr("type", "pci");
    c.set_attr("index", &index.to_string());
    c.set_attr("model", "pcie-root-port");
    c
}

/// The `<hostdev>` elements of one card, plugged into the root port with
/// index `bus`; functions renumbered from 0 in host order (the host's own
/// numbers whenever the card's function 0 is in the set).
pub fn card_hostdevs(card: &[PciAddr], bus: u8, rom: Option<&str>) -> Vec<Element> {
    let multifunction = card.len() > 1;
    card.iter()
        .enumerate()
        .map(|(i, host)| {
            let mut hd = Element::new("hostdev");
            hd.set_attr("mode", "subsystem");
            hd.set_attr("type", "pci");
            hd.set_attr("managed", "yes");
            let mut source = Element::new("source");
            let mut src_addr = Element::new("address");
            host.set_on(&mut src_addr);
            source.append_child(src_addr);
            hd.append_child(source);
            if i == 0
                && let Some(file) = rom
            {
                let mut r = Element::new("rom");
                r.set_attr("file", file);
                hd.append_child(r);
            }
            let guest_fn = if card[0].function == 0 {
                host.function
            } else {
                u8::try_from(i).unwrap_or(7)
            };
            let mut addr = Element::new("address");
            addr.set_attr("type", "pci");
            PciAddr {
                domain: 0,
                bus,
                slot: 0,
                function: guest_fn,
            }
            .set_on(&mut addr);
            if multifunction && i == 0 {
                addr.set_attr("multifunction", "on");
            }
            hd.append_child(addr);
            hd
        })
        .collect()
}
