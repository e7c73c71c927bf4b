//! The changes that take effect now, as sysfs/procfs writes with their old
//! values kept for undo: the CPU governor (and EPP) on the VM's CPUs, THP,
//! KSM, hugepages on the pin plan's NUMA node (memory compacted first),
//! IRQ affinity off the VM's CPUs with irqbalance told the same, vfio-pci
//! binding now, and SR-IOV virtual functions. Each only when the value
//! differs, so a second plan after an apply has nothing to do.

use super::command::{Cmd, Module, Unit, UnitVerb};
use super::facts::TuneFacts;
use super::model::{Change, CommandStep, Effect, FileChange, ValueChange, Verify};
use crate::finding::Evidence;
use crate::host::HostSnapshot;
use crate::parse::cpulist::{format_cpulist, parse_cpulist};

fn ev(source: &str, value: impl Into<String>) -> Evidence {
    Evidence {
        source: source.into(),
        value: value.into(),
    }
}

fn change(id: &str, title: String, why: &str, effect: Effect) -> Change {
    Change {
        id: id.into(),
        title,
        why: why.into(),
        evidence: Vec::new(),
        fixes: Vec::new(),
        effect,
        files: Vec::new(),
        values: Vec::new(),
        commands: Vec::new(),
        undo_values: Vec::new(),
        undo_commands: Vec::new(),
        verify: Vec::new(),
        notes: Vec::new(),
        ..Change::default()
    }
}

fn action(path: impl Into<String>, after: impl Into<String>) -> ValueChange {
    ValueChange {
        path: path.into(),
        before: String::new(),
        after: after.into(),
        action: true,
        may_fail: false,
    }
}

fn value(path: String, before: &str, after: &str) -> ValueChange {
    ValueChange {
        path,
        before: before.into(),
        after: after.into(),
        action: false,
        may_fail: false,
    }
}

/// The bracketed choice of a THP file (`always [madvise] never`).
fn bracketed(v: &str) -> &str {
    v.split_whitespace()
        .find(|w| w.starts_with('['))
        .map_or(v, |w| w.trim_matches(|c| c == '[' || c == ']'))
}

/// `performance` on `cpus` (all CPUs when empty), and EPP where it is there.
pub fn governor(f: &TuneFacts, cpus: &[u32]) -> Vec<Change> {
    let mut out = Vec::new();
    let mut gov = change(
        "governor",
        String::new(),
        "The 'performance' governor keeps the VM's CPUs at full clock: a vCPU that wakes on a slowed-down core loses time ramping up, which shows as frame-time spikes.",
        Effect::Now,
    );
    let mut epp = change(
        "epp",
        String::new(),
        "The energy/performance preference asks the CPU itself to favour speed on these cores (intel_pstate/amd-pstate).",
        Effect::Now,
    );
    if !f.governors_available.is_empty()
        && !f.governors_available.iter().any(|g| g == "performance")
    {
        return out;
    }
    let mut changed: Vec<u32> = Vec::new();
    for (path, cur) in &f.values {
        let Some(rest) = path.strip_prefix("/sys/devices/system/cpu/cpu") else {
            continue;
        };
        let Some((n, file)) = rest.split_once("/cpufreq/") else {
            continue;
        };
        let Ok(n) = n.parse::<u32>() else { continue };
        if !cpus.is_empty() && !cpus.contains(&n) {
            continue;
        }
        match file {
            "scaling_governor" if cur != "performance" => {
                gov.values.push(value(path.clone(), cur, "performance"));
                gov.verify.push(Verify::ValueIs {
                    path: path.clone(),
                    value: "performance".into(),
                });
                changed.push(n);
            }
            "energy_performance_preference" if cur != "performance" => {
                epp.values.push(value(path.clone(), cur, "performance"));
            }
            _ => {}
        }
    }
    for daemon in ["power-profiles-daemon", "tuned", "tlp"] {
        if f.has_tool(daemon) {
            gov.notes.push(format!("{daemon} is installed and may set the governor back: give the governor one owner (switch its profile to performance, or stop it)."));
        }
    }
    if !gov.values.is_empty() {
        changed.sort_unstable();
        gov.title = format!(
            "CPU governor 'performance' on CPUs {}",
            format_cpulist(&changed)
        );
        gov.fixes.push("cpu.governor".into());
        out.push(gov);
    }
    if !epp.values.is_empty() {
        epp.title = "Energy/performance preference 'performance' on the same CPUs".into();
        epp.notes.push("With the performance governor and hardware P-states the kernel may refuse this (EBUSY): that is recorded, not a failure.".into());
        for v in &mut epp.values {
            v.may_fail = true;
        }
        out.push(epp);
    }
    out
}

/// Transparent hugepages to `madvise` (from `always`).
pub fn thp(f: &TuneFacts) -> Option<Change> {
    let path = "/sys/kernel/mm/transparent_hugepage/enabled";
    let cur = f.value(path)?;
    let now = bracketed(cur);
    if now != "always" {
        return None;
    }
    let mut c = change(
        "thp",
        "Transparent hugepages: always -> madvise".into(),
        "With 'always' the kernel compacts memory for every process and a VM with a passed-through device can sit paused for minutes at start while its memory is pinned; 'madvise' still gives QEMU hugepages (it asks for them) without the host paying.",
        Effect::Now,
    );
    c.evidence.push(ev(path, cur));
    c.values.push(value(path.into(), now, "madvise"));
    c.verify.push(Verify::ValueIs {
        path: path.into(),
        value: "madvise".into(),
    });
    c.fixes.push("mem.thp".into());
    Some(c)
}

/// KSM off (and ksmtuned stopped when it is there).
pub fn ksm(f: &TuneFacts, systemd: bool) -> Option<Change> {
    let path = "/sys/kernel/mm/ksm/run";
    let cur = f.value(path)?;
    if cur.trim() == "0" {
        return None;
    }
    let mut c = change(
        "ksm",
        "KSM (kernel same-page merging) off".into(),
        "KSM scans guest memory for identical pages: CPU time on the host and latency in the guest, for memory a VM with a passed-through device cannot share anyway (it is pinned).",
        Effect::Now,
    );
    c.evidence.push(ev(path, cur));
    c.values.push(value(path.into(), cur.trim(), "0"));
    c.verify.push(Verify::ValueIs {
        path: path.into(),
        value: "0".into(),
    });
    if f.has_tool("ksmtuned") && systemd {
        c.commands.push(CommandStep::new(
            Cmd::Systemctl {
                verb: UnitVerb::Stop,
                unit: Unit::Ksmtuned,
            },
            "ksmtuned would turn KSM back on",
        ));
        c.undo_commands.push(CommandStep::new(
            Cmd::Systemctl {
                verb: UnitVerb::Start,
                unit: Unit::Ksmtuned,
            },
            "as it was",
        ));
    }
    c.fixes.push("mem.ksm".into());
    Some(c)
}

/// Enough hugepages of `size_kib` for `memory_mib`, on `node` when given.
pub fn hugepages(
    f: &TuneFacts,
    memory_mib: u64,
    size_kib: u64,
    node: Option<u32>,
) -> Option<Change> {
    let need = (memory_mib.saturating_mul(1024)).div_ceil(size_kib.max(1));
    let sys = format!("/sys/kernel/mm/hugepages/hugepages-{size_kib}kB");
    let free: u64 = f.value(&format!("{sys}/free_hugepages"))?.parse().ok()?;
    // The NUMA node's own pool where the kernel has one; else the system's.
    let node_pool = node.and_then(|n| {
        let p = format!(
            "/sys/devices/system/node/node{n}/hugepages/hugepages-{size_kib}kB/nr_hugepages"
        );
        let t: u64 = f.value(&p)?.parse().ok()?;
        Some((p, t, n))
    });
    let (path, total, node) = match node_pool {
        Some((p, t, n)) => (p, t, Some(n)),
        None => {
            let p = format!("{sys}/nr_hugepages");
            let t: u64 = f.value(&p)?.parse().ok()?;
            (p, t, None)
        }
    };
    // The pool must hold the host's own pages (what was there before this
    // tool reserved any: the journal knows) plus this VM's. Never from
    // free_hugepages alone: while the VM runs it uses its pages, and a
    // plan judged from what is free would reserve them all over again.
    let want = match f.hugepages_before_ours.get(&path) {
        Some(base) => base + need,
        None if free >= need || total >= need => return None,
        None => need + total.saturating_sub(free),
    };
    if total >= want {
        return None;
    }
    let size = if size_kib >= 1 << 20 {
        "1 GiB"
    } else {
        "2 MiB"
    };
    let mut c = change(
        "hugepages",
        format!(
            "{need} hugepages of {size} for {memory_mib} MiB of guest memory{}",
            node.map(|n| format!(" on NUMA node {n}"))
                .unwrap_or_default()
        ),
        "Guest memory on hugepages means fewer TLB misses and memory that is there when the VM starts; the kernel reserves them apart from normal memory. Memory is compacted first so whole pages can be found; the count is read back, since the kernel may give fewer.",
        Effect::Now,
    );
    c.evidence
        .push(ev(&format!("{sys}/free_hugepages"), free.to_string()));
    let mut compact = action("/proc/sys/vm/compact_memory", "1");
    compact.may_fail = true;
    c.values.push(compact);
    c.values
        .push(value(path.clone(), &total.to_string(), &want.to_string()));
    c.verify.push(Verify::PagesAtLeast { path, pages: want });
    c.fixes.push("mem.hugepages".into());
    Some(c)
}

/// IRQs allowed on the VM's CPUs moved to the housekeeping CPUs.
pub fn irq_affinity(f: &TuneFacts, vm_cpus: &[u32], housekeeping: &[u32]) -> Option<Change> {
    if vm_cpus.is_empty() || housekeeping.is_empty() {
        return None;
    }
    let hk = format_cpulist(housekeeping);
    let mut c = change(
        "irq-affinity",
        format!(
            "Device interrupts off the VM's CPUs {} (onto {hk})",
            format_cpulist(vm_cpus)
        ),
        "Every interrupt handled on a CPU that runs a vCPU stops the guest for the handler's time: audio crackle and frame-time spikes.",
        Effect::Now,
    );
    for (irq, aff) in &f.irq_affinity {
        let Ok(cpus) = parse_cpulist(aff) else {
            continue;
        };
        if cpus.iter().any(|c| vm_cpus.contains(c)) && *aff != hk {
            let mut v = value(format!("/proc/irq/{irq}/smp_affinity_list"), aff, &hk);
            v.may_fail = true;
            c.values.push(v);
        }
    }
    if c.values.is_empty() {
        return None;
    }
    c.notes.push("Some interrupts cannot be moved (per-CPU timers, managed IRQs): their writes fail and are recorded, not undone.".into());
    c.fixes.push("cpu.irq_affinity".into());
    Some(c)
}

/// irqbalance told to keep off the VM's CPUs (it would undo the affinity).
pub fn irqbalance(f: &TuneFacts, vm_cpus: &[u32], systemd: bool) -> Option<Change> {
    if vm_cpus.is_empty() || !f.has_tool("irqbalance") {
        return None;
    }
    let path = ["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"]
        .into_iter()
        .find(|p| f.file(p).is_some())
        .unwrap_or("/etc/default/irqbalance");
    let before = f.file(path).map(str::to_string);
    let line = format!("IRQBALANCE_BANNED_CPULIST={}", format_cpulist(vm_cpus));
    let cur = before.clone().unwrap_or_default();
    if cur.lines().any(|l| l.trim() == line) {
        return None;
    }
    let mut after: String = cur
        .lines()
        .filter(|l| !l.trim_start().starts_with("IRQBALANCE_BANNED_CPULIST="))
        .map(|l| format!("{l}\n"))
        .collect();
    after.push_str("# vfio-assistant: keep device interrupts off the VM's CPUs\n");
    after.push_str(&line);
    after.push('\n');
    let mut c = change(
        "irqbalance",
        format!("irqbalance keeps off CPUs {}", format_cpulist(vm_cpus)),
        "irqbalance moves interrupts around every few seconds and would put them back on the VM's CPUs; its banned list keeps it off them. (Setting it turns off its own automatic banning of isolcpus/nohz_full CPUs, so the VM's CPUs are named here.)",
        Effect::Now,
    );
    c.files.push(FileChange {
        path: path.into(),
        before,
        after: Some(after),
    });
    if systemd {
        c.commands.push(CommandStep::new(
            Cmd::Systemctl {
                verb: UnitVerb::TryRestart,
                unit: Unit::Irqbalance,
            },
            "irqbalance reads the list at start",
        ));
        c.undo_commands = c.commands.clone();
    }
    Some(c)
}

/// The VM's devices bound to vfio-pci now (driver_override, unbind, probe).
pub fn vfio_bind(snap: &HostSnapshot, f: &TuneFacts, set: &[String]) -> Option<Change> {
    let mut c = change(
        "vfio-bind",
        String::new(),
        "Bound now, the devices can go to the VM without a reboot; the override keeps the host driver from taking them back until it is cleared (undo).",
        Effect::Now,
    );
    let mut names = Vec::new();
    for a in set {
        let Some(e) = snap.device(a) else { continue };
        let d = &e.device;
        if d.driver.as_deref() == Some("vfio-pci") {
            continue;
        }
        if d.boot_vga == Some(true) && d.driver.is_some() {
            c.notes.push(format!("{a} shows the host's boot screen and is on {}: unbinding it now would take the desktop away; it is bound at boot instead (vfio-boot).", d.driver.as_deref().unwrap_or("")));
            continue;
        }
        let dev = format!("/sys/bus/pci/devices/{a}");
        let cur = f
            .value(&format!("{dev}/driver_override"))
            .unwrap_or("(null)");
        c.values
            .push(value(format!("{dev}/driver_override"), cur, "vfio-pci"));
        if let Some(drv) = &d.driver {
            c.values.push(action(
                format!("/sys/bus/pci/drivers/{drv}/unbind"),
                a.clone(),
            ));
        }
        c.values
            .push(action("/sys/bus/pci/drivers_probe", a.clone()));
        // Undo: the override cleared (restored), then off vfio-pci and probed
        // again, so the host driver takes it back.
        c.undo_values
            .push(action("/sys/bus/pci/drivers/vfio-pci/unbind", a.clone()));
        c.undo_values
            .push(action("/sys/bus/pci/drivers_probe", a.clone()));
        c.verify.push(Verify::DriverIs {
            device: a.clone(),
            driver: "vfio-pci".into(),
        });
        names.push(a.clone());
    }
    if names.is_empty() {
        return None;
    }
    // The driver must be there to take them: driver_override and
    // drivers_probe bind nothing while vfio-pci is not loaded.
    c.prepare.push(CommandStep::new(
        Cmd::Modprobe {
            module: Module::VfioPci,
        },
        "loads vfio-pci, so that the probe hands the devices to it",
    ));
    c.title = format!("Bind {} to vfio-pci now", names.join(", "));
    c.fixes.push("device.bound".into());
    Some(c)
}

/// SR-IOV: `n` virtual functions on `pf` (through 0 when it has others).
pub fn sriov(f: &TuneFacts, pf: &str, n: u32) -> Result<Option<Change>, String> {
    let dev = format!("/sys/bus/pci/devices/{pf}");
    let total: u32 = f
        .value(&format!("{dev}/sriov_totalvfs"))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{pf} has no SR-IOV (no sriov_totalvfs)"))?;
    if n > total {
        return Err(format!(
            "{pf} offers at most {total} virtual functions, {n} asked"
        ));
    }
    let path = format!("{dev}/sriov_numvfs");
    let cur: u32 = f.value(&path).and_then(|v| v.parse().ok()).unwrap_or(0);
    if cur == n {
        return Ok(None);
    }
    let mut c = change(
        &format!("sriov:{pf}"),
        format!("{n} SR-IOV virtual functions on {pf} (now {cur})"),
        "Each virtual function is a slice of the card with its own PCI address, which a VM can get whole: the NIC's hardware without a host bridge in the path.",
        Effect::Now,
    );
    // The kernel takes a new count only from 0: there and back through 0,
    // as actions (a plain restore of the old count would be refused).
    if cur != 0 && n != 0 {
        c.values.push(action(path.clone(), "0"));
    }
    c.values.push(ValueChange {
        before: cur.to_string(),
        ..action(path.clone(), n.to_string())
    });
    if n != 0 {
        c.undo_values.push(action(path.clone(), "0"));
    }
    if cur != 0 {
        c.undo_values.push(action(path.clone(), cur.to_string()));
    }
    c.verify.push(Verify::ValueIs {
        path,
        value: n.to_string(),
    });
    Ok(Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(values: &[(&str, &str)]) -> TuneFacts {
        TuneFacts {
            values: values
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..TuneFacts::default()
        }
    }

    #[test]
    fn each_knob_only_when_it_differs() {
        let f = facts(&[
            (
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "[always] madvise never",
            ),
            ("/sys/kernel/mm/ksm/run", "1"),
            (
                "/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
                "powersave",
            ),
            (
                "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
                "performance",
            ),
            (
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "powersave",
            ),
        ]);
        let t = thp(&f).unwrap();
        assert_eq!(t.values[0].before, "always");
        assert_eq!(t.values[0].after, "madvise");
        assert!(ksm(&f, true).is_some());
        let g = governor(&f, &[2, 3]);
        assert_eq!(g.len(), 1);
        assert_eq!(
            g[0].values.len(),
            1,
            "only CPU 2 of the VM's: {:?}",
            g[0].values
        );
        let done = facts(&[
            (
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "always [madvise] never",
            ),
            ("/sys/kernel/mm/ksm/run", "0"),
        ]);
        assert!(thp(&done).is_none() && ksm(&done, true).is_none());
    }

    #[test]
    fn hugepages_add_what_is_missing() {
        let f = facts(&[
            (
                "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
                "100",
            ),
            (
                "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                "100",
            ),
        ]);
        let c = hugepages(&f, 1024, 2048, None).unwrap();
        assert_eq!(c.values[1].after, "512", "{:?}", c.values);
        assert!(c.values[0].action);
        let enough = facts(&[
            (
                "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
                "512",
            ),
            (
                "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                "512",
            ),
        ]);
        assert!(hugepages(&enough, 1024, 2048, None).is_none());
        // The VM runs and uses every page this tool reserved for it (free
        // 0): the journal says the host had none of its own, so nothing.
        let mut running = facts(&[
            (
                "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
                "0",
            ),
            (
                "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                "512",
            ),
        ]);
        running.hugepages_before_ours.insert(
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages".into(),
            0,
        );
        assert!(hugepages(&running, 1024, 2048, None).is_none());
        // The host had 100 of its own before: those stay, the VM's come on top.
        running.hugepages_before_ours.insert(
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages".into(),
            100,
        );
        let c = hugepages(&running, 1024, 2048, None).unwrap();
        assert_eq!(c.values[1].after, "612");
    }

    #[test]
    fn sriov_counts_go_through_zero_and_stay_in_range() {
        let f = facts(&[
            ("/sys/bus/pci/devices/0000:01:00.0/sriov_totalvfs", "8"),
            ("/sys/bus/pci/devices/0000:01:00.0/sriov_numvfs", "2"),
        ]);
        let c = sriov(&f, "0000:01:00.0", 4).unwrap().unwrap();
        assert_eq!(c.values.len(), 2);
        assert_eq!(c.values[0].after, "0");
        assert!(sriov(&f, "0000:01:00.0", 9).is_err());
        assert!(sriov(&f, "0000:01:00.0", 2).unwrap().is_none());
        assert!(sriov(&f, "0000:02:00.0", 1).is_err());
    }
}
