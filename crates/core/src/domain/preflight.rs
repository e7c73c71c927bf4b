//! Will this host start this domain? The pure half of the preflight that
//! `domain new`, `domain validate`, the wizard's Validate step and the test
//! guest all share: given the domain and what was gathered about the host
//! (`PreflightFacts`: the snapshot, domain capabilities, networks, the files
//! the domain names, a trial start's findings), it
//! * adapts the domain to what this host really accepts (`adapt`): absolute
//!   paths, CPU features a nested host cannot give, SMM, firmware — each as
//!   an `Edit` with the reason and the evidence; and
//! * checks what cannot be adapted (`check`) as findings with a fix: the
//!   schema, the capabilities, memory and hugepages, disks and ISOs, the
//!   network, the passed-through devices, a domain with no disk.
//!
//! Gathering (files, libvirt, the trial start) is `report::preflight`.

mod adapt;
mod files;
mod trial;

pub use trial::trial_domain;

pub use adapt::{adapt, apply_adaptation, known_from_host};
use adapt::{loader_is_secure, smm_on, uses_uefi};
pub use files::{FileFact, FileRole, FileState, absolute_paths, referenced_files};

use super::caps::DomainCaps;
use super::start_failure::{Adaptation, StartCause};
use super::tune::Edit;
use super::validate::{SchemaResult, caps_problems};
use super::xml::{Document, Element};
use crate::finding::{Action, Finding, Status};
use crate::host::HostSnapshot;
use crate::host::iommu::VerdictKind;
use crate::units::human_kib;
use serde::Serialize;
use std::path::Path;

/// How a trial start of a stripped copy went (see `report::preflight`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "detail")]
pub enum Trial {
    /// Not tried: a captured host, a driver without QEMU, no permission…
    NotRun(String),
    /// It started (after the adaptations learnt) and kept running.
    Started { rounds: usize },
    /// It did not start, for these reasons (none adaptable any more).
    Failed(Vec<StartCause>),
}

/// A libvirt network as the preflight sees it (the libvirt layer fills it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkSummary {
    pub name: String,
    pub active: bool,
    pub autostart: bool,
}

/// Everything the pure preflight looks at besides the domain.
#[derive(Debug, Clone)]
pub struct PreflightFacts<'a> {
    pub snap: &'a HostSnapshot,
    pub caps: Option<DomainCaps>,
    /// `None`: could not ask libvirt.
    pub networks: Option<Vec<NetworkSummary>>,
    /// The host's network interfaces (`/sys/class/net`), for bridges and
    /// macvtap; `None` when not read.
    pub interfaces: Option<Vec<String>>,
    pub files: Vec<FileFact>,
    /// What trial starts on this host taught (causes with an adaptation).
    pub learnt: Vec<StartCause>,
    pub trial: Trial,
    /// libvirt's schema on the adapted document; `None`: not run yet.
    pub schema: Option<SchemaResult>,
}

fn fail(id: &str, title: impl Into<String>) -> Finding {
    Finding::new(id, title, Status::Fail)
}

fn disks(doc: &Document) -> (usize, usize) {
    let Some(devices) = doc.root.child("devices") else {
        return (0, 0);
    };
    let mut disks = 0;
    let mut cds = 0;
    for d in devices.elements().filter(|e| e.name == "disk") {
        if d.attr("device") == Some("cdrom") {
            cds += 1;
        } else {
            disks += 1;
        }
    }
    let other = devices
        .elements()
        .filter(|e| e.name == "filesystem" || (e.name == "interface" && e.child("boot").is_some()))
        .count();
    (disks + other, cds)
}

/// The guest's memory in KiB (`<memory unit=…>`).
pub fn memory_kib(doc: &Document) -> Option<u64> {
    let m = doc.root.child("memory")?;
    let n: u128 = m.text().trim().parse().ok()?;
    let bytes: u128 = match m.attr("unit").unwrap_or("KiB") {
        "b" | "bytes" => 1,
        "KB" => 1000,
        "k" | "K" | "KiB" => 1024,
        "MB" => 1_000_000,
        "M" | "MiB" => 1 << 20,
        "GB" => 1_000_000_000,
        "G" | "GiB" => 1 << 30,
        "TB" => 1_000_000_000_000,
        "T" | "TiB" => 1 << 40,
        _ => return None,
    };
    u64::try_from(n.checked_mul(bytes)? / 1024).ok()
}

/// The hugepage size the domain asks for, in KiB (2048 when unsized).
fn hugepage_kib(doc: &Document) -> Option<u64> {
    let hp = doc.root.child("memoryBacking")?.child("hugepages")?;
    let Some(page) = hp.child("page") else {
        return Some(2048);
    };
    let size: u64 = page.attr("size")?.parse().ok()?;
    match page.attr("unit").unwrap_or("KiB") {
        "MiB" | "M" => size.checked_mul(1024),
        "GiB" | "G" => size.checked_mul(1024 * 1024),
        _ => Some(size),
    }
}

fn check_memory(doc: &Document, snap: &HostSnapshot, out: &mut Vec<Finding>) {
    let Some(want) = memory_kib(doc) else {
        return;
    };
    if let Some(size) = hugepage_kib(doc) {
        let pool = snap.kernel.hugepages.iter().find(|p| p.size_kib == size);
        let need = want.div_ceil(size.max(1));
        let free = pool.map_or(0, |p| p.free);
        let f = Finding::new(
            "preflight.hugepages",
            format!(
                "{} of guest memory on {} hugepages: {need} needed, {free} free",
                human_kib(want),
                human_kib(size)
            ),
            if free >= need { Status::Pass } else { Status::Fail },
        )
        .evidence(
            format!("/sys/kernel/mm/hugepages/hugepages-{size}kB/free_hugepages"),
            free.to_string(),
        )
        .why("The domain backs its memory with hugepages, which the kernel keeps apart from normal memory: with too few free, QEMU stops at start ('Insufficient free host memory pages').");
        let mib = want / 1024;
        out.push(
            f.fix_if(
                free < need,
                format!(
                    "Reserve {need} pages of {} before the start (the Tuning page does it, with the VM's memory given), or remove <hugepages> from <memoryBacking>.",
                    human_kib(size)
                ),
            )
            .action_if(
                free < need,
                Action::Tune {
                    change: "hugepages".into(),
                },
                format!("sudo vfio-assistant tune apply --memory {mib}M --only hugepages,persist"),
            ),
        );
        return;
    }
    let total = snap.kernel.mem_total_kib;
    let avail = snap.kernel.mem_available_kib;
    let (status, title) = match (total, avail) {
        (Some(t), _) if want > t => (
            Status::Fail,
            format!(
                "{} for the guest, but this host has {} in all",
                human_kib(want),
                human_kib(t)
            ),
        ),
        (_, Some(a)) if want > a => (
            Status::Warn,
            format!(
                "{} for the guest, but only {} is free now",
                human_kib(want),
                human_kib(a)
            ),
        ),
        (Some(t), Some(a)) => (
            Status::Pass,
            format!(
                "{} for the guest; the host has {} free of {}",
                human_kib(want),
                human_kib(a),
                human_kib(t)
            ),
        ),
        _ => (
            Status::Unknown,
            format!(
                "{} for the guest; the host's free memory is not known",
                human_kib(want)
            ),
        ),
    };
    let mut f = Finding::new("preflight.memory", title, status)
        .why("A VM with a device passed through pins all of its memory at start: what the host cannot give, it cannot swap out either, so the start fails or the host runs out.");
    if let Some(a) = avail {
        f = f.evidence("/proc/meminfo MemAvailable", format!("{a} kB"));
    }
    if let Some(t) = total {
        f = f.evidence("/proc/meminfo MemTotal", format!("{t} kB"));
    }
    let fix_total = total
        .map(|t| human_kib(t.saturating_mul(3) / 4))
        .unwrap_or_default();
    out.push(f.fix_if(
        matches!(status, Status::Fail | Status::Warn),
        format!("Give the VM less memory (at most about {fix_total} on this host leaves the host room), or close programs before starting it."),
    ));
}

fn check_files(facts: &PreflightFacts, doc: &Document, out: &mut Vec<Finding>) {
    for (path, role) in referenced_files(doc) {
        if !Path::new(&path).is_absolute() {
            out.push(
                fail("preflight.file", format!("The {} path '{path}' is relative", role.word()))
                    .evidence("domain XML", path.clone())
                    .why("libvirt takes only absolute paths (its schema refuses relative ones), and QEMU does not start in your folder.")
                    .fix(format!("Write the whole path, e.g. /var/lib/libvirt/images/{path}.")),
            );
            continue;
        }
        let state = facts
            .files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.state.clone())
            .unwrap_or(FileState::Unknown(
                "not looked at: a captured host's files are not here".into(),
            ));
        let word = role.word();
        let f = match &state {
            FileState::Ok => Finding::new("preflight.file", format!("The {word} {path} is there"), Status::Pass),
            FileState::Missing => fail("preflight.file", format!("The {word} {path} does not exist"))
                .fix(match role {
                    FileRole::Disk => format!("Create it (`qemu-img create -f qcow2 -o preallocation=metadata {path} 100G`, or the wizard's storage step) or name an existing image."),
                    _ => "Name an existing file, with its whole path.".into(),
                }),
            FileState::NotAFile(what) => fail("preflight.file", format!("{path} is not a file but {what}"))
                .fix("Name the image or ISO file itself."),
            FileState::FolderClosed(dir) => fail("preflight.file", format!("QEMU may not reach the {word} {path}: it cannot enter {dir}"))
                .fix(format!("Move the file under /var/lib/libvirt/images, or let others enter the folder: `chmod o+x {dir}` (and each folder above it).")),
            FileState::Unknown(why) => Finding::new("preflight.file", format!("The {word} {path}: could not look ({why})"), Status::Unknown),
        };
        out.push(
            f.evidence(path.clone(), format!("{state:?}"))
                .why("QEMU opens every disk, ISO and ROM file at start, as its own user: a file that is missing, or behind a folder that user cannot enter (a home folder is often 0700), stops the start."),
        );
    }
}

fn check_disk_present(doc: &Document, out: &mut Vec<Finding>) {
    let (disks, cds) = disks(doc);
    let network_boot = doc.root.child("os").is_some_and(|o| {
        o.elements()
            .any(|b| b.name == "boot" && b.attr("dev") == Some("network"))
    });
    if disks == 0 && !network_boot {
        out.push(
            fail("preflight.disk", if cds > 0 { "The VM has an ISO but no disk to install to" } else { "The VM has no disk" })
                .why("Without a disk there is nothing to install Windows on or boot from: the VM would start into the firmware's 'no bootable device' screen.")
                .fix("Add a disk image (`domain new --disk FILE`, or the wizard's storage step creates one)."),
        );
    }
}

fn check_networks(facts: &PreflightFacts, doc: &Document, out: &mut Vec<Finding>) {
    let Some(devices) = doc.root.child("devices") else {
        return;
    };
    for iface in devices.elements().filter(|e| e.name == "interface") {
        let src = iface.child("source");
        match iface.attr("type") {
            Some("network") => {
                let Some(net) = src.and_then(|s| s.attr("network")) else {
                    continue;
                };
                let f = match &facts.networks {
                    None => Finding::new("preflight.network", format!("Network '{net}': libvirt was not asked"), Status::Unknown),
                    Some(list) => match list.iter().find(|n| n.name == net) {
                        None => fail("preflight.network", format!("There is no libvirt network named '{net}'"))
                            .fix(format!("Define it (for 'default': `virsh net-define /usr/share/libvirt/networks/default.xml && virsh net-autostart {net}`), or use a bridge (`--network bridge:BR`).")),
                        Some(n) if n.active => Finding::new("preflight.network", format!("Network '{net}' is running"), Status::Pass),
                        Some(n) => Finding::new("preflight.network", format!("Network '{net}' is defined but not running"), Status::Warn)
                            .fix(format!(
                                "A VM started from this tool starts it too; to keep it started: `virsh net-start {net}`{}.",
                                if n.autostart { "" } else { " and `virsh net-autostart` it" }
                            )),
                    },
                };
                out.push(f.evidence("libvirt networks", net).why("The VM's network card plugs into this libvirt network; a network that is not running stops the start ('network is not active')."));
            }
            Some("bridge") => {
                let Some(br) = src.and_then(|s| s.attr("bridge")) else {
                    continue;
                };
                let f = match &facts.interfaces {
                    None => Finding::new("preflight.network", format!("Bridge {br}: the host's interfaces were not read"), Status::Unknown),
                    Some(list) if list.iter().any(|n| n == br) => Finding::new("preflight.network", format!("Bridge {br} exists"), Status::Pass),
                    Some(_) => fail("preflight.network", format!("The host has no interface named {br}"))
                        .fix("Create the bridge first (NetworkManager: `nmcli con add type bridge ifname br0`), or use the NAT network."),
                };
                out.push(
                    f.evidence(
                        "/sys/class/net",
                        facts
                            .interfaces
                            .as_ref()
                            .map(|l| l.join(" "))
                            .unwrap_or_default(),
                    )
                    .why("A bridged VM plugs into a host bridge, which must exist when it starts."),
                );
            }
            _ => {}
        }
    }
}

fn check_hostdevs(facts: &PreflightFacts, doc: &Document, out: &mut Vec<Finding>) {
    let Some(devices) = doc.root.child("devices") else {
        return;
    };
    for hd in devices
        .elements()
        .filter(|e| e.name == "hostdev" && e.attr("type") == Some("pci"))
    {
        let Some(addr) = hd
            .child("source")
            .and_then(|s| s.child("address"))
            .and_then(pci_address)
        else {
            continue;
        };
        let managed = hd.attr("managed") == Some("yes");
        let f = match facts.snap.device(&addr) {
            None if facts.snap.pci_devices.is_empty() => Finding::new("preflight.hostdev", format!("{addr}: this host's PCI devices are not known"), Status::Unknown),
            None => fail("preflight.hostdev", format!("There is no PCI device {addr} on this host"))
                .fix("Remove the hostdev, or pick the device again (cards move when slots change)."),
            Some(e) if e.passthrough.verdict == VerdictKind::NotViable => fail("preflight.hostdev", format!("{addr} cannot be passed through: {}", e.passthrough.reason))
                .fix("The Devices page shows its IOMMU group and what blocks it.")
                .terminal("vfio-assistant scan"),
            Some(e) if e.passthrough.verdict == VerdictKind::NoIommu => fail("preflight.hostdev", format!("{addr}: {}", e.passthrough.reason))
                .fix("Turn the IOMMU on: the Overview's next step says where.")
                .terminal("vfio-assistant check"),
            Some(e) if !managed && e.device.driver.as_deref() != Some("vfio-pci") => fail("preflight.hostdev", format!(
                "{addr} is on {} and the hostdev is not managed", e.device.driver.as_deref().unwrap_or("no driver")
            ))
            .fix("Set managed='yes' (libvirt then binds it to vfio-pci at start) or bind it to vfio-pci at boot.")
            .action(
                Action::Tune {
                    change: "vfio-boot".into(),
                },
                format!("sudo vfio-assistant tune apply --device {addr} --only vfio-boot"),
            ),
            Some(e) => {
                let missing: Vec<&String> = e
                    .passthrough
                    .set
                    .iter()
                    .filter(|a| !hostdev_listed(doc, a))
                    .collect();
                if missing.is_empty() {
                    Finding::new("preflight.hostdev", format!("{addr} can be passed through with what the domain lists"), Status::Pass)
                } else {
                    fail("preflight.hostdev", format!(
                        "{addr} needs its IOMMU group's other devices too: {}",
                        missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ))
                    .fix("Add them as hostdevs as well (a group goes to one VM whole), or `domain new --gpu` which adds the whole set.")
                }
            }
        };
        out.push(f.device(&addr).why("A passed-through device must exist, have its IOMMU group free for this VM, and be on vfio-pci when QEMU opens it ('group is not viable' otherwise)."));
    }
}

fn pci_address(a: &Element) -> Option<String> {
    let h = |k: &str| -> Option<u32> {
        u32::from_str_radix(a.attr(k)?.trim_start_matches("0x"), 16).ok()
    };
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        h("domain").unwrap_or(0),
        h("bus")?,
        h("slot")?,
        h("function")?
    ))
}

fn hostdev_listed(doc: &Document, addr: &str) -> bool {
    doc.root.child("devices").is_some_and(|d| {
        d.elements()
            .filter(|e| e.name == "hostdev")
            .filter_map(|h| {
                h.child("source")
                    .and_then(|s| s.child("address"))
                    .and_then(pci_address)
            })
            .any(|a| a == addr)
    })
}

fn check_schema(facts: &PreflightFacts, out: &mut Vec<Finding>) {
    let f = match &facts.schema {
        None => return,
        Some(SchemaResult::Valid) => Finding::new(
            "preflight.schema",
            "libvirt's domain schema accepts it",
            Status::Pass,
        ),
        Some(SchemaResult::Invalid(msg)) => fail(
            "preflight.schema",
            "libvirt's domain schema refuses it",
        )
        .evidence("virt-xml-validate", msg.clone())
        .fix("The message names the element; tuning the domain rewrites the parts this tool owns.")
        .terminal("vfio-assistant domain tune FILE --diff"),
        Some(SchemaResult::Unavailable(why)) => Finding::new(
            "preflight.schema",
            "The schema was not checked",
            Status::Unknown,
        )
        .evidence("virt-xml-validate", why.clone()),
    };
    out.push(f.why("libvirt refuses to define a domain its schema does not accept."));
}

fn check_caps(facts: &PreflightFacts, doc: &Document, out: &mut Vec<Finding>) {
    let Some(caps) = &facts.caps else {
        out.push(Finding::new("preflight.caps", "This host's QEMU/KVM capabilities were not read", Status::Unknown)
            .why("Without libvirt's domain capabilities the loader, TPM and Hyper-V features cannot be checked against what QEMU here gives."));
        return;
    };
    let problems = caps_problems(doc, caps);
    if problems.is_empty() {
        out.push(
            Finding::new(
                "preflight.caps",
                format!(
                    "Nothing in it that {} ({}) cannot give",
                    caps.emulator, caps.machine
                ),
                Status::Pass,
            )
            .evidence(
                "domcapabilities",
                format!("{} {}", caps.virttype, caps.machine),
            ),
        );
    }
    for p in problems {
        out.push(fail("preflight.caps", p).evidence("domcapabilities", format!("{} {}", caps.virttype, caps.machine))
            .why("QEMU cannot give what its capabilities do not list: libvirt or QEMU refuses the start."));
    }
}

fn check_trial(facts: &PreflightFacts, doc: &Document, out: &mut Vec<Finding>) {
    let why = "A stripped copy of the domain (same CPU, firmware and features; no disks, devices or network) was started on this host and watched for a moment: what starts there starts with the devices too, as far as CPU and firmware go.";
    let f = match &facts.trial {
        Trial::NotRun(reason) => Finding::new(
            "preflight.trial",
            format!("No trial start: {reason}"),
            Status::Info,
        ),
        Trial::Started { rounds } => Finding::new(
            "preflight.trial",
            if *rounds <= 1 {
                "A trial start on this host ran".to_string()
            } else {
                format!(
                    "A trial start on this host ran after {} adaptation(s)",
                    rounds - 1
                )
            },
            Status::Pass,
        ),
        Trial::Failed(causes) => {
            let mut f = fail(
                "preflight.trial",
                match causes.first() {
                    Some(c) => format!("A trial start failed: {}", c.title),
                    None => "A trial start failed, for a reason not recognised".into(),
                },
            );
            for c in causes {
                f = f.evidence("QEMU", c.evidence.clone());
            }
            f.fix(
                causes
                    .first()
                    .map(|c| c.fix.clone())
                    .unwrap_or_else(|| "Read the QEMU log: /var/log/libvirt/qemu/NAME.log.".into()),
            )
        }
    };
    out.push(f.why(why));
    if !uses_uefi(doc)
        && doc
            .root
            .child("metadata")
            .is_some_and(|m| m.elements().any(|e| e.name.ends_with("libosinfo")))
        && facts
            .learnt
            .iter()
            .any(|c| c.adapt == Some(Adaptation::Bios))
    {
        out.push(Finding::new("preflight.firmware", "This host cannot run UEFI guests: the domain boots SeaBIOS", Status::Warn)
            .why("Windows 11 setup wants UEFI with Secure Boot and TPM 2.0; under SeaBIOS it refuses. Windows 10 installs. A bare-metal host runs UEFI guests.")
            .fix("Use a bare-metal host for Windows 11, or bypass its checks at install (LabConfig BypassSecureBootCheck)."));
    }
}

/// Every check on the (adapted) domain, failures first.
pub fn check(doc: &Document, facts: &PreflightFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    check_schema(facts, &mut out);
    check_caps(facts, doc, &mut out);
    check_disk_present(doc, &mut out);
    check_files(facts, doc, &mut out);
    check_memory(doc, facts.snap, &mut out);
    check_networks(facts, doc, &mut out);
    check_hostdevs(facts, doc, &mut out);
    check_trial(facts, doc, &mut out);
    if (smm_on(doc) || loader_is_secure(doc))
        && facts
            .learnt
            .iter()
            .any(|c| c.adapt == Some(Adaptation::SmmOff))
    {
        out.push(
            fail("preflight.smm", "SMM is on, but this host's KVM has no SMM")
                .fix("Turn SMM off (the preflight's adaptation does)."),
        );
    }
    out.sort_by_key(|f| f.status);
    out
}

/// Whether anything stops the start.
pub fn blocks_start(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.status == Status::Fail)
}

#[cfg(test)]
mod tests;
