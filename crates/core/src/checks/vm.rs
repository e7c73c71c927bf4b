//! Checks on one libvirt domain (pure over what `monitor::probe` gathered),
//! for `doctor --domain NAME` and `check --domain`:
//! its state and QEMU's run state (QMP `query-status`), its pinning against the
//! topology, Hyper-V enlightenments, Code 43 workarounds and hostdev layout, and
//! — while it runs — one second of live data: interrupts landing on its CPUs,
//! INTx on its passed-through devices, and KVM exit rates by kind.

use super::model::{Action, Finding, Status};
use crate::domain::inspect::{
    code43_workarounds, hyperv_on, hyperv_passthrough, pci_hostdevs, pinning_of,
};
use crate::domain::xml::Document;
use crate::host::HostSnapshot;
use crate::hypervisor::DomainState;
use crate::parse::interrupts::{VfioIrqMode, parse_interrupts, vfio_irqs};
use crate::pinning::validate::{Severity, validate};
use crate::sysroot::{HostPath, HostRoot};

pub use crate::monitor::probe::{VmLive, probe_vm};

fn state_finding(v: &VmLive) -> Finding {
    let f = |status, title: String| Finding::new("vm.state", title, status);
    let qmp = match &v.qmp_status {
        Some(Ok(s)) => s.clone(),
        Some(Err(e)) => format!("(QMP: {e})"),
        None => "-".into(),
    };
    let base = match &v.state {
        Err(e) => f(Status::Unknown, format!("Could not ask libvirt about '{}'", v.name)).evidence(&v.uri, e.to_string()),
        Ok(DomainState::Paused) => f(Status::Warn, format!("'{}' is paused (QEMU: {qmp})", v.name))
            .fix("If it just started: QEMU pins all guest memory for VFIO before the guest runs; with transparent hugepages 'always' and fragmented memory that takes minutes. Reserve hugepages for the VM, or set THP to madvise. If it stays paused with QEMU 'paused', an I/O error or a full disk paused it: `virsh domstate --reason NAME` says which."),
        Ok(DomainState::Crashed) => f(Status::Fail, format!("'{}' crashed", v.name))
            .fix("See /var/log/libvirt/qemu/NAME.log for QEMU's last words."),
        Ok(DomainState::Running) => f(Status::Pass, format!("'{}' is running (QEMU: {qmp})", v.name)),
        Ok(s) => f(Status::Info, format!("'{}' is {}", v.name, s.label())),
    };
    let state = v
        .state
        .as_ref()
        .map(|s| s.label().to_string())
        .unwrap_or_default();
    base.evidence(format!("libvirt {}", v.uri), format!("state {state}"))
        .evidence("QMP query-status", qmp)
        .why("libvirt shows 'paused' both while QEMU is still setting the VM up and when something stopped it; QEMU's own run state tells which.")
}

/// The pinning of the definition (what the next start gets), judged; when
/// the running VM was started with another one, said so: the change takes
/// effect at the next start.
fn pinning_finding(
    snap: &HostSnapshot,
    name: &str,
    doc: &Document,
    live: Option<&Document>,
) -> Finding {
    let f = defined_pinning_finding(snap, name, doc);
    match live {
        Some(l) if pinning_of(l).vcpus != pinning_of(doc).vcpus => {
            let now = pinning_of(l);
            let now_text = if now.vcpus.is_empty() {
                "not pinned".to_string()
            } else {
                now.vcpus
                    .iter()
                    .map(|(v, set)| {
                        format!(
                            "{v}:{}",
                            crate::parse::cpulist::format_cpulist(
                                &set.iter().copied().collect::<Vec<_>>()
                            )
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            Finding {
                title: format!("{} — applied, takes effect at the next start", f.title),
                status: if f.status == Status::Pass {
                    Status::Info
                } else {
                    f.status
                },
                ..f
            }
            .evidence("running now (live XML)", now_text)
        }
        _ => f,
    }
}

fn defined_pinning_finding(snap: &HostSnapshot, name: &str, doc: &Document) -> Finding {
    let p = pinning_of(doc);
    let why = "A vCPU that wanders between host threads loses its cache and competes with the host; SMT pairs, L3 and NUMA kept together keep the guest's view true.";
    if p.vcpus.is_empty() {
        return Finding::new("vm.pinning", "The vCPUs are not pinned", Status::Warn)
            .evidence("domain <cputune>", "no vcpupin")
            .why(why)
            .fix("Plan a pinning for this host and write it into the domain.")
            .action(
                Action::PinDomain,
                format!("vfio-assistant domain tune --domain {name} --vcpus N --diff"),
            );
    }
    let problems = validate(&snap.topology, &p);
    let status = if problems.iter().any(|x| x.severity == Severity::Error) {
        Status::Fail
    } else if problems.is_empty() {
        Status::Pass
    } else {
        Status::Warn
    };
    let title = if problems.is_empty() {
        format!("{} vCPUs pinned along the topology", p.vcpus.len())
    } else {
        format!("The pinning has {} problem(s)", problems.len())
    };
    let mut f = Finding::new("vm.pinning", title, status).why(why);
    for (v, set) in &p.vcpus {
        f = f.evidence(
            format!("vcpupin vcpu={v}"),
            crate::parse::cpulist::format_cpulist(&set.iter().copied().collect::<Vec<_>>()),
        );
    }
    let reasons: Vec<&str> = problems.iter().map(|x| x.reason.as_str()).collect();
    f.fix_if(
        !problems.is_empty(),
        format!(
            "{} A plan for this host's topology avoids this.",
            reasons.join(" ")
        ),
    )
    .action_if(
        !problems.is_empty(),
        Action::PinDomain,
        format!("vfio-assistant domain tune --domain {name} --vcpus N --diff"),
    )
}

fn irq_finding(v: &VmLive) -> Finding {
    let why = "Every device interrupt handled on a CPU that runs a vCPU stops the guest for the handler's time: audio crackle and frame-time spikes.";
    let Some(r) = &v.rates else {
        return Finding::new(
            "vm.irq_on_vm_cpus",
            "Interrupts on the VM's CPUs: not measured",
            Status::Unknown,
        )
        .evidence("live sample", v.rates_problem.clone().unwrap_or_default())
        .why(why);
    };
    let hits: Vec<_> = r
        .sources
        .iter()
        .filter(|s| {
            !s.on_vm_cpus.is_empty() && s.is_device() && s.per_s >= 10.0 && s.vfio.is_none()
        })
        .collect();
    let mut f = Finding::new(
        "vm.irq_on_vm_cpus",
        if hits.is_empty() {
            "No busy device interrupts land on the VM's CPUs".to_string()
        } else {
            format!(
                "{} device interrupt source(s) land on the VM's CPUs",
                hits.len()
            )
        },
        if hits.is_empty() {
            Status::Pass
        } else {
            Status::Warn
        },
    )
    .why(why);
    for s in &hits {
        f = f.evidence(
            format!("{} IRQ {}", HostPath::proc("interrupts"), s.label),
            format!(
                "{:.0}/s on CPUs {:?}: {}",
                s.per_s, s.on_vm_cpus, s.description
            ),
        );
    }
    f.fix_if(!hits.is_empty(), "Keep device interrupts on the housekeeping CPUs: now through /proc/irq/N/smp_affinity_list, for good with irqaffinity=<housekeeping CPUs> at boot; and stop irqbalance from moving them back (IRQBALANCE_BANNED_CPULIST).")
        .action_if(
            !hits.is_empty(),
            Action::Tune { change: "irq-affinity".into() },
            "sudo vfio-assistant tune apply --only irq-affinity,irqbalance --cpus LIST",
        )
}

fn intx_finding(v: &VmLive, doc: &Document) -> Finding {
    let why = "Legacy INTx interrupts go through an emulated, shared line with an extra exit each time; MSI goes straight to a vCPU. A GPU or sound device on INTx in the guest is a classic cause of stutter and crackle.";
    let hostdevs: Vec<String> = pci_hostdevs(doc).into_iter().map(|h| h.host).collect();
    let rows = v
        .interrupts
        .as_deref()
        .map(|t| vfio_irqs(&parse_interrupts(t)))
        .unwrap_or_default();
    let ours: Vec<_> = rows
        .iter()
        .filter(|r| hostdevs.contains(&r.address))
        .collect();
    if ours.is_empty() {
        return Finding::new(
            "vm.intx",
            "Interrupt mode of the passed-through devices: not seen",
            Status::Unknown,
        )
        .evidence(
            HostPath::proc("interrupts").to_string(),
            "no vfio rows for this VM's devices (is it running?)",
        )
        .why(why);
    }
    let intx: Vec<_> = ours
        .iter()
        .filter(|r| r.mode == VfioIrqMode::Intx)
        .collect();
    let mut f = Finding::new(
        "vm.intx",
        if intx.is_empty() {
            "The passed-through devices use MSI/MSI-X".to_string()
        } else {
            format!("{} passed-through device(s) use legacy INTx", intx.len())
        },
        if intx.is_empty() {
            Status::Pass
        } else {
            Status::Warn
        },
    )
    .why(why);
    for r in &ours {
        f = f.evidence(
            format!("{} IRQ {}", HostPath::proc("interrupts"), r.irq),
            format!("{:?} for {}", r.mode, r.address),
        );
    }
    f.fix_if(!intx.is_empty(), "In Windows, switch the device to MSI: in the registry under the device's Interrupt Management, MessageSignaledInterruptProperties, MSISupported=1 (the 'MSI utility' does the same); the NVIDIA HDMI audio function is the usual one.")
}

fn exits_finding(v: &VmLive) -> Finding {
    let why = "Each VM exit costs the vCPU microseconds. Port and MMIO exits come from emulated devices: a Windows guest without virtio drivers, or without the Hyper-V enlightenments, exits many times more than it must.";
    let Some(r) = &v.rates else {
        return Finding::new("vm.exits", "VM exit rates: not measured", Status::Unknown)
            .evidence("live sample", v.rates_problem.clone().unwrap_or_default())
            .why(why);
    };
    let get = |n: &str| r.kvm.iter().find(|k| k.name == n).map_or(0.0, |k| k.per_s);
    if r.kvm.is_empty() {
        return Finding::new(
            "vm.exits",
            "VM exit rates: KVM gave no counters",
            Status::Unknown,
        )
        .evidence("QMP query-stats", "no vcpu stats (QEMU before 7.1?)")
        .why(why);
    }
    let exits = get("exits");
    let emulated = get("io_exits") + get("mmio_exits");
    let heavy = exits > 5000.0 && emulated > 0.3 * exits;
    let mut f = Finding::new(
        "vm.exits",
        format!("{exits:.0} VM exits/s, {emulated:.0}/s of them port/MMIO emulation"),
        if heavy { Status::Warn } else { Status::Pass },
    )
    .why(why);
    for k in r.kvm.iter().take(5) {
        f = f.evidence(
            format!("KVM {}", k.name),
            format!("{:.0}/s — {}", k.per_s, k.meaning),
        );
    }
    f.fix_if(heavy, "Install the virtio-win drivers in the guest and switch disk and network to virtio; turn on the Hyper-V enlightenments.")
        .action_if(heavy, Action::TuneDomain, format!("vfio-assistant domain tune --domain {} --diff", v.name))
}

const CORE_HV: &[&str] = &[
    "relaxed",
    "vapic",
    "spinlocks",
    "vpindex",
    "synic",
    "stimer",
];

/// The core enlightenments the domain has. One this host's KVM does not
/// offer is said as such — "not offered by this host" — and is not a cause
/// with a fix: `domain tune` cannot add what KVM lacks.
fn hyperv_finding(name: &str, doc: &Document, offered: Option<&[String]>) -> Finding {
    let why = "Windows uses the Hyper-V enlightenments to talk to the hypervisor directly instead of through emulated timers and interrupt controllers: fewer exits, steadier frame times.";
    if hyperv_passthrough(doc) {
        return Finding::new(
            "vm.hyperv",
            "Hyper-V enlightenments: passthrough (all the host has)",
            Status::Pass,
        )
        .evidence("<features><hyperv>", "mode='passthrough'")
        .why(why);
    }
    let on = hyperv_on(doc);
    let missing: Vec<&str> = CORE_HV
        .iter()
        .copied()
        .filter(|n| !on.iter().any(|o| o == n))
        .collect();
    let host_has = |n: &str| offered.is_none_or(|list| list.iter().any(|o| o == n));
    let (can_add, not_offered): (Vec<&str>, Vec<&str>) = missing.iter().partition(|n| host_has(n));
    let mut title = if missing.is_empty() {
        "The core Hyper-V enlightenments are on".to_string()
    } else if can_add.is_empty() {
        format!(
            "Hyper-V enlightenments not offered by this host: {} (its KVM does not list them, often a nested or old one)",
            not_offered.join(", ")
        )
    } else {
        format!("Hyper-V enlightenments missing: {}", can_add.join(", "))
    };
    if !can_add.is_empty() && !not_offered.is_empty() {
        title.push_str(&format!(
            "; not offered by this host: {}",
            not_offered.join(", ")
        ));
    }
    let status = if !can_add.is_empty() {
        Status::Warn
    } else if !not_offered.is_empty() {
        Status::Info
    } else {
        Status::Pass
    };
    let mut f = Finding::new("vm.hyperv", title, status)
        .evidence(
            "<features><hyperv>",
            if on.is_empty() {
                "none".to_string()
            } else {
                on.join(", ")
            },
        )
        .why(why);
    if let Some(list) = offered {
        f = f.evidence(
            "domcapabilities hyperv",
            if list.is_empty() {
                "none".to_string()
            } else {
                list.join(", ")
            },
        );
    }
    f.fix_if(
        !can_add.is_empty(),
        format!(
            "Turn on {} (this host's KVM offers them).",
            can_add.join(", ")
        ),
    )
    .action_if(
        !can_add.is_empty(),
        Action::TuneDomain,
        format!("vfio-assistant domain tune --domain {name} --diff"),
    )
}

fn code43_finding(snap: &HostSnapshot, root: &HostRoot, doc: &Document) -> Finding {
    let why = "NVIDIA drivers before 465 refused to run in a VM (Code 43) unless the hypervisor was hidden; split functions and a bad ROM also leave the card dark.";
    let hds = pci_hostdevs(doc);
    let nvidia = hds.iter().any(|h| {
        snap.device(&h.host)
            .is_some_and(|d| d.device.vendor_id.0 == 0x10de && d.device.is_gpu())
    });
    let (hidden, vendor) = code43_workarounds(doc);
    let mut problems = Vec::new();
    let mut status = Status::Pass;
    // Functions of one host card on different guest slots.
    let mut slots: std::collections::BTreeMap<&str, std::collections::BTreeSet<(u32, u32)>> =
        Default::default();
    for h in &hds {
        if let Some((b, s, _)) = h.guest {
            slots
                .entry(h.host.get(..10).unwrap_or(&h.host))
                .or_default()
                .insert((b, s));
        }
    }
    if slots.values().any(|s| s.len() > 1) {
        status = Status::Warn;
        problems.push("the functions of one card sit at different guest slots: give them one slot, function 0 with multifunction='on' (as a VM written by New VM has them)".to_string());
    }
    for h in &hds {
        if let Some(rom) = &h.rom_file {
            let missing = HostPath::from_absolute(rom).is_none_or(|p| !root.exists(&p));
            if missing {
                status = Status::Fail;
                problems.push(format!(
                    "the ROM file {rom} for {} does not exist: QEMU will not start",
                    h.host
                ));
            }
        }
    }
    if nvidia && !hidden && vendor.is_none() && status == Status::Pass {
        status = Status::Info;
        problems.push("an NVIDIA GPU without <kvm><hidden state='on'/> or a Hyper-V vendor_id: only drivers before 465 need them; add both if an old driver shows Code 43".to_string());
    }
    Finding::new(
        "vm.code43",
        if problems.is_empty() {
            "Nothing in the VM definition points to Code 43".to_string()
        } else {
            format!("The VM definition: {} thing(s) to look at", problems.len())
        },
        status,
    )
    .evidence("<features><kvm><hidden>", if hidden { "on" } else { "off" })
    .evidence(
        "<hyperv><vendor_id>",
        vendor.unwrap_or_else(|| "not set".into()),
    )
    .evidence(
        "PCI hostdevs",
        hds.iter()
            .map(|h| h.host.clone())
            .collect::<Vec<_>>()
            .join(", "),
    )
    .why(why)
    .fix_if(!problems.is_empty(), problems.join("; "))
}

/// What is in each ROM file the domain hands a device (`<rom file=…/>`);
/// a missing file is `vm.code43`'s.
fn rom_file_findings(snap: &HostSnapshot, root: &HostRoot, doc: &Document) -> Vec<Finding> {
    pci_hostdevs(doc)
        .into_iter()
        .filter_map(|h| {
            let file = h.rom_file?;
            let path = HostPath::from_absolute(&file)?;
            if !root.exists(&path) {
                return None;
            }
            let card = snap
                .device(&h.host)
                .map(|d| crate::checks::rom::Card::of(&d.device));
            let bytes = root
                .read_bytes(&path, 16 * 1024 * 1024)
                .map_err(crate::romread::RomError::Read);
            Some(crate::checks::rom::rom_finding(
                Some(&h.host),
                card,
                &file,
                &bytes,
            ))
        })
        .collect()
}

/// The findings about one domain.
pub fn vm_findings(snap: &HostSnapshot, root: &HostRoot, v: &VmLive) -> Vec<Finding> {
    let mut out = vec![state_finding(v)];
    if let Some(doc) = &v.xml {
        out.push(pinning_finding(snap, &v.name, doc, v.live_xml.as_ref()));
        out.push(hyperv_finding(&v.name, doc, v.hyperv_offered.as_deref()));
        out.push(code43_finding(snap, root, doc));
        out.extend(rom_file_findings(snap, root, doc));
        out.push(intx_finding(v, doc));
    }
    out.push(irq_finding(v));
    out.push(exits_finding(v));
    out
}

/// The ids `vm_findings` can produce (for the symptom tables).
/// This file's line in `checks::AREAS` (run with the VM's live probe:
/// `vm_findings`; `vm.last_start` comes from the domain's QEMU log, read in
/// report::findings, where a start is also explained).
pub const AREA: super::Area = super::Area {
    name: "vm",
    ids: &[
        super::CheckId("vm.state"),
        super::CheckId("vm.last_start"),
        super::CheckId("vm.pinning"),
        super::CheckId("vm.hyperv"),
        super::CheckId("vm.code43"),
        super::CheckId("vm.intx"),
        super::CheckId("vm.irq_on_vm_cpus"),
        super::CheckId("vm.exits"),
    ],
    run: None,
};
