//! The domain as the start trial defines it: the same machine with what
//! only the real host has taken out, so that libvirt and QEMU can say
//! whether it would start.

use crate::domain::xml::{Document, Element};

/// A stripped copy to try starting: the same `<os>`, `<features>`, `<cpu>`
/// and `<clock>`, 128 MiB, one vCPU per vCPU up to `max_vcpus`, no devices,
/// no pinning, no hugepages. Named `name`, without the original's UUID.
pub fn trial_domain(doc: &Document, name: &str, max_vcpus: usize) -> Document {
    let mut t = doc.clone();
    let root = &mut t.root;
    for drop in [
        "uuid",
        "memoryBacking",
        "cputune",
        "numatune",
        "iothreads",
        "iothreadids",
        "currentMemory",
        "resource",
        "blkiotune",
        "memtune",
        "seclabel",
    ] {
        root.remove_children(drop);
    }
    if let Some(n) = root.child_mut("name") {
        n.set_text(name);
    }
    if let Some(m) = root.child_mut("memory") {
        m.set_attr("unit", "MiB");
        m.set_text("128");
    }
    if let Some(v) = root.child_mut("vcpu") {
        let n: usize = v.text().trim().parse().unwrap_or(1);
        v.remove_attr("cpuset");
        v.set_text(&n.clamp(1, max_vcpus.max(1)).to_string());
        if n > max_vcpus.max(1)
            && let Some(cpu) = root.child_mut("cpu")
        {
            cpu.remove_children("topology");
        }
    }
    if let Some(cpu) = root.child_mut("cpu") {
        cpu.remove_children("numa");
        cpu.remove_children("cache");
    }
    if let Some(os) = root.child_mut("os") {
        // A fresh NVRAM for the trial (libvirt makes and removes it).
        os.remove_children("nvram");
    }
    if let Some(devices) = root.child_mut("devices") {
        let keep: Vec<Element> = devices
            .elements()
            .filter(|e| e.name == "emulator")
            .cloned()
            .collect();
        let names: Vec<String> = devices.elements().map(|e| e.name.clone()).collect();
        for n in names {
            devices.remove_children(&n);
        }
        for e in keep {
            devices.append_child(e);
        }
        let mut video = Element::new("video");
        let mut model = Element::new("model");
        model.set_attr("type", "none");
        video.append_child(model);
        devices.append_child(video);
        let mut balloon = Element::new("memballoon");
        balloon.set_attr("model", "none");
        devices.append_child(balloon);
    }
    t.indent_new_elements();
    t
}
