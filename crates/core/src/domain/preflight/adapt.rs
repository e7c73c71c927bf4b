//! The preflight's adaptations: a domain changed to what this host really
//! accepts (CPU features a nested host cannot give, SMM, firmware, vhost,
//! Hyper-V enlightenments, timers), each an `Edit` with its reason.

use super::*;

fn cpu_is_passthrough(doc: &Document) -> bool {
    doc.root.child("cpu").and_then(|c| c.attr("mode")) == Some("host-passthrough")
}

/// `<cpu><feature policy='disable' name=…/>`; false when already there.
fn disable_cpu_feature(doc: &mut Document, name: &str) -> bool {
    let Some(cpu) = doc.root.child_or_insert("cpu") else {
        return false;
    };
    if cpu.elements().any(|f| {
        f.name == "feature" && f.attr("name") == Some(name) && f.attr("policy") == Some("disable")
    }) {
        return false;
    }
    let existing = cpu
        .children_named_mut("feature")
        .find(|f| f.attr("name") == Some(name));
    match existing {
        Some(f) => f.set_attr("policy", "disable"),
        None => {
            let mut f = Element::new("feature");
            f.set_attr("policy", "disable");
            f.set_attr("name", name);
            cpu.append_child(f);
        }
    }
    true
}

pub(super) fn uses_uefi(doc: &Document) -> bool {
    doc.root.child("os").is_some_and(|o| {
        o.attr("firmware") == Some("efi")
            || o.child("loader").is_some_and(|l| {
                l.attr("type") == Some("pflash")
                    || l.text().contains("OVMF")
                    || l.text().contains("edk2")
            })
    })
}

pub(super) fn smm_on(doc: &Document) -> bool {
    doc.root
        .child("features")
        .and_then(|f| f.child("smm"))
        .is_some_and(|s| s.attr("state") != Some("off"))
}

pub(super) fn loader_is_secure(doc: &Document) -> bool {
    doc.root
        .child("os")
        .and_then(|o| o.child("loader"))
        .is_some_and(|l| l.attr("secure") == Some("yes"))
}

/// SMM off, and Secure Boot with it (its firmware needs SMM). Said
/// explicitly: with `firmware='efi'` libvirt may pick a Secure Boot build on
/// its own and turn SMM on for it.
fn smm_off(doc: &mut Document) -> bool {
    let mut changed = false;
    if let Some(f) = doc.root.child_or_insert("features")
        && let Some(smm) = f.child_or_insert("smm")
        && smm.attr("state") != Some("off")
    {
        smm.set_attr("state", "off");
        changed = true;
    }
    if !uses_uefi(doc) {
        return changed;
    }
    let Some(os) = doc.root.child_mut("os") else {
        return changed;
    };
    let autoselect = os.attr("firmware") == Some("efi");
    if let Some(l) = os.child_mut("loader")
        && l.attr("secure").is_some_and(|v| v != "no")
    {
        // libvirt refuses secure='no' with firmware autoselection: there the
        // firmware features below say it.
        if autoselect {
            l.remove_attr("secure");
        } else {
            l.set_attr("secure", "no");
        }
        changed = true;
    }
    if autoselect {
        os.remove_children_where(|l| {
            l.name == "loader" && l.attrs.is_empty() && l.text().trim().is_empty()
        });
    }
    if autoselect && let Some(fw) = os.child_or_insert_after("firmware", &["type"]) {
        for name in ["enrolled-keys", "secure-boot"] {
            let exists = fw
                .elements()
                .any(|f| f.name == "feature" && f.attr("name") == Some(name));
            if !exists {
                let mut f = Element::new("feature");
                f.set_attr("enabled", "no");
                f.set_attr("name", name);
                fw.append_child(f);
                changed = true;
            }
            for f in fw.children_named_mut("feature") {
                if f.attr("name") == Some(name) && f.attr("enabled") != Some("no") {
                    f.set_attr("enabled", "no");
                    changed = true;
                }
            }
        }
    }
    changed
}

/// SeaBIOS instead of UEFI.
fn to_bios(doc: &mut Document) -> bool {
    if !uses_uefi(doc) {
        return false;
    }
    if let Some(os) = doc.root.child_mut("os") {
        os.remove_attr("firmware");
        for name in ["loader", "nvram", "firmware"] {
            os.remove_children(name);
        }
    }
    true
}

/// The interfaces' `<driver name='vhost'>` dropped (queues kept).
fn no_vhost(doc: &mut Document) -> bool {
    let Some(devices) = doc.root.child_mut("devices") else {
        return false;
    };
    let mut changed = false;
    for iface in devices.children_named_mut("interface") {
        for d in iface.children_named_mut("driver") {
            if d.attr("name") == Some("vhost") {
                d.remove_attr("name");
                changed = true;
            }
        }
    }
    changed
}

fn drop_hyperv(doc: &mut Document, name: &str) -> bool {
    let Some(h) = doc
        .root
        .child_mut("features")
        .and_then(|f| f.child_mut("hyperv"))
    else {
        return false;
    };
    let had = h.child(name).is_some();
    h.remove_children(name);
    // synic/stimer/tlbflush/ipi need vpindex; stimer needs synic.
    if name == "vpindex" {
        for dep in ["synic", "stimer", "tlbflush", "ipi"] {
            h.remove_children(dep);
        }
    }
    if name == "synic" {
        h.remove_children("stimer");
    }
    had
}

fn drop_timer(doc: &mut Document, name: &str) -> bool {
    let Some(clock) = doc.root.child_mut("clock") else {
        return false;
    };
    let is_it = |t: &Element| t.name == "timer" && t.attr("name") == Some(name);
    let had = clock.elements().any(is_it);
    clock.remove_children_where(is_it);
    had
}

/// Apply one adaptation; whether the document changed.
pub fn apply_adaptation(doc: &mut Document, a: &Adaptation) -> bool {
    match a {
        Adaptation::DisableCpuFeature(f) => disable_cpu_feature(doc, f),
        Adaptation::DropHyperv(f) => drop_hyperv(doc, f),
        Adaptation::DropTimer(t) => drop_timer(doc, t),
        Adaptation::SmmOff => smm_off(doc),
        Adaptation::Bios => to_bios(doc),
        Adaptation::NoVhost => no_vhost(doc),
        Adaptation::Emulate => emulate(doc),
    }
}

/// Whether the domain asks for something only KVM gives: `type='kvm'`, a
/// host-passthrough CPU, Hyper-V enlightenments, the `<kvm>` features, a KVM
/// ioapic or the hypervclock timer. A domain emulated already can still
/// hold them — `domain tune` adds them to whatever it is given — and QEMU's
/// emulation refuses them at the start ("CPU model 'host' requires KVM").
fn kvm_only(doc: &Document) -> bool {
    doc.root.attr("type") == Some("kvm")
        || cpu_is_passthrough(doc)
        || doc.root.child("features").is_some_and(|f| {
            f.elements().any(|e| {
                e.name == "hyperv"
                    || e.name == "kvm"
                    || (e.name == "ioapic" && e.attr("driver") == Some("kvm"))
            })
        })
        || doc.root.child("clock").is_some_and(|c| {
            c.elements()
                .any(|t| t.name == "timer" && t.attr("name") == Some("hypervclock"))
        })
}

/// Under QEMU's emulation (no KVM): `type='qemu'`; a host-passthrough CPU
/// becomes `maximum` (everything TCG gives); the Hyper-V enlightenments,
/// the hypervclock timer, the KVM-only `<kvm>` features and a KVM ioapic go
/// (they exist only with KVM).
fn emulate(doc: &mut Document) -> bool {
    if !kvm_only(doc) {
        return false;
    }
    doc.root.set_attr("type", "qemu");
    if let Some(cpu) = doc.root.child_mut("cpu")
        && cpu.attr("mode") == Some("host-passthrough")
    {
        cpu.set_attr("mode", "maximum");
        cpu.remove_attr("check");
        cpu.remove_attr("migratable");
        cpu.remove_children("cache");
        cpu.remove_children_where(|f| f.name == "feature" && f.attr("policy") == Some("require"));
    }
    if let Some(features) = doc.root.child_mut("features") {
        for name in ["hyperv", "kvm"] {
            features.remove_children(name);
        }
        features.remove_children_where(|e| e.name == "ioapic" && e.attr("driver") == Some("kvm"));
    }
    drop_timer(doc, "hypervclock");
    true
}

fn adaptation_path(a: &Adaptation) -> &'static str {
    match a {
        Adaptation::DisableCpuFeature(_) => "cpu/feature",
        Adaptation::DropHyperv(_) => "features/hyperv",
        Adaptation::DropTimer(_) => "clock/timer",
        Adaptation::SmmOff => "features/smm",
        Adaptation::Bios => "os",
        Adaptation::NoVhost => "devices/interface/driver",
        Adaptation::Emulate => "type",
    }
}

fn adaptation_what(a: &Adaptation) -> String {
    match a {
        Adaptation::DisableCpuFeature(f) => format!("CPU feature '{f}' disabled"),
        Adaptation::DropHyperv(f) => format!("Hyper-V enlightenment '{f}' left out"),
        Adaptation::DropTimer(t) => format!("timer '{t}' left out"),
        Adaptation::SmmOff => "SMM off, and Secure Boot with it".into(),
        Adaptation::Bios => "SeaBIOS instead of UEFI".into(),
        Adaptation::NoVhost => "virtio network without vhost".into(),
        Adaptation::Emulate => "emulated CPU (type='qemu', CPU 'maximum', no Hyper-V)".into(),
    }
}

/// What the host says before anything is tried: a nested host (the
/// `hypervisor` flag) whose CPU lacks IA32_ARCH_CAPABILITIES cannot set it
/// for a host-passthrough guest, although KVM lists it (seen on AMD EPYC
/// under nested KVM: `failed to set MSR 0x10a`); a host without
/// /dev/vhost-net cannot give a NIC the vhost backend. `live`: the snapshot
/// is of the host that will run the domain.
pub fn known_from_host(doc: &Document, snap: &HostSnapshot, live: bool) -> Vec<StartCause> {
    let mut out = Vec::new();
    let wants_vhost = doc.root.child("devices").is_some_and(|d| {
        d.elements().filter(|i| i.name == "interface").any(|i| {
            i.elements()
                .any(|x| x.name == "driver" && x.attr("name") == Some("vhost"))
        })
    });
    if live && wants_vhost && snap.system.has_dev && !snap.system.dev_vhost_net {
        out.push(StartCause {
            id: "network.vhost",
            title: "This host has no /dev/vhost-net".into(),
            evidence: "/dev/vhost-net: not present".into(),
            why: "The in-kernel virtio network backend (vhost) needs the vhost_net module; without it libvirt refuses the start ('vhost-net was requested for an interface, but is unavailable').".into(),
            fix: "Load it: `modprobe vhost_net` (and list it in /etc/modules-load.d/ to keep it); tuning the domain again turns vhost back on.".into(),
            adapt: Some(Adaptation::NoVhost),
        });
    }
    // No /dev/kvm: libvirt refuses type='kvm' outright ("could not find
    // capabilities for domaintype=kvm"). Emulated, the domain and its
    // passed-through devices can still be tried; a game cannot be played.
    if live && snap.system.has_dev && !snap.firmware.dev_kvm && kvm_only(doc) {
        out.push(StartCause {
            id: "kvm.none",
            title: "This host has no KVM (/dev/kvm): the VM is emulated".into(),
            evidence: "/dev/kvm: not present".into(),
            why: "Without KVM, QEMU emulates every instruction in software: the domain, its firmware and its passed-through devices start and can be tried, but it runs tens of times slower — no use for a game.".into(),
            fix: "Turn on VT-x / AMD-V (SVM) in the firmware and load kvm_intel or kvm_amd (the kvm.device check says how); then write the domain again for KVM.".into(),
            adapt: Some(Adaptation::Emulate),
        });
    }
    if cpu_is_passthrough(doc)
        && snap.cpu.hypervisor
        && !snap.cpu.arch_capabilities
        && (snap.firmware.dev_kvm || !snap.system.has_dev)
    {
        out.push(StartCause {
            id: "cpu.msr",
            title: "This host is itself a VM and its CPU has no IA32_ARCH_CAPABILITIES".into(),
            evidence: "/proc/cpuinfo flags: hypervisor, no arch_capabilities".into(),
            why: "KVM offers arch-capabilities to every host-passthrough guest, but a nested KVM whose own CPU lacks the register cannot set it: QEMU stops with 'failed to set MSR 0x10a'.".into(),
            fix: "<feature policy='disable' name='arch-capabilities'/> in <cpu>.".into(),
            adapt: Some(Adaptation::DisableCpuFeature("arch-capabilities".into())),
        });
    }
    out
}

/// Apply every adaptation in `causes` that changes something, as edits
/// carrying the cause's reason and evidence.
pub fn adapt(doc: &mut Document, causes: &[StartCause]) -> Vec<Edit> {
    let mut edits = Vec::new();
    for c in causes {
        let Some(a) = &c.adapt else {
            continue;
        };
        if apply_adaptation(doc, a) {
            edits.push(Edit {
                path: adaptation_path(a).into(),
                what: adaptation_what(a),
                why: format!("{}. {} (seen: {})", c.title, c.why, c.evidence),
            });
        }
    }
    edits
}
