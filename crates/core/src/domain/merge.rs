//! Define over a domain that exists: the new document is what the user asked
//! for, but it must keep the existing domain's identity (its UUID — libvirt
//! refuses a same-named domain without it —, the NICs' MAC addresses the
//! guest's network and Windows activation know it by, its NVRAM file) and
//! what the user added by hand that the new document does not speak of at
//! all: top-level elements it lacks (`<sysinfo>`, `<seclabel>`, a
//! `<qemu:commandline>`…) and kinds of device it has none of (the guest
//! agent's `<channel>`, Looking Glass's `<shmem>`, a `<sound>`…). Pure,
//! over the lossless document.

use super::tune::Edit;
use super::xml::{Document, Element};

/// Top-level elements people add by hand (or other tools do) that a new
/// document may not mention; only these are carried over. Everything else
/// that is missing is either derived (`currentMemory` follows `memory`) or a
/// default libvirt fills in again (`on_poweroff`, `clock`, `pm`).
const HAND_ADDED: &[&str] = &[
    "title",
    "description",
    "sysinfo",
    "seclabel",
    "blkiotune",
    "memtune",
    "keywrap",
    "perf",
    "idmap",
    "launchSecurity",
    "genid",
    "qemu:commandline",
    "qemu:capabilities",
    "qemu:override",
    "throttlegroups",
];

/// Device kinds people add by hand: the guest agent's channel, Looking
/// Glass's shared memory, a sound card, USB redirection, a watchdog… Kinds
/// the new document chooses itself (disks, NICs, graphics, video,
/// controllers, hostdevs) are its own, and libvirt's defaults (input, audio,
/// memballoon) come back on their own.
const HAND_ADDED_DEVICES: &[&str] = &[
    "channel",
    "shmem",
    "sound",
    "redirdev",
    "smartcard",
    "filesystem",
    "hub",
    "watchdog",
    "rng",
    "panic",
    "serial",
    "console",
    "parallel",
    "vsock",
    "crypto",
    "tpm",
    "iommu",
];

fn edit(path: &str, what: String, why: &str) -> Edit {
    Edit {
        path: path.into(),
        what,
        why: why.into(),
    }
}

fn uuid_of(doc: &Document) -> Option<String> {
    doc.root
        .child("uuid")
        .map(|u| u.text().trim().to_string())
        .filter(|u| !u.is_empty())
}

/// Why the update cannot go ahead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error(
        "the new document has UUID {new}, but the domain of that name has {existing}: it describes another domain; remove its <uuid> to update this one, or give it another name"
    )]
    OtherUuid { new: String, existing: String },
}

/// Carry over from `existing` into `new` what makes it the same domain and
/// what the user added by hand; the edits say what was kept.
pub fn keep_from_existing(
    existing: &Document,
    new: &mut Document,
) -> Result<Vec<Edit>, MergeError> {
    let mut edits = Vec::new();
    match (uuid_of(existing), uuid_of(new)) {
        (Some(old), Some(n)) if !old.eq_ignore_ascii_case(&n) => {
            return Err(MergeError::OtherUuid {
                new: n,
                existing: old,
            });
        }
        (Some(old), None) => {
            let mut u = Element::new("uuid");
            u.set_text(&old);
            if let Some(slot) = new.root.child_or_insert_after("uuid", &["name"]) {
                *slot = u;
            }
            edits.push(edit(
                "uuid",
                format!("kept {old}"),
                "The same domain, updated: libvirt knows it by this UUID and refuses a same-named domain without it.",
            ));
        }
        _ => {}
    }
    keep_macs(existing, new, &mut edits);
    keep_nvram(existing, new, &mut edits);
    keep_top_level(existing, new, &mut edits);
    keep_devices(existing, new, &mut edits);
    new.indent_new_elements();
    Ok(edits)
}

fn interfaces(doc: &Document) -> Vec<&Element> {
    doc.root
        .child("devices")
        .map(|d| d.elements().filter(|e| e.name == "interface").collect())
        .unwrap_or_default()
}

/// The n-th interface of each type keeps its MAC address.
fn keep_macs(existing: &Document, new: &mut Document, edits: &mut Vec<Edit>) {
    let old: Vec<(String, String)> = interfaces(existing)
        .iter()
        .filter_map(|i| {
            let mac = i.child("mac")?.attr("address")?.to_string();
            Some((i.attr("type").unwrap_or("").to_string(), mac))
        })
        .collect();
    let Some(devices) = new.root.child_mut("devices") else {
        return;
    };
    let mut seen: Vec<String> = Vec::new();
    for iface in devices.children_named_mut("interface") {
        let kind = iface.attr("type").unwrap_or("").to_string();
        let nth = seen.iter().filter(|k| **k == kind).count();
        seen.push(kind.clone());
        if iface.child("mac").is_some() {
            continue;
        }
        let Some((_, mac)) = old.iter().filter(|(k, _)| *k == kind).nth(nth) else {
            continue;
        };
        let mut m = Element::new("mac");
        m.set_attr("address", mac);
        iface.children.insert(0, super::xml::Node::Element(m));
        edits.push(edit(
            "devices/interface/mac",
            format!("kept {mac}"),
            "The guest knows its network card by this address (DHCP leases, Windows' network profile and activation).",
        ));
    }
}

fn keep_nvram(existing: &Document, new: &mut Document, edits: &mut Vec<Edit>) {
    let Some(old) = existing.root.child("os").and_then(|o| o.child("nvram")) else {
        return;
    };
    let Some(os) = new.root.child_mut("os") else {
        return;
    };
    let uefi = os.attr("firmware") == Some("efi") || os.child("loader").is_some();
    if !uefi || os.child("nvram").is_some() {
        return;
    }
    os.append_child(old.clone());
    edits.push(edit(
        "os/nvram",
        format!("kept {}", old.text().trim()),
        "The UEFI variables (boot entries, Secure Boot keys) live in this file; a fresh one would forget Windows' boot entry.",
    ));
}

fn keep_top_level(existing: &Document, new: &mut Document, edits: &mut Vec<Edit>) {
    let have: Vec<String> = new.root.elements().map(|e| e.name.clone()).collect();
    let extra: Vec<Element> = existing
        .root
        .elements()
        .filter(|e| HAND_ADDED.contains(&e.name.as_str()))
        .filter(|e| !have.contains(&e.name))
        .cloned()
        .collect();
    for e in extra {
        edits.push(edit(
            &e.name,
            format!("kept <{}> from the existing domain", e.name),
            "The new document does not speak of it, so what you (or another tool) set there stays.",
        ));
        // Before <devices> when there is one, as libvirt orders them.
        new.root.append_child(e);
    }
}

fn keep_devices(existing: &Document, new: &mut Document, edits: &mut Vec<Edit>) {
    let Some(old) = existing.root.child("devices") else {
        return;
    };
    let Some(devices) = new.root.child_mut("devices") else {
        return;
    };
    // A channel is told apart by its target's name (the guest agent's
    // `org.qemu.guest_agent.0` is not Looking Glass's SPICE channel).
    let kind = |e: &Element| match e.name.as_str() {
        "channel" => format!(
            "channel:{}",
            e.child("target").and_then(|t| t.attr("name")).unwrap_or("")
        ),
        n => n.to_string(),
    };
    let have: Vec<String> = devices.elements().map(kind).collect();
    let extra: Vec<Element> = old
        .elements()
        .filter(|e| HAND_ADDED_DEVICES.contains(&e.name.as_str()))
        // The SPICE agent's channel exists only with SPICE graphics.
        .filter(|e| !(e.name == "channel" && e.attr("type") == Some("spicevmc")))
        .filter(|e| !have.contains(&kind(e)))
        .cloned()
        .collect();
    for e in extra {
        edits.push(edit(
            &format!("devices/{}", e.name),
            format!("kept <{}> from the existing domain", e.name),
            "The new document has no device of this kind, so the one you added stays.",
        ));
        devices.append_child(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXISTING: &str = "<domain type='kvm'>\n  <name>win11</name>\n  <uuid>9d1f2c4e-0000-4000-8000-000000000001</uuid>\n  <memory unit='KiB'>8388608</memory>\n  <sysinfo type='smbios'>\n    <bios><entry name='vendor'>ACME</entry></bios>\n  </sysinfo>\n  <os firmware='efi'>\n    <type arch='x86_64' machine='pc-q35-9.0'>hvm</type>\n    <nvram>/var/lib/libvirt/qemu/nvram/win11_VARS.fd</nvram>\n  </os>\n  <devices>\n    <interface type='network'>\n      <mac address='52:54:00:aa:bb:cc'/>\n      <source network='default'/>\n    </interface>\n    <sound model='ich9'/>\n    <controller type='pci' index='1' model='pcie-root-port'/>\n  </devices>\n</domain>\n";
    const NEW: &str = "<domain type='kvm'>\n  <name>win11</name>\n  <memory unit='MiB'>16384</memory>\n  <os firmware='efi'>\n    <type arch='x86_64' machine='q35'>hvm</type>\n  </os>\n  <devices>\n    <interface type='network'>\n      <source network='default'/>\n    </interface>\n    <controller type='usb' model='qemu-xhci'/>\n  </devices>\n</domain>\n";

    #[test]
    fn update_keeps_identity_and_hand_additions() {
        let old = Document::parse(EXISTING).unwrap();
        let mut new = Document::parse(NEW).unwrap();
        let edits = keep_from_existing(&old, &mut new).unwrap();
        let out = new.serialize();
        let doc = Document::parse(&out).unwrap();
        assert_eq!(
            uuid_of(&doc).as_deref(),
            Some("9d1f2c4e-0000-4000-8000-000000000001")
        );
        assert!(out.contains("52:54:00:aa:bb:cc"), "{out}");
        assert!(out.contains("win11_VARS.fd"), "{out}");
        assert!(out.contains("<sysinfo"), "{out}");
        assert!(out.contains("<sound model='ich9'/>"), "{out}");
        // The new document's own choices win: its memory, and no old root port.
        assert!(out.contains("16384") && !out.contains("8388608"), "{out}");
        assert!(!out.contains("pcie-root-port"), "{out}");
        assert_eq!(edits.len(), 5, "{edits:?}");
    }

    #[test]
    fn another_domains_uuid_is_refused() {
        let old = Document::parse(EXISTING).unwrap();
        let mut new = Document::parse(&NEW.replace(
            "<name>win11</name>",
            "<name>win11</name><uuid>11111111-0000-4000-8000-000000000002</uuid>",
        ))
        .unwrap();
        assert!(matches!(
            keep_from_existing(&old, &mut new),
            Err(MergeError::OtherUuid { .. })
        ));
    }

    #[test]
    fn the_guest_agents_channel_stays_beside_another_channel() {
        let agent =
            "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>";
        let spice =
            "<channel type='spicevmc'><target type='virtio' name='com.redhat.spice.0'/></channel>";
        let existing = Document::parse(&EXISTING.replace("<sound model='ich9'/>", agent)).unwrap();
        let mut new = Document::parse(&NEW.replace(
            "<controller type='usb' model='qemu-xhci'/>",
            &format!("<controller type='usb' model='qemu-xhci'/>{spice}"),
        ))
        .unwrap();
        keep_from_existing(&existing, &mut new).unwrap();
        let out = new.serialize();
        assert!(out.contains("org.qemu.guest_agent.0"), "{out}");
        assert_eq!(out.matches("com.redhat.spice.0").count(), 1, "{out}");
    }

    #[test]
    fn updating_twice_changes_nothing_more() {
        let old = Document::parse(EXISTING).unwrap();
        let mut new = Document::parse(NEW).unwrap();
        keep_from_existing(&old, &mut new).unwrap();
        let once = new.serialize();
        let again = keep_from_existing(&old, &mut new).unwrap();
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(new.serialize(), once);
    }
}
