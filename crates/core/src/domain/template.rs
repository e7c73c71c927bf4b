//! A new Windows 10/11 passthrough domain: q35 + UEFI, the GPU's whole
//! passthrough set as multifunction hostdevs, virtio disk and network, TPM for
//! Windows 11 — then the same tuning `domain tune` applies (pinning, CPU,
//! Hyper-V from the host's capabilities, timers, no balloon). Every choice
//! comes back as an `Edit` with its why, for the wizard and the CLI.

use super::caps::DomainCaps;
use super::hostdev::{card_hostdevs, cards, root_port};
use super::tune::{Edit, TuneOptions, tune};
use super::xml::Document;
use crate::pinning::PinPlan;
use quick_xml::escape::escape;
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Windows {
    Ten,
    Eleven,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hugepages {
    None,
    TwoMiB,
    OneGiB,
}

impl Hugepages {
    pub fn size_kib(self) -> Option<u64> {
        match self {
            Hugepages::None => None,
            Hugepages::TwoMiB => Some(2048),
            Hugepages::OneGiB => Some(1_048_576),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DiskBus {
    Virtio,
    /// virtio-scsi: TRIM/UNMAP passed through, many disks on one controller.
    Scsi,
    Sata,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// libvirt's NAT network `default`.
    Nat,
    Bridge(String),
    /// macvtap on a host interface (the host itself cannot reach the guest).
    Macvtap(String),
    /// An SR-IOV virtual function (PCI address) handed to the guest: the NIC's
    /// own hardware, no host networking in the path.
    Vf(String),
    None,
}

#[derive(Debug, Clone)]
pub struct WindowsSpec {
    pub name: String,
    pub windows: Windows,
    pub vcpus: usize,
    pub memory_mib: u64,
    pub hugepages: Hugepages,
    /// The passthrough set (GPU first, then its companions).
    pub gpu_set: Vec<String>,
    pub gpu_rom: Option<String>,
    /// A disk image file or a block device (`/dev/…`).
    pub disk: Option<String>,
    pub disk_bus: DiskBus,
    pub install_iso: Option<String>,
    pub virtio_iso: Option<String>,
    /// The answer media of an unattended install (install/answer_media.rs):
    /// a third CD, and the install marked in the domain's metadata.
    pub answer_iso: Option<String>,
    pub network: Network,
    /// A SPICE display for the install (local only, no compression). With
    /// Looking Glass SPICE is there anyway, on 127.0.0.1 for its client.
    pub spice: bool,
    pub plan: Option<PinPlan>,
    pub caps: Option<DomainCaps>,
    /// Code 43 workaround for old NVIDIA drivers (see `TuneOptions::hide_kvm`).
    pub hide_kvm: bool,
    /// `io_uring` instead of `native` AIO for the disk (newer hosts; no
    /// O_DIRECT alignment limits on some filesystems).
    pub io_uring: bool,
    /// Keyboard, mouse, screen and sound (domain/playable.rs).
    pub playable: super::playable::Playable,
}

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("the domain needs a name")]
    NoName,
    #[error("{0}")]
    BadDevice(String),
    #[error("internal: the template did not parse ({0}); please report this")]
    Internal(String),
}

/// The new domain and the why of each part.
#[derive(Debug, Clone)]
pub struct NewDomain {
    pub xml: String,
    pub edits: Vec<Edit>,
}

fn edit(path: &str, what: impl Into<String>, why: &str) -> Edit {
    Edit {
        path: path.into(),
        what: what.into(),
        why: why.into(),
    }
}

/// The namespace of the unattended install's marker in `<metadata>`.
pub const INSTALL_NS: &str = "https://github.com/vfio-assistant/vfio-assistant/xmlns/install/1";

fn esc(s: &str) -> String {
    escape(s).into_owned()
}

/// The base document: os, features, memory, devices without hostdevs.
fn base(spec: &WindowsSpec, edits: &mut Vec<Edit>) -> String {
    let mut x = String::new();
    let os_id = match spec.windows {
        Windows::Ten => "http://microsoft.com/win/10",
        Windows::Eleven => "http://microsoft.com/win/11",
    };
    let _ = writeln!(x, "<domain type='kvm'>\n  <name>{}</name>", esc(&spec.name));
    let _ = writeln!(
        x,
        "  <metadata>\n    <libosinfo:libosinfo xmlns:libosinfo=\"http://libosinfo.org/xmlns/libvirt/domain/1.0\">\n      <libosinfo:os id=\"{os_id}\"/>\n    </libosinfo:libosinfo>{}\n  </metadata>",
        spec.answer_iso
            .as_deref()
            .map_or(String::new(), |a| format!(
                "\n    <vfioa:install xmlns:vfioa=\"{INSTALL_NS}\" answer=\"{}\"/>",
                esc(a)
            ))
    );
    let _ = writeln!(
        x,
        "  <memory unit='MiB'>{0}</memory>\n  <currentMemory unit='MiB'>{0}</currentMemory>",
        spec.memory_mib
    );
    x.push_str("  <memoryBacking>\n");
    if let Some(kib) = spec.hugepages.size_kib() {
        let _ = writeln!(
            x,
            "    <hugepages>\n      <page size='{kib}' unit='KiB'/>\n    </hugepages>"
        );
        edits.push(edit(
            "memoryBacking/hugepages",
            format!("guest memory on {} pages", if kib == 2048 { "2 MiB" } else { "1 GiB" }),
            "Fewer, larger pages mean fewer TLB misses for the guest and memory that is reserved up front instead of found at start time; reserve the pages on the host first (the checks say how many).",
        ));
    }
    x.push_str("    <nosharepages/>\n  </memoryBacking>\n");
    let _ = writeln!(x, "  <vcpu placement='static'>{}</vcpu>", spec.vcpus);
    // The virtio disk (or SCSI controller) runs on iothread 1, which must be
    // declared whether or not the vCPUs are pinned (pinning also pins it):
    // libvirt refuses "Disk iothread '1' not defined in iothreadid" without.
    if spec.disk.is_some() && spec.disk_bus != DiskBus::Sata {
        x.push_str("  <iothreads>1</iothreads>\n");
    }
    let secure = spec.windows == Windows::Eleven;
    x.push_str("  <os firmware='efi'>\n    <type arch='x86_64' machine='q35'>hvm</type>\n");
    if secure {
        x.push_str("    <firmware>\n      <feature enabled='yes' name='enrolled-keys'/>\n      <feature enabled='yes' name='secure-boot'/>\n    </firmware>\n    <loader secure='yes'/>\n");
    }
    x.push_str("  </os>\n");
    edits.push(edit(
        "os",
        if secure {
            "q35 machine, UEFI (OVMF) with Secure Boot and Microsoft keys enrolled"
        } else {
            "q35 machine, UEFI (OVMF)"
        },
        "A modern GPU wants a PCIe slot (q35) and UEFI to initialise its UEFI option ROM; libvirt picks the OVMF build and a fresh NVRAM from the firmware descriptors your distribution installs.",
    ));
    x.push_str("  <features>\n    <acpi/>\n    <apic/>\n    <vmport state='off'/>\n");
    if secure {
        x.push_str("    <smm state='on'/>\n");
    }
    x.push_str("  </features>\n  <cpu mode='host-passthrough' check='none' migratable='off'/>\n  <clock offset='localtime'/>\n");
    x.push_str("  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>restart</on_reboot>\n  <on_crash>destroy</on_crash>\n");
    x.push_str("  <pm>\n    <suspend-to-mem enabled='no'/>\n    <suspend-to-disk enabled='no'/>\n  </pm>\n");
    x.push_str("  <devices>\n");
    devices(spec, &mut x, edits);
    x.push_str("  </devices>\n</domain>\n");
    x
}

fn disk_format(path: &str) -> &'static str {
    if path.ends_with(".qcow2") {
        "qcow2"
    } else {
        "raw"
    }
}

fn devices(spec: &WindowsSpec, x: &mut String, edits: &mut Vec<Edit>) {
    if let Some(disk) = &spec.disk {
        let block = crate::sysroot::HostPath::is_device_node(disk);
        let (kind, src) = if block {
            ("block", "dev")
        } else {
            ("file", "file")
        };
        let io = if spec.io_uring { "io_uring" } else { "native" };
        let (target, bus, extra) = match spec.disk_bus {
            DiskBus::Virtio => (
                "vda",
                "virtio",
                format!(" io='{io}' discard='unmap' iothread='1'"),
            ),
            DiskBus::Scsi => ("sda", "scsi", format!(" io='{io}' discard='unmap'")),
            DiskBus::Sata => ("sda", "sata", format!(" io='{io}' discard='unmap'")),
        };
        if spec.disk_bus == DiskBus::Scsi {
            let _ = writeln!(
                x,
                "    <controller type='scsi' index='0' model='virtio-scsi'>\n      <driver iothread='1' queues='{}'/>\n    </controller>",
                spec.vcpus.clamp(1, 16)
            );
        }
        let _ = writeln!(
            x,
            "    <disk type='{kind}' device='disk'>\n      <driver name='qemu' type='{}' cache='none'{extra}/>\n      <source {src}='{}'/>\n      <target dev='{target}' bus='{bus}'/>\n      <boot order='1'/>\n    </disk>",
            if block { "raw" } else { disk_format(disk) },
            esc(disk)
        );
        edits.push(match spec.disk_bus {
            DiskBus::Virtio => edit(
                "devices/disk",
                format!("virtio disk, cache=none, io={io}, discard, its own iothread"),
                "virtio-blk is the fastest emulated disk; cache=none with native AIO skips the host page cache (no double caching, no stalls on flush), and the iothread keeps disk work off the vCPUs. Windows needs the viostor driver from the virtio-win ISO during install.",
            ),
            DiskBus::Scsi => edit(
                "devices/disk",
                format!("virtio-scsi disk, cache=none, io={io}, discard, the controller on its own iothread"),
                "virtio-scsi passes TRIM/UNMAP through to an SSD or thin image and carries many disks on one controller with one queue per vCPU; Windows needs the vioscsi driver from the virtio-win ISO during install.",
            ),
            DiskBus::Sata => edit(
                "devices/disk",
                format!("SATA disk for the install, cache=none, io={io}"),
                "Windows can install onto SATA without extra drivers; with the virtio-win drivers installed in Windows, the disk can move to virtio later for speed.",
            ),
        });
    }
    let mut cd = 0u8;
    for (iso, why) in [
        (&spec.install_iso, true),
        (&spec.virtio_iso, false),
        (&spec.answer_iso, false),
    ] {
        if let Some(iso) = iso {
            let dev = format!("sd{}", (b'b' + cd) as char);
            cd += 1;
            let boot = if why { "\n      <boot order='2'/>" } else { "" };
            let _ = writeln!(
                x,
                "    <disk type='file' device='cdrom'>\n      <driver name='qemu' type='raw'/>\n      <source file='{}'/>\n      <target dev='{dev}' bus='sata'/>\n      <readonly/>{boot}\n    </disk>",
                esc(iso)
            );
        }
    }
    if spec.virtio_iso.is_some() {
        edits.push(edit(
            "devices/disk",
            "virtio-win drivers as a second CD",
            "During setup, 'Load driver' from this CD finds the virtio disk (viostor) and network (NetKVM) drivers.",
        ));
    }
    if spec.answer_iso.is_some() {
        edits.push(edit(
            "devices/disk",
            "the answer media as a third CD, the install marked in the metadata",
            "Windows Setup reads autounattend.xml and the $WinPEDriver$ drivers from it and installs without questions; the marker tells the start to press a key at the installer's \"Press any key to boot from CD\" and tells the Monitor the install's state.",
        ));
    }
    x.push_str("    <controller type='usb' model='qemu-xhci' ports='15'/>\n");
    let queues = spec.vcpus.clamp(1, 16);
    let nic = |t: &str, source: String| {
        format!(
            "    <interface type='{t}'>\n      {source}\n      <model type='virtio'/>\n      <driver name='vhost' queues='{queues}'/>\n    </interface>\n"
        )
    };
    match &spec.network {
        Network::Nat => x.push_str(&nic("network", "<source network='default'/>".into())),
        Network::Bridge(br) => {
            x.push_str(&nic("bridge", format!("<source bridge='{}'/>", esc(br))))
        }
        Network::Macvtap(dev) => x.push_str(&nic(
            "direct",
            format!("<source dev='{}' mode='bridge'/>", esc(dev)),
        )),
        Network::Vf(addr) => {
            if let Some(a) = super::hostdev::PciAddr::parse(addr.trim()) {
                let _ = writeln!(
                    x,
                    "    <interface type='hostdev' managed='yes'>\n      <source>\n        <address type='pci' domain='0x{:04x}' bus='0x{:02x}' slot='0x{:02x}' function='0x{:x}'/>\n      </source>\n    </interface>",
                    a.domain, a.bus, a.slot, a.function
                );
            }
        }
        Network::None => {}
    }
    if let Network::Vf(addr) = &spec.network {
        edits.push(edit(
            "devices/interface",
            format!("SR-IOV virtual function {addr} as the network card"),
            "The guest drives a slice of the real NIC: no host bridge, no vhost thread, the lowest latency; Windows needs the NIC vendor's VF driver.",
        ));
    } else if spec.network != Network::None {
        edits.push(edit(
            "devices/interface",
            format!("virtio network with vhost, {queues} queues"),
            "vhost moves packet work into the host kernel and one queue per vCPU spreads it; Windows needs NetKVM from the virtio-win ISO.",
        ));
    }
    x.push_str("    <input type='mouse' bus='ps2'/>\n    <input type='keyboard' bus='ps2'/>\n");
    // With Looking Glass, SPICE is the client's way in and listens where the
    // client reaches it: playable.rs writes it (with its why), not this
    // install-only display that listens nowhere.
    if spec.spice && spec.playable.looking_glass.is_none() {
        x.push_str("    <graphics type='spice'>\n      <listen type='none'/>\n      <image compression='off'/>\n    </graphics>\n    <video>\n      <model type='vga'/>\n    </video>\n");
        edits.push(edit(
            "devices/graphics",
            "SPICE for the install: local only, no compression",
            "A window to install Windows in before the GPU driver is there; listen none keeps it off the network, compression off saves CPU locally. Remove it once the GPU drives your monitor.",
        ));
    } else {
        x.push_str("    <video>\n      <model type='none'/>\n    </video>\n");
    }
    if spec.windows == Windows::Eleven {
        x.push_str("    <tpm model='tpm-crb'>\n      <backend type='emulator' version='2.0'/>\n    </tpm>\n");
        edits.push(edit(
            "devices/tpm",
            "TPM 2.0 (tpm-crb, emulated by swtpm)",
            "Windows 11 refuses to install without TPM 2.0 and Secure Boot; swtpm keeps its state next to the domain.",
        ));
    }
}

/// Build the domain XML for `spec`.
pub fn new_windows(spec: &WindowsSpec) -> Result<NewDomain, TemplateError> {
    if spec.name.trim().is_empty() {
        return Err(TemplateError::NoName);
    }
    let mut edits = Vec::new();
    let text = base(spec, &mut edits);
    let mut doc = Document::parse(&text).map_err(|e| TemplateError::Internal(e.to_string()))?;
    let cards = cards(&spec.gpu_set).map_err(|e| TemplateError::BadDevice(e.to_string()))?;
    if let Some(devs) = doc.root.child_mut("devices") {
        for (i, card) in cards.iter().enumerate() {
            // Root ports 1.. for the cards; libvirt numbers its own after them.
            let bus = u8::try_from(i + 1).unwrap_or(u8::MAX);
            devs.append_child(root_port(u32::from(bus)));
            let rom = if i == 0 {
                spec.gpu_rom.as_deref()
            } else {
                None
            };
            for hd in card_hostdevs(card, bus, rom) {
                devs.append_child(hd);
            }
        }
    }
    if !cards.is_empty() {
        edits.push(edit(
            "devices/hostdev",
            format!("passed through: {}", spec.gpu_set.join(", ")),
            "The whole IOMMU passthrough set goes to the guest (a group cannot be split), each card's functions kept together at one guest slot as on the host; managed='yes' lets libvirt bind them to vfio-pci at start and give them back at stop.",
        ));
    }
    let opts = TuneOptions {
        plan: spec.plan.clone(),
        hyperv_supported: spec.caps.as_ref().and_then(|c| c.hyperv.clone()),
        hide_kvm: spec.hide_kvm,
        ..TuneOptions::default()
    };
    let tuned = tune(&mut doc, &opts).map_err(|e| TemplateError::Internal(e.to_string()))?;
    edits.extend(tuned);
    edits.extend(
        super::playable::apply_playable(&mut doc, &spec.playable)
            .map_err(|e| TemplateError::BadDevice(e.to_string()))?,
    );
    doc.indent_new_elements();
    Ok(NewDomain {
        xml: doc.serialize(),
        edits,
    })
}
