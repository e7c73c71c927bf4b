//! The human report of `scan`: the host in words, devices grouped by IOMMU group
//! (like ls-iommu, with names, drivers, badges and verdicts) and the topology as
//! a compact tree.

use crate::host::iommu::VerdictKind;
use crate::host::topology::Topology;
use crate::host::{HostSnapshot, PciEntry};
use crate::parse::cpulist::format_cpulist;
use std::fmt::Write;

pub use crate::report::text::{badges, human_kib, topology_counts, verdict_tag};

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// One line per device, lspci style with our additions.
fn device_line(e: &PciEntry) -> String {
    let d = &e.device;
    let mut line = format!(
        "{}  {}: {} [{}:{}]",
        d.address.strip_prefix("0000:").unwrap_or(&d.address),
        d.kind_name(),
        d.display_name(),
        d.vendor_id,
        d.device_id
    );
    let _ = write!(line, "  driver: {}", d.driver.as_deref().unwrap_or("none"));
    let b = badges(e);
    if !b.is_empty() {
        let _ = write!(line, "  [{}]", b.join("] ["));
    }
    line
}

pub fn render_report(s: &HostSnapshot, verbose: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "VFIO Assistant host report ({})",
        if s.root == "/" {
            "this machine".to_string()
        } else {
            s.root.clone()
        }
    );
    let _ = writeln!(o);
    overview(&mut o, s);
    let _ = writeln!(o);
    topology_tree(&mut o, &s.topology);
    let _ = writeln!(o);
    groups(&mut o, s);
    if !s.warnings.is_empty() {
        let _ = writeln!(o);
        if verbose {
            let _ = writeln!(o, "Could not read ({}):", s.warnings.len());
            for w in &s.warnings {
                let _ = writeln!(o, "  {}: {}", w.path, w.message);
            }
        } else {
            let _ = writeln!(
                o,
                "{} file(s) could not be read or had odd values; `scan --verbose` lists them. The rest of the report stands.",
                s.warnings.len()
            );
        }
    }
    o
}

fn overview(o: &mut String, s: &HostSnapshot) {
    let c = &s.cpu;
    let _ = writeln!(
        o,
        "CPU:        {} ({})",
        c.model_name.as_deref().unwrap_or("unknown model"),
        c.vendor.as_deref().unwrap_or("unknown vendor")
    );
    let virt = match c.virtualization() {
        Some(v) => format!("{v} supported by the CPU"),
        None if c.hypervisor => {
            "no vmx/svm flag: this is itself a VM without nested virtualization".into()
        }
        None => "no vmx/svm flag: VT-x/AMD-V is missing or disabled in the firmware".into(),
    };
    let _ = writeln!(
        o,
        "            {virt}; /dev/kvm {}; 1 GiB pages: {}",
        if s.firmware.dev_kvm {
            "present"
        } else {
            "missing"
        },
        yes_no(c.pdpe1gb)
    );
    let iommu = if s.iommu.active {
        format!("active, {} groups", s.iommu.groups)
    } else {
        let fw = if s.firmware.acpi_dmar || s.firmware.acpi_ivrs {
            "the firmware announces one (ACPI DMAR/IVRS) but the kernel did not turn it on: check intel_iommu=on / amd_iommu settings"
        } else if !s.firmware.acpi_tables_visible {
            "no IOMMU groups exist; the firmware tables could not be read"
        } else {
            "the firmware announces none (no ACPI DMAR/IVRS table): enable VT-d or AMD-Vi/IOMMU in the BIOS"
        };
        format!("not active: no device can be passed through yet ({fw})")
    };
    let _ = writeln!(o, "IOMMU:      {iommu}");
    let _ = writeln!(
        o,
        "Firmware:   {} boot; ACPI DMAR (Intel VT-d): {}; ACPI IVRS (AMD-Vi): {}",
        if s.firmware.efi_boot {
            "UEFI"
        } else {
            "legacy BIOS (or unknown)"
        },
        yes_no(s.firmware.acpi_dmar),
        yes_no(s.firmware.acpi_ivrs)
    );
    let k = &s.kernel;
    let _ = writeln!(
        o,
        "Kernel:     {}",
        k.release.as_deref().unwrap_or("unknown release")
    );
    if let Some(cl) = &k.cmdline {
        let _ = writeln!(o, "            cmdline: {}", cl.raw);
    }
    let vfio: Vec<&str> = [
        "vfio",
        "vfio_pci",
        "vfio_iommu_type1",
        "kvm",
        "kvm_intel",
        "kvm_amd",
    ]
    .into_iter()
    .filter(|m| k.has_module(m) == Some(true))
    .collect();
    let _ = writeln!(
        o,
        "            modules: {}",
        match &k.modules {
            Some(_) if vfio.is_empty() => "none of vfio/kvm loaded (or built in)".to_string(),
            Some(_) => vfio.join(", "),
            None => "unknown".to_string(),
        }
    );
    let pools: Vec<String> = k
        .hugepages
        .iter()
        .map(|p| format!("{} {}/{} free", human_kib(p.size_kib), p.free, p.total))
        .collect();
    let _ = writeln!(
        o,
        "            THP: {} (defrag {}); hugepages: {}; clocksource: {}",
        k.thp_enabled.as_deref().unwrap_or("?"),
        k.thp_defrag.as_deref().unwrap_or("?"),
        if pools.is_empty() {
            "none".to_string()
        } else {
            pools.join(", ")
        },
        k.clocksource.as_deref().unwrap_or("?")
    );
    let gpus: Vec<&PciEntry> = s.gpus().collect();
    let _ = writeln!(
        o,
        "Devices:    {} PCI functions, {} GPU(s)",
        s.pci_devices.len(),
        gpus.len()
    );
}

/// "1 package(s), 1 NUMA node(s), 2 L3 group(s), 6 cores, 12 CPUs online, SMT 2
/// threads/core", joined with `sep`; the report and the CPU page share it.
/// Package > NUMA node > L3 group > cores (siblings in brackets).
pub fn topology_tree(o: &mut String, t: &Topology) {
    let sm = &t.summary;
    let _ = writeln!(o, "Topology:   {}", topology_counts(sm, ", "));
    if !t.core_kinds.is_empty() {
        let kinds: Vec<String> = t
            .core_kinds
            .iter()
            .rev()
            .map(|k| format!("{} {} (CPUs {})", k.cores, k.name, format_cpulist(&k.cpus)))
            .collect();
        let _ = writeln!(o, "            hybrid: {}", kinds.join(", "));
    }
    if !t.isolated.is_empty() || !t.nohz_full.is_empty() {
        let _ = writeln!(
            o,
            "            isolated: {}; nohz_full: {}",
            or_none(&t.isolated),
            or_none(&t.nohz_full)
        );
    }
    let offline: Vec<u32> = t.cpus.iter().filter(|c| !c.online).map(|c| c.id).collect();
    if !offline.is_empty() {
        let _ = writeln!(o, "            offline CPUs: {}", format_cpulist(&offline));
    }
    for pkg in t.layout() {
        let _ = writeln!(o, "  Package {}", pkg.package_id);
        for n in &pkg.nodes {
            let node = n.numa_node;
            let mem = node
                .and_then(|n| t.numa_nodes.iter().find(|x| x.id == n))
                .and_then(|n| n.memory_kib)
                .map(|m| format!(" ({})", human_kib(m)))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "    NUMA node {}{mem}",
                node.map(|n| n.to_string())
                    .unwrap_or_else(|| "? (its node is offline or unknown)".into())
            );
            for group in &n.l3s {
                let (l3, cores) = (group.l3_group, &group.cores);
                let size = l3
                    .and_then(|i| t.l3_groups.get(i))
                    .and_then(|g| g.size_kib)
                    .map(|s| format!(" {}", human_kib(s)))
                    .unwrap_or_default();
                let label = match l3 {
                    Some(i) => format!("L3 #{i}{size}"),
                    None => "no L3".to_string(),
                };
                let cores_txt: Vec<String> = cores
                    .iter()
                    .filter_map(|i| t.cores.get(*i))
                    .map(|c| {
                        let mut s = format!("[{}]", format_cpulist(&c.cpus));
                        if let Some(k) = c.kind.and_then(|k| t.core_kinds.get(k)) {
                            s.push_str(k.short());
                        }
                        s
                    })
                    .collect();
                let _ = writeln!(
                    o,
                    "      {label}: {} cores {}",
                    cores.len(),
                    cores_txt.join(" ")
                );
            }
        }
    }
}

fn or_none(v: &[u32]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        format_cpulist(v)
    }
}

fn groups(o: &mut String, s: &HostSnapshot) {
    if !s.iommu.active {
        let _ = writeln!(
            o,
            "PCI devices (no IOMMU groups on this host, so none can be passed through yet):"
        );
        for e in &s.pci_devices {
            let _ = writeln!(o, "  {}", device_line(e));
        }
        return;
    }
    let _ = writeln!(o, "IOMMU groups:");
    let mut bridge_only = Vec::new();
    for g in &s.iommu_groups {
        let only_bridges = g.devices.iter().all(|a| {
            s.device(a)
                .is_some_and(|e| e.device.is_host_bridge() || e.device.is_pci_bridge())
        });
        if only_bridges {
            bridge_only.push(g.id);
            continue;
        }
        let _ = writeln!(o, "  Group {}", g.id);
        let mut explained: Vec<Vec<String>> = Vec::new();
        for a in &g.devices {
            match s.device(a) {
                Some(e) => {
                    let _ = writeln!(o, "    {}", device_line(e));
                    let d = &e.device;
                    if !d.host_usage.is_empty() {
                        let _ = writeln!(o, "        host uses: {}", d.host_usage.summary());
                    }
                    if d.is_host_bridge() || d.is_pci_bridge() {
                        continue;
                    }
                    // One explanation per passthrough set: members of the same set share it.
                    let mut set = e.passthrough.set.clone();
                    set.sort();
                    if explained.contains(&set) {
                        continue;
                    }
                    if d.is_gpu() || e.passthrough.verdict != VerdictKind::ViableAlone {
                        let _ = writeln!(
                            o,
                            "        -> [{}] {}",
                            verdict_tag(e.passthrough.verdict),
                            e.passthrough.reason
                        );
                        for n in &e.passthrough.notes {
                            let _ = writeln!(o, "           note: {n}");
                        }
                        explained.push(set);
                    }
                }
                None => {
                    let _ = writeln!(
                        o,
                        "    {a}  (listed in the group, missing from the PCI bus)"
                    );
                }
            }
        }
    }
    if !bridge_only.is_empty() {
        let ids: Vec<u32> = bridge_only;
        let _ = writeln!(
            o,
            "  {} group(s) hold only host or PCI bridges, which stay with the host: {}",
            ids.len(),
            format_cpulist(&ids)
        );
    }
    let ungrouped: Vec<&PciEntry> = s
        .pci_devices
        .iter()
        .filter(|e| e.device.iommu_group.is_none())
        .collect();
    if !ungrouped.is_empty() {
        let _ = writeln!(o, "  Not in any group:");
        for e in ungrouped {
            let _ = writeln!(o, "    {}", device_line(e));
        }
    }
}
