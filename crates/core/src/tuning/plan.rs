//! The plan: from the host snapshot, the tuning facts and the user's
//! request to the list of changes — pure. Every request value is checked
//! against the host (devices that exist and can go to a VM, CPUs that are
//! online, VF counts within `sriov_totalvfs`, kernel tokens from the closed
//! set), so the privileged helper can take a request from anyone and plan
//! for itself. After a successful apply the same request plans nothing.

use super::boot::{boot_info, cmdline_change};
use super::facts::TuneFacts;
use super::model::{Change, Effect, FileChange, Manual, Plan, Request};
use super::runtime;
use super::tokens::allowed;
use super::vfio_boot::{IdsAt, vfio_boot_change};
use crate::host::HostSnapshot;
use crate::host::iommu::VerdictKind;
use crate::host::pci::full_address;
use crate::parse::cpulist::format_cpulist;
use crate::pinning::{PinRequest, plan as pin_plan};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{0}: no PCI device with this address on this host")]
    NoDevice(String),
    #[error("{0} cannot be passed through: {1}")]
    NotViable(String, String),
    #[error("CPU {0} is not an online CPU of this host (online: {1})")]
    NoCpu(u32, String),
    #[error("{0}")]
    Pinning(String),
    #[error("{0}")]
    Sriov(String),
    #[error("the kernel parameter {0:?} is not one this tool writes")]
    Token(String),
    #[error("memory of {0} MiB is more than this host has")]
    Memory(u64),
    #[error("the isolation hook: {0}")]
    Hook(String),
    #[error("{0}")]
    OnlyKeyboard(String),
    #[error("{0}")]
    User(String),
    #[error("{0} would be written by both '{1}' and '{2}' (a bug: please report it)")]
    Conflict(String, String, String),
}

/// The passthrough set of every requested device, each address once.
fn passthrough_set(snap: &HostSnapshot, req: &Request) -> Result<Vec<String>, PlanError> {
    let mut set: Vec<String> = Vec::new();
    for a in req.gpus.iter().chain(&req.devices) {
        let addr = full_address(a.trim());
        let e = snap
            .device(&addr)
            .ok_or_else(|| PlanError::NoDevice(a.clone()))?;
        if e.passthrough.verdict == VerdictKind::NotViable {
            return Err(PlanError::NotViable(addr, e.passthrough.reason.clone()));
        }
        for s in &e.passthrough.set {
            if !set.contains(s) {
                set.push(s.clone());
            }
        }
    }
    if let Some(why) = set
        .iter()
        .find_map(|a| crate::host::usb::holds_only_keyboard(&snap.system.usb, a))
    {
        return Err(PlanError::OnlyKeyboard(why));
    }
    Ok(set)
}

/// Whether the GPU at `addr`'s driver removed the firmware's framebuffer
/// from the card when it loaded (every kernel DRM driver for a PCI card
/// does, through the aperture helpers; NVIDIA's own driver only with
/// `nvidia_drm.fbdev=1`): then `initcall_blacklist=sysfb_init` is not
/// needed, and it would cost the boot console (a LUKS passphrase prompt)
/// until that driver loads.
fn evicts_boot_framebuffer(snap: &HostSnapshot, f: &TuneFacts, addr: &str) -> bool {
    const DRM: &[&str] = &[
        "amdgpu",
        "radeon",
        "i915",
        "xe",
        "nouveau",
        "bochs-drm",
        "qxl",
        "virtio-pci",
        "ast",
        "mgag200",
        "cirrus-qemu",
        "cirrus",
        "vmwgfx",
        "hibmc-drm",
    ];
    let Some(d) = snap.device(&full_address(addr.trim())) else {
        return false;
    };
    match d.device.driver.as_deref() {
        Some("nvidia") => f
            .value("/sys/module/nvidia_drm/parameters/fbdev")
            .is_some_and(|v| v.trim() == "Y"),
        Some(drv) => DRM.contains(&drv),
        None => false,
    }
}

/// Another single-GPU setup's hooks for the VM (a guide's dispatcher
/// `/etc/libvirt/hooks/qemu` running `qemu.d/VM/prepare/begin/*`): they
/// would run beside ours and stop (or start) the same things twice.
fn foreign_hooks(f: &TuneFacts, vm: &str) -> Vec<String> {
    let has = |d: &str, n: &str| f.dir(d).is_some_and(|names| names.iter().any(|x| x == n));
    let mut theirs = Vec::new();
    if has("/etc/libvirt/hooks", "qemu") {
        theirs.push("/etc/libvirt/hooks/qemu".to_string());
    }
    if has("/etc/libvirt/hooks/qemu.d", vm) {
        theirs.push(format!("/etc/libvirt/hooks/qemu.d/{vm}/"));
    }
    if theirs.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "Other hooks for '{vm}' are there ({}): a guide's single-GPU scripts would run beside this one and stop or start the display manager twice. Move them away before the first start.",
        theirs.join(", ")
    )]
}

/// Single GPU: its card goes to the VM when the VM starts (the hook) and
/// back when it stops — never at boot, which would leave the host with no
/// screen. The set bound at boot is everything else asked for (a USB
/// controller, a NIC); the IOMMU parameters still come from the whole set.
fn boot_set(snap: &HostSnapshot, req: &Request, set: &[String]) -> Result<Vec<String>, PlanError> {
    if !req.single_gpu {
        return Ok(set.to_vec());
    }
    let gpus = passthrough_set(
        snap,
        &Request {
            gpus: req.gpus.clone(),
            ..Request::default()
        },
    )?;
    Ok(set.iter().filter(|a| !gpus.contains(a)).cloned().collect())
}

/// The VM's CPUs, the host's, and the NUMA node for hugepages.
type CpuSplit = (Vec<u32>, Vec<u32>, Option<u32>);

fn cpus_of(snap: &HostSnapshot, req: &Request, set: &[String]) -> Result<CpuSplit, PlanError> {
    let online: Vec<u32> = snap.topology.online_cpus().map(|c| c.id).collect();
    if let Some(cpus) = &req.cpus {
        for c in cpus {
            if !online.contains(c) {
                return Err(PlanError::NoCpu(*c, format_cpulist(&online)));
            }
        }
        let mut vm = cpus.clone();
        vm.sort_unstable();
        vm.dedup();
        let hk: Vec<u32> = online.iter().copied().filter(|c| !vm.contains(c)).collect();
        let node = snap
            .topology
            .cpu(vm.first().copied().unwrap_or(0))
            .and_then(|c| c.numa_node);
        return Ok((vm, hk, node));
    }
    if let Some(n) = req.vcpus {
        let gpu_node = set
            .first()
            .and_then(|a| snap.device(a))
            .and_then(|e| e.device.numa_node);
        let r = PinRequest {
            vcpus: n,
            gpu_numa_node: gpu_node,
            amd: snap.cpu.vendor.as_deref() == Some("AuthenticAMD"),
            ..PinRequest::default()
        };
        let p = pin_plan(&snap.topology, &r).map_err(|e| PlanError::Pinning(e.to_string()))?;
        return Ok((
            p.vm_cpus.clone(),
            p.housekeeping_cpus.clone(),
            p.numa_nodes.first().copied(),
        ));
    }
    Ok((Vec::new(), Vec::new(), None))
}

/// The kernel parameters the request needs that `/proc/cmdline` and the
/// host do not already give.
fn tokens(
    snap: &HostSnapshot,
    f: &TuneFacts,
    req: &Request,
    set: &[String],
    vm: &[u32],
    hk: &[u32],
    manual: &mut Vec<Manual>,
) -> Vec<String> {
    let mut t = Vec::new();
    if !set.is_empty() {
        let intel = snap.cpu.vendor.as_deref() == Some("GenuineIntel");
        let table = snap.firmware.acpi_dmar || snap.firmware.acpi_ivrs;
        if !snap.iommu.active {
            if snap.firmware.acpi_tables_visible && !table {
                manual.push(Manual {
                    id: "iommu-firmware".into(),
                    title: "Turn the IOMMU on in the firmware".into(),
                    why: "The firmware offers no IOMMU table (DMAR/IVRS): no kernel parameter can help until it is switched on.".into(),
                    steps: vec![if intel {
                        "In the firmware setup: Intel VT-d: Enabled (often under Advanced > System Agent, or Chipset).".into()
                    } else {
                        "In the firmware setup: AMD CBS > NBIO > IOMMU: Enabled (and SVM Mode on).".into()
                    }],
                });
            } else if intel {
                // AMD's IOMMU is on by default when the IVRS table is there;
                // `amd_iommu=on` is not even a value the kernel takes.
                t.push("intel_iommu=on".to_string());
            }
        }
        t.push("iommu=pt".to_string());
    }
    if !vm.is_empty() && !hk.is_empty() {
        let v = format_cpulist(vm);
        // The hook keeps host tasks off them while the VM runs instead.
        if !req.isolation_hook {
            t.push(format!("isolcpus=managed_irq,domain,{v}"));
        }
        t.push(format!("nohz_full={v}"));
        t.push(format!("rcu_nocbs={v}"));
        t.push(format!("irqaffinity={}", format_cpulist(hk)));
    }
    // No card named: the host's only GPU is the one single GPU is about;
    // with several, which one is not known, so the blacklist is kept.
    let only_gpu: Vec<String> = match snap.gpus().collect::<Vec<_>>().as_slice() {
        [one] if req.gpus.is_empty() => vec![one.device.address.clone()],
        _ => Vec::new(),
    };
    let cards = if req.gpus.is_empty() {
        &only_gpu
    } else {
        &req.gpus
    };
    if req.single_gpu
        && (cards.is_empty() || !cards.iter().all(|g| evicts_boot_framebuffer(snap, f, g)))
    {
        // simpledrm/efifb on the firmware's framebuffer keeps the card's
        // memory reserved ("BAR 0: can't reserve" at the VM's start) —
        // unless the card's own driver took it over when it loaded.
        t.push("initcall_blacklist=sysfb_init".into());
    }
    if req.hugepages_1g
        && let Some(mib) = req.memory_mib
    {
        let pages = mib.div_ceil(1024);
        let free: u64 = f
            .value("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if free < pages {
            t.push("default_hugepagesz=1G".into());
            t.push("hugepagesz=1G".into());
            t.push(format!("hugepages={pages}"));
        }
    }
    t
}

/// Runtime values kept after a reboot, through tmpfiles.d: what our file
/// already keeps, with this plan's new values added (a later plan never
/// drops what an earlier one kept).
fn persist(changes: &[Change], f: &TuneFacts) -> Option<Change> {
    const PATH: &str = "/etc/tmpfiles.d/vfio-assistant.conf";
    let mut kept: Vec<(String, String)> = f
        .file(PATH)
        .unwrap_or("")
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "w").then_some(())?;
            let path = w.next()?.to_string();
            let value = w.nth(4)?.to_string();
            Some((path, value))
        })
        .collect();
    for c in changes
        .iter()
        .filter(|c| matches!(c.id.as_str(), "thp" | "ksm" | "hugepages"))
    {
        for v in c.values.iter().filter(|v| !v.action) {
            match kept.iter_mut().find(|(p, _)| *p == v.path) {
                Some(k) => k.1 = v.after.clone(),
                None => kept.push((v.path.clone(), v.after.clone())),
            }
        }
    }
    let lines: Vec<String> = kept
        .iter()
        .map(|(p, v)| format!("w {p} - - - - {v}"))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let after = format!(
        "# Written by vfio-assistant (tune): runtime values kept across reboots.\n{}\n",
        lines.join("\n")
    );
    let before = f.file(PATH).map(str::to_string);
    if before.as_deref() == Some(after.as_str()) {
        return None;
    }
    Some(Change {
        id: "persist".into(),
        title: "Keep THP, KSM and hugepages as set after a reboot (tmpfiles.d)".into(),
        why: "sysfs values are lost at reboot; systemd-tmpfiles writes them again early at every boot.".into(),
        evidence: Vec::new(),
        fixes: Vec::new(),
        effect: Effect::AfterReboot,
        files: vec![FileChange { path: PATH.into(), before, after: Some(after) }],
        values: Vec::new(),
        commands: Vec::new(),
        undo_values: Vec::new(),
        undo_commands: Vec::new(),
        verify: Vec::new(),
        notes: Vec::new(),
        ..Change::default()
    })
}

/// The change that fixes a finding, for the app's Fix buttons (the
/// finding ids each change lists in `fixes`).
pub fn change_for_finding(finding: &str) -> Option<&'static str> {
    Some(match finding {
        "mem.thp" => "thp",
        "mem.ksm" => "ksm",
        "mem.hugepages" => "hugepages",
        "cpu.governor" => "governor",
        "cpu.irq_affinity" => "irq-affinity",
        "cpu.isolation" | "iommu.passthrough_mode" | "iommu.enabled" => "cmdline",
        "device.bound" | "device.host_driver_first" | "boot.initramfs_vfio" => "vfio-boot",
        _ => return None,
    })
}

/// The change that fixes this finding now, if the tuning engine can: not
/// when its fix says something else must come first (the IOMMU's kernel
/// parameter is no help while the firmware offers no IOMMU table).
pub fn change_fixing(f: &crate::finding::Finding) -> Option<&'static str> {
    let first_something_else = f.fix.as_deref().is_some_and(|x| x.starts_with("First "));
    change_for_finding(&f.id).filter(|_| !first_something_else)
}

fn wanted(req: &Request, id: &str) -> bool {
    req.only.is_empty()
        || req
            .only
            .iter()
            .any(|o| o == id || (o == "sriov" && id.starts_with("sriov:")))
}

/// Plan the changes for `req` on this host.
pub fn plan(snap: &HostSnapshot, f: &TuneFacts, req: &Request) -> Result<Plan, PlanError> {
    let (loader, generator, boot) = boot_info(f);
    let set = passthrough_set(snap, req)?;
    let (vm, hk, node) = cpus_of(snap, req, &set)?;
    if let (Some(mib), Some(total)) = (req.memory_mib, snap.kernel.mem_total_kib)
        && mib.saturating_mul(1024) > total
    {
        return Err(PlanError::Memory(mib));
    }
    let mut manual = Vec::new();
    let mut notes = Vec::new();
    let tok = tokens(snap, f, req, &set, &vm, &hk, &mut manual);
    let mut changes = Vec::new();
    // The devices' IDs go on the kernel command line with the other
    // parameters, so that the boot entry is the one switch between the old
    // setup and the new (see vfio_boot::IdsAt); in modprobe.d only where
    // the command line is a manual step.
    let full_set = set;
    let set = boot_set(snap, req, &full_set)?;
    if req.single_gpu && set.len() < full_set.len() {
        notes.push("Single GPU: the card is handed to the VM when it starts and given back when it stops (the hook), never at boot — it is not bound to vfio-pci at boot, so the host keeps its screen.".into());
    }
    let (ids, _, _) = super::vfio_boot::ids_and_drivers(snap, &set);
    let ids_tok = (!ids.is_empty()).then(|| super::vfio_boot::ids_token(&ids));
    let mut with_ids = tok.clone();
    with_ids.extend(ids_tok.clone());
    if let Some(bad) = with_ids.iter().find(|t| !allowed(t)) {
        return Err(PlanError::Token(bad.clone()));
    }
    let mut ids_at = IdsAt::Cmdline;
    let cmdline = match (with_ids.is_empty(), f.vfio_builtin) {
        (true, _) => Ok(None),
        (false, true) => cmdline_change(f, loader, &with_ids),
        (false, false) => match cmdline_change(f, loader, &with_ids) {
            Err(_) if ids_tok.is_some() => {
                ids_at = IdsAt::Modprobe;
                if tok.is_empty() {
                    Ok(None)
                } else {
                    cmdline_change(f, loader, &tok)
                }
            }
            other => other,
        },
    };
    match vfio_boot_change(f, snap, generator, loader, &set, ids_at) {
        Ok(Some(c)) => changes.push(c),
        Ok(None) => {}
        Err(_) => notes.push("vfio-pci is built into this kernel: its device IDs go on the kernel command line (modprobe.d does not reach a built-in driver).".into()),
    }
    match cmdline {
        Ok(Some(mut c)) => {
            c.fixes.extend(
                ["iommu.enabled", "iommu.passthrough_mode", "cpu.isolation"].map(String::from),
            );
            // After the initramfs: the boot entry is switched last.
            changes.push(c);
        }
        Ok(None) => {}
        Err(m) => manual.push(m),
    }
    if let Some(c) = runtime::vfio_bind(snap, f, &set) {
        changes.push(c);
    }
    changes.extend(runtime::governor(f, &vm));
    changes.extend(runtime::thp(f));
    let systemd = f.markers.contains("/run/systemd/system");
    changes.extend(runtime::ksm(f, systemd));
    if let Some(mib) = req.memory_mib
        && !req.hugepages_1g
    {
        changes.extend(runtime::hugepages(f, mib, 2048, node));
    }
    changes.extend(runtime::irq_affinity(f, &vm, &hk));
    changes.extend(runtime::irqbalance(f, &vm, systemd));
    if req.isolation_hook {
        let name = req.vm.as_deref().map(str::trim).unwrap_or("");
        if !super::hook::valid_vm_name(name) {
            return Err(PlanError::Hook(format!(
                "{name:?} is not a VM name it takes (letters, digits and ._+- only)"
            )));
        }
        if vm.is_empty() || hk.is_empty() {
            return Err(PlanError::Hook("it needs the VM's CPUs (--vcpus N or --cpus LIST) and at least one CPU left to the host".into()));
        }
        if !systemd {
            return Err(PlanError::Hook(
                "it needs systemd (AllowedCPUs), and this host does not run it".into(),
            ));
        }
        changes.extend(super::hook::isolation_hook(f, name, &vm, &hk));
    }
    if req.single_gpu {
        let name = req.vm.as_deref().map(str::trim).unwrap_or("");
        if !super::hook::valid_vm_name(name) {
            return Err(PlanError::Hook(format!(
                "{name:?} is not a VM name it takes (letters, digits and ._+- only)"
            )));
        }
        let blacklisted = tok.iter().any(|t| t == "initcall_blacklist=sysfb_init");
        changes.extend(super::single_gpu::single_gpu_hook(f, name).map(|mut c| {
            if !blacklisted {
                c.notes.retain(|n| !n.starts_with("initcall_blacklist"));
                c.notes.push("The card's own driver takes the firmware's framebuffer over when it loads, so no initcall blacklist is added: the boot console (a disk passphrase prompt) stays.".into());
            }
            c.notes.extend(foreign_hooks(f, name));
            c.notes.push("libvirt runs hooks from /etc/libvirt/hooks/qemu.d/ since 6.5 (Debian 11, Ubuntu 22.04, Fedora 33 and newer): an older libvirt never runs this one.".into());
            c
        }));
    }
    if req.looking_glass_mib.is_some() || req.sound {
        let user = req.desktop_user.as_deref().map(str::trim).unwrap_or("");
        if !super::play::valid_user(user) || !f.is_person(user) {
            return Err(PlanError::User(format!(
                "{user:?} is not a user of this host (Looking Glass and sound are set up for the desktop's user: --user NAME)"
            )));
        }
        if let Some(mib) = req.looking_glass_mib {
            if !(16..=1024).contains(&mib) {
                return Err(PlanError::User(format!(
                    "{mib} MiB of shared memory for Looking Glass: 16 to 1024 MiB (it follows the resolution)"
                )));
            }
            if req.kvmfr {
                match super::play::kvmfr(f, user, mib) {
                    Ok(c) => changes.extend(c),
                    Err(m) => manual.push(m),
                }
            } else {
                changes.extend(super::play::looking_glass_shm(f, user));
            }
        }
        let kvmfr_used = req.kvmfr && req.looking_glass_mib.is_some() && f.kvmfr_module;
        if kvmfr_used || req.sound {
            changes.extend(super::play::qemu_conf(f, user, kvmfr_used, req.sound));
        }
    }
    for (pf, n) in &req.sriov {
        let addr = full_address(pf.trim());
        if snap.device(&addr).is_none() {
            return Err(PlanError::NoDevice(pf.clone()));
        }
        changes.extend(runtime::sriov(f, &addr, *n).map_err(PlanError::Sriov)?);
    }
    changes.retain(|c| wanted(req, &c.id) && !c.is_empty());
    changes.extend(persist(&changes, f).filter(|c| wanted(req, &c.id)));
    // One file, one change: two writing the same file from the same
    // before-state would undo each other (and undo could not tell).
    let mut seen = std::collections::BTreeMap::new();
    for c in &changes {
        for fc in &c.files {
            if let Some(other) = seen.insert(fc.path.clone(), c.id.clone()) {
                return Err(PlanError::Conflict(fc.path.clone(), other, c.id.clone()));
            }
        }
    }
    if full_set.is_empty() {
        notes.push(
            "No GPU or device was given: nothing is bound to vfio-pci (--gpu ADDRESS).".into(),
        );
    }
    if vm.is_empty() {
        notes.push("No vCPUs or CPU list was given: the governor applies to every CPU, and no CPU is isolated (--vcpus N or --cpus LIST).".into());
    }
    Ok(Plan {
        boot,
        changes,
        manual,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_filters_by_id() {
        let req = Request {
            only: vec!["thp".into(), "sriov".into()],
            ..Request::default()
        };
        assert!(wanted(&req, "thp"));
        assert!(wanted(&req, "sriov:0000:01:00.0"));
        assert!(!wanted(&req, "ksm"));
        assert!(wanted(&Request::default(), "ksm"));
    }
}
