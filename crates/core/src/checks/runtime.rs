//! CPU, memory and runtime checks: governor, THP, hugepages, fragmentation, KSM,
//! clocksource, isolation consistency and IRQ affinity, split-lock mitigation,
//! KVM MSR handling, device nodes, cgroups, libvirt, OVMF and swtpm.

use super::model::{Finding, Status};
use crate::host::HostSnapshot;
use crate::parse::cpulist::{format_cpulist, parse_cpulist};
use crate::parse::interrupts::{VfioIrq, VfioIrqMode};
use crate::sysroot::HostPath;
use crate::units::human_kib;
use std::collections::BTreeSet;

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "runtime",
    ids: &[
        super::CheckId("cpu.governor"),
        super::CheckId("mem.thp"),
        super::CheckId("mem.hugepages"),
        super::CheckId("mem.fragmentation"),
        super::CheckId("mem.ksm"),
        super::CheckId("time.clocksource"),
        super::CheckId("cpu.isolation"),
        super::CheckId("cpu.irq_affinity"),
        super::CheckId("cpu.split_lock"),
        super::CheckId("dev.vhost_net"),
        super::CheckId("dev.tun"),
        super::CheckId("cgroup.controllers"),
        super::CheckId("libvirt.running"),
        super::CheckId("libvirt.hooks"),
        super::CheckId("firmware.ovmf"),
        super::CheckId("tpm.swtpm"),
        super::CheckId("irq.vfio_mode"),
        super::CheckId("kvm.ignore_msrs"),
    ],
    run: Some(|s, _, out| check(s, out)),
};

pub fn check(s: &HostSnapshot, out: &mut Vec<Finding>) {
    governor(s, out);
    memory(s, out);
    isolation(s, out);
    misc(s, out);
}

fn governor(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let govs: BTreeSet<&str> = s
        .topology
        .cpus
        .iter()
        .filter_map(|c| c.governor.as_deref())
        .collect();
    if govs.is_empty() {
        return;
    }
    let not_perf: Vec<u32> = s
        .topology
        .cpus
        .iter()
        .filter(|c| c.governor.as_deref().is_some_and(|g| g != "performance"))
        .map(|c| c.id)
        .collect();
    let mut f = Finding::new("cpu.governor", "CPU frequency governor", Status::Pass)
        .evidence(HostPath::sys("devices/system/cpu/cpufreq/policy*/scaling_governor").to_string(), govs.iter().copied().collect::<Vec<_>>().join(", "))
        .why("A power-saving governor lets cores clock down between frames; the VM then waits for them to ramp up again, which shows as stutter and audio crackle.");
    if not_perf.is_empty() {
        f.title = "All CPUs use the performance governor".into();
    } else {
        f.status = Status::Warn;
        f.title = format!(
            "{} CPU(s) are not on the performance governor",
            not_perf.len()
        );
        f = f.fix(format!(
            "While gaming: `cpupower frequency-set -g performance` (or echo performance > /sys/devices/system/cpu/cpufreq/policy*/scaling_governor); CPUs {}.",
            format_cpulist(&not_perf)
        ));
    }
    out.push(f);
}

fn memory(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let thp_path = HostPath::sys("kernel/mm/transparent_hugepage/enabled").to_string();
    if let Some(thp) = &s.kernel.thp_enabled {
        let mut f = Finding::new("mem.thp", format!("Transparent hugepages: {thp}"), Status::Pass)
            .evidence(&thp_path, thp.clone())
            .why("With THP 'always', starting a VM with a passed-through device makes the kernel compact memory to pin all guest RAM in huge pages; on a fragmented host the VM sits 'paused' for minutes (20+ minutes reported).");
        if thp == "always" {
            f.status = Status::Warn;
            f = f.fix("Set it to madvise: echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (persist with transparent_hugepage=madvise on the kernel command line), and back the VM with reserved hugepages.");
        }
        out.push(f);
    }
    let pools: Vec<String> = s
        .kernel
        .hugepages
        .iter()
        .map(|p| {
            format!(
                "{}: {} reserved, {} free",
                human_kib(p.size_kib),
                p.total,
                p.free
            )
        })
        .collect();
    let reserved = s.kernel.hugepages.iter().any(|p| p.total > 0);
    let mut hp = Finding::new("mem.hugepages", if reserved { "Hugepages are reserved" } else { "No hugepages reserved" }, if reserved { Status::Pass } else { Status::Info })
        .evidence(HostPath::sys("kernel/mm/hugepages").to_string(), if pools.is_empty() { "no pools".to_string() } else { pools.join("; ") })
        .why("Backing the VM with hugepages (2 MiB, or 1 GiB where the CPU has pdpe1gb) cuts TLB misses and makes the start fast and predictable; reserve them per NUMA node, on the node of the VM's CPUs.");
    for n in &s.topology.numa_nodes {
        for p in &n.hugepages {
            hp = hp.evidence(
                HostPath::sys(&format!("devices/system/node/node{}/hugepages", n.id)).to_string(),
                format!(
                    "{}: {} reserved, {} free",
                    human_kib(p.size_kib),
                    p.total,
                    p.free
                ),
            );
        }
    }
    if !reserved {
        hp = hp.fix("For a 16 GiB VM: echo 8192 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages before it starts (or hugepages=8192 on the kernel command line), and <memoryBacking><hugepages/></memoryBacking> in the domain.");
    }
    out.push(hp);

    // Fragmentation: free memory in blocks of 2 MiB and larger (order >= 9).
    let normal: Vec<_> = s
        .system
        .buddyinfo
        .iter()
        .filter(|z| z.zone == "Normal")
        .collect();
    if !normal.is_empty() {
        // In floating point: counts and orders come from a file, and a
        // hostile one must neither overflow (nor shift past 64 bits) nor,
        // saturated, give a wrong share.
        let kib_at = |min_order: usize| -> f64 {
            normal
                .iter()
                .flat_map(|z| {
                    z.free_blocks
                        .iter()
                        .enumerate()
                        .skip(min_order)
                        .map(|(o, n)| {
                            let order = i32::try_from(o).unwrap_or(i32::MAX);
                            *n as f64 * 4.0 * 2f64.powi(order)
                        })
                })
                .sum()
        };
        let (total_kib, large_kib) = (kib_at(0), kib_at(9));
        let share = if total_kib > 0.0 {
            (large_kib / total_kib * 100.0) as u64
        } else {
            0
        };
        // `as` saturates: a float past u64 is u64::MAX.
        let (total, large) = (total_kib as u64, large_kib as u64);
        let mut f = Finding::new("mem.fragmentation", format!("{} of {} free memory is in 2 MiB+ blocks ({share}%)", human_kib(large), human_kib(total)), Status::Pass)
            .evidence(HostPath::proc("buddyinfo").to_string(), format!("{} zone(s) Normal", normal.len()))
            .why("Hugepages and pinned guest memory need large contiguous blocks; when free memory is scattered in small pieces, reserving hugepages fails or the VM start stalls in compaction.");
        if share < 50 && total > 0 {
            f.status = Status::Warn;
            f = f.fix("Reserve hugepages at boot (hugepages=N on the command line), or before starting the VM run: sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory.");
        }
        out.push(f);
    }
    if let Some(run) = s.system.ksm_run {
        let mut f = Finding::new("mem.ksm", if run == 1 { "KSM is merging pages" } else { "KSM is off" }, if run == 1 { Status::Warn } else { Status::Pass })
            .evidence(HostPath::sys("kernel/mm/ksm/run").to_string(), run.to_string())
            .why("KSM scans memory to merge identical pages: it costs host CPU, adds latency when a merged page is written, and is a side channel between VMs. A gaming VM with a passed-through GPU has all its memory pinned anyway.");
        if run == 1 {
            f = f.fix("echo 0 > /sys/kernel/mm/ksm/run (and disable ksmtuned if installed).");
        }
        out.push(f);
    }
    if let Some(cs) = &s.kernel.clocksource {
        let mut f = Finding::new("time.clocksource", format!("Clocksource: {cs}"), if cs == "tsc" { Status::Pass } else { Status::Warn })
            .evidence(HostPath::sys("devices/system/clocksource/clocksource0/current_clocksource").to_string(), cs.clone())
            .why("The host reads the time constantly while running a VM; tsc is a CPU instruction, hpet and acpi_pm are slow I/O reads that show up as latency.");
        if cs != "tsc" {
            f = f.fix("If the kernel log says the TSC was marked unstable, check the firmware for power-saving options affecting it; tsc=reliable on the command line forces it (only on hardware with an invariant TSC).");
        }
        out.push(f);
    }
}

fn isolation(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let cl = s.kernel.cmdline.as_ref();
    let list = |key: &str| -> Option<BTreeSet<u32>> {
        let v = cl?.value(key)?;
        // isolcpus takes flags before the list: isolcpus=managed_irq,domain,2-7
        let cpus = v
            .split(',')
            .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
            .collect::<Vec<_>>()
            .join(",");
        parse_cpulist(&cpus).ok()
    };
    let isolcpus = list("isolcpus");
    let nohz = list("nohz_full");
    let rcu = list("rcu_nocbs");
    let cmdline = super::cmdline::path();
    if cl.is_none() {
        out.push(
            Finding::new("cpu.isolation", "Cannot tell whether CPUs are isolated: the kernel command line was not read", Status::Unknown)
                .evidence(&cmdline, super::cmdline::seen(s))
                .why("isolcpus, nohz_full and rcu_nocbs are kernel command line parameters: without the line there is nothing to check them on.")
                .fix(super::cmdline::read_it())
                .terminal(super::cmdline::SNAPSHOT),
        );
        return;
    }
    if isolcpus.is_none() && nohz.is_none() && rcu.is_none() {
        out.push(
            Finding::new("cpu.isolation", "No CPUs are isolated for the VM", Status::Info)
                .evidence(&cmdline, "no isolcpus, nohz_full or rcu_nocbs")
                .why("Isolating the VM's cores keeps host tasks, timer ticks and RCU work off them: the biggest help against DPC latency spikes, at the cost of those cores for the host. Dynamic isolation at VM start (systemd AllowedCPUs) is the flexible alternative.")
                .fix("Use the CPU page's pinning plan to choose the cores; the matching kernel parameters come with it."),
        );
        return;
    }
    let show = |x: &Option<BTreeSet<u32>>| {
        x.as_ref()
            .map(format_cpulist)
            .unwrap_or_else(|| "not set".into())
    };
    let mut f = Finding::new("cpu.isolation", "isolcpus, nohz_full and rcu_nocbs agree", Status::Pass)
        .evidence(&cmdline, format!("isolcpus={} nohz_full={} rcu_nocbs={}", show(&isolcpus), show(&nohz), show(&rcu)))
        .why("The three parameters should name the same CPUs: nohz_full without isolcpus still lets the scheduler place host tasks there, and CPUs missing from rcu_nocbs keep RCU callbacks (latency spikes).");
    let mut problems = Vec::new();
    if let (Some(n), Some(i)) = (&nohz, &isolcpus)
        && n != i
    {
        problems.push("nohz_full and isolcpus name different CPUs".to_string());
    }
    if let (Some(n), Some(r)) = (&nohz, &rcu)
        && !n.is_subset(r)
    {
        problems.push("some nohz_full CPUs are missing from rcu_nocbs".to_string());
    }
    if nohz.is_some() && isolcpus.is_none() {
        problems.push("nohz_full without isolcpus".to_string());
    }
    if let Some(i) = &isolcpus
        && i.contains(&0)
    {
        problems.push("CPU 0 is isolated; the host needs it for housekeeping".to_string());
    }
    if !problems.is_empty() {
        f.status = Status::Warn;
        f.title = "Isolation parameters are inconsistent".into();
        f = f.fix(format!(
            "Make isolcpus, nohz_full and rcu_nocbs name the same VM cores, never CPU 0: {}.",
            problems.join("; ")
        ));
    }
    out.push(f);

    // IRQs allowed onto isolated CPUs.
    let isolated: BTreeSet<u32> = isolcpus.unwrap_or_default();
    if !isolated.is_empty() && !s.system.irq_affinity.is_empty() {
        let landing: Vec<String> = s
            .system
            .irq_affinity
            .iter()
            .filter(|a| !a.cpus.is_empty() && a.cpus.iter().all(|c| isolated.contains(c)))
            .map(|a| format!("{} -> {}", a.irq, format_cpulist(&a.cpus)))
            .collect();
        let mut f = Finding::new("cpu.irq_affinity", "No interrupt is steered only onto isolated CPUs", Status::Pass)
            .evidence(HostPath::proc("irq/*/smp_affinity_list").to_string(), format!("{} IRQs read", s.system.irq_affinity.len()))
            .why("An interrupt handled on a VM core stops the VM's vCPU there: audio crackle and input lag.");
        if !landing.is_empty() {
            f.status = Status::Warn;
            f.title = format!(
                "{} interrupt(s) are steered onto isolated CPUs",
                landing.len()
            );
            f = f.evidence("irq -> CPUs", landing.join("; ")).fix("Add irqaffinity=<housekeeping CPUs> to the kernel command line, or write those CPUs to /proc/irq/N/smp_affinity_list (irqbalance can undo it: ban the VM cores there).");
        }
        out.push(f);
    }
}

/// A pass as built, or a warning with its own title and the fix; unknown when
/// the root does not hold the directory at all (a partial capture).
fn present(f: Finding, ok: bool, captured: bool, missing_title: &str, fix: &str) -> Finding {
    if ok {
        f
    } else if !captured {
        Finding {
            status: Status::Unknown,
            title: format!("{}: not in this capture", f.title),
            ..f
        }
    } else {
        Finding {
            status: Status::Warn,
            title: missing_title.to_string(),
            ..f
        }
        .fix(fix)
    }
}

fn misc(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let sys = &s.system;
    if !sys.vfio_irqs.is_empty() {
        let intx: Vec<&VfioIrq> = sys
            .vfio_irqs
            .iter()
            .filter(|i| i.mode == VfioIrqMode::Intx)
            .collect();
        let mut f = Finding::new("irq.vfio_mode", "Passed-through devices use message-signalled interrupts", Status::Pass)
            .why("A device on legacy INTx shares an interrupt line and needs the host to mask and unmask it on every interrupt: more exits and latency, a classic cause of audio crackle. MSI/MSI-X go straight to the vCPU.");
        for i in &sys.vfio_irqs {
            f = f.evidence(
                HostPath::proc("interrupts").to_string(),
                format!(
                    "IRQ {}: {:?} for {} ({} so far)",
                    i.irq, i.mode, i.address, i.total
                ),
            );
        }
        if !intx.is_empty() {
            f.status = Status::Warn;
            let devs: BTreeSet<&str> = intx.iter().map(|i| i.address.as_str()).collect();
            f.title = format!("{} passed-through device(s) use legacy INTx", devs.len());
            f = f.fix("In the Windows guest switch the device (GPU and its HDMI audio) to MSI mode: the \"MSI utility v3\", or set MSISupported=1 under the device's registry key Interrupt Management\\MessageSignaledInterruptProperties, then reboot the guest.");
        }
        out.push(f);
    }
    if let Some(v) = sys.split_lock_mitigate {
        let mut f = Finding::new("cpu.split_lock", if v == 0 { "Split-lock mitigation is off" } else { "Split-lock mitigation is on (slows vCPUs that split locks)" }, if v == 0 { Status::Pass } else { Status::Warn })
            .evidence(HostPath::proc("sys/kernel/split_lock_mitigate").to_string(), v.to_string())
            .why("Some Windows games and anti-cheat drivers issue split locks; with the mitigation on, the kernel slows the offending vCPU on purpose, which shows as severe stutter.");
        if v != 0 {
            f = f.fix("sysctl kernel.split_lock_mitigate=0 (persist in /etc/sysctl.d/), or split_lock_detect=off on the kernel command line.");
        }
        out.push(f);
    }
    if let Some(ignore) = sys.kvm_ignore_msrs {
        out.push(
            Finding::new("kvm.ignore_msrs", if ignore { "KVM ignores unknown MSRs" } else { "KVM injects a fault on unknown MSRs" }, if ignore { Status::Pass } else { Status::Info })
                .evidence(HostPath::sys("module/kvm/parameters/ignore_msrs").to_string(), if ignore { "Y" } else { "N" })
                .why("Windows tools and some games read model-specific registers KVM does not emulate; by default the guest gets a fault and can blue-screen (KMODE_EXCEPTION). Ignoring them is the usual fix for Windows guests.")
                .fix_if(!ignore, "echo 'options kvm ignore_msrs=1 report_ignored_msrs=0' > /etc/modprobe.d/kvm.conf and reboot (or write Y to the parameter now)."),
        );
    }
    out.push(present(
        Finding::new("dev.vhost_net", format!("{} (fast virtio networking)", HostPath::dev("vhost-net")), Status::Pass)
            .evidence(HostPath::dev("vhost-net").to_string(), if sys.dev_vhost_net { "present" } else { "missing" })
            .why("vhost-net moves virtio network packets in the kernel instead of QEMU: lower latency and CPU use."),
        sys.dev_vhost_net,
        sys.has_dev,
        &format!("{} is missing: virtio networking runs in QEMU", HostPath::dev("vhost-net")),
        "sudo modprobe vhost_net (and add vhost_net to /etc/modules-load.d/).",
    ));
    out.push(present(
        Finding::new("dev.tun", format!("{} (VM network interfaces)", HostPath::dev("net/tun")), Status::Pass)
            .evidence(HostPath::dev("net/tun").to_string(), if sys.dev_net_tun { "present" } else { "missing" })
            .why("libvirt's NAT and bridged networks give the VM a tap device, which needs /dev/net/tun."),
        sys.dev_net_tun,
        sys.has_dev,
        &format!("{} is missing: VMs get no network interface", HostPath::dev("net/tun")),
        "sudo modprobe tun.",
    ));
    if let Some(ctrls) = &sys.cgroup_controllers {
        let needed = ["cpuset", "cpu", "memory"];
        let missing: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|c| !ctrls.iter().any(|x| x == c))
            .collect();
        out.push(present(
            Finding::new("cgroup.controllers", "cgroup v2 controllers for pinning and isolation", Status::Pass)
                .evidence(HostPath::sys("fs/cgroup/cgroup.controllers").to_string(), ctrls.join(" "))
                .why("libvirt applies CPU pinning and memory limits through the cpuset, cpu and memory controllers; dynamic isolation (AllowedCPUs) needs cpuset."),
            missing.is_empty(),
            true,
            "cgroup controllers needed for pinning are missing",
            &format!("Enable the missing controllers ({}) — check systemd's cgroup settings.", missing.join(", ")),
        ));
    }
    out.push(present(
        Finding::new("libvirt.running", "libvirt is running", Status::Pass)
            .evidence(HostPath::run("libvirt").to_string(), sys.libvirt_socket.clone().unwrap_or_else(|| "no libvirt-sock / virtqemud-sock".into()))
            .why("virt-manager, virsh and this app's domain tools talk to libvirt's daemon."),
        sys.libvirt_socket.is_some(),
        sys.has_run,
        "libvirt is not running (no daemon socket)",
        "Install and start it: sudo apt install libvirt-daemon-system qemu-system-x86 && sudo systemctl enable --now libvirtd; add yourself to the libvirt group.",
    ));
    let broken: Vec<&str> = sys
        .libvirt_hooks
        .iter()
        .filter(|h| !h.executable)
        .map(|h| h.path.as_str())
        .collect();
    if !sys.libvirt_hooks.is_empty() {
        let mut f = Finding::new("libvirt.hooks", "libvirt hook scripts are executable", if broken.is_empty() { Status::Pass } else { Status::Fail })
            .why("libvirt silently skips a hook that is not executable: GPU unbinding or CPU isolation scripts then never run.");
        for h in &sys.libvirt_hooks {
            f = f.evidence(
                h.path.clone(),
                if h.executable {
                    "executable"
                } else {
                    "NOT executable"
                },
            );
        }
        if !broken.is_empty() {
            f = f.fix(format!(
                "chmod +x {} and restart libvirtd.",
                broken.join(" ")
            ));
        }
        out.push(f);
    }
    out.push(present(
        Finding::new("firmware.ovmf", "UEFI firmware for VMs (OVMF)", Status::Pass)
            .evidence(HostPath::usr("share").to_string(), if sys.ovmf_files.is_empty() { "no OVMF_CODE file found".to_string() } else { sys.ovmf_files.join(", ") })
            .why("Modern GPUs and Windows 11 need a UEFI VM; OVMF is that firmware (with a Secure Boot variant for Windows 11)."),
        !sys.ovmf_files.is_empty(),
        sys.has_usr,
        "No UEFI firmware for VMs (OVMF) installed",
        "Install it: sudo apt install ovmf (Fedora: edk2-ovmf, Arch: edk2-ovmf).",
    ));
    out.push(present(
        Finding::new(
            "tpm.swtpm",
            "Software TPM for Windows 11 (swtpm)",
            Status::Pass,
        )
        .evidence(
            HostPath::usr("bin/swtpm").to_string(),
            if sys.swtpm { "present" } else { "missing" },
        )
        .why("Windows 11 refuses to install without a TPM 2.0; libvirt emulates one with swtpm."),
        sys.swtpm,
        sys.has_usr,
        "swtpm is not installed: no TPM for Windows 11",
        "sudo apt install swtpm swtpm-tools (Fedora/Arch: swtpm).",
    ));
}
