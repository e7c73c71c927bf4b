//! `vfio-assistant pin --vcpus N [--reserve CPUS] [--gpu ADDRESS] [--fifo] [--json | --xml]`.
//! A request the host cannot hold says how many vCPUs fit and what
//! `--reserve` would free.

use super::out::{out, outln};
use crate::host::pci::full_address;
use crate::host::scan;
use crate::host::topology::Topology;
use crate::parse::cpulist::{format_cpulist, parse_cpulist};
use crate::pinning::{PinRequest, PlanError, plan, validate};
use crate::sysroot::HostRoot;
use anyhow::Context;
use clap::Args;
use std::collections::BTreeSet;
use std::fmt::Write;

#[derive(Debug, Args)]
pub struct PinArgs {
    /// How many vCPUs the VM gets (at least 1).
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(i64).range(1..=u32::MAX as i64))]
    pub vcpus: i64,
    /// Host CPUs kept for the host, the emulator and I/O (default: core 0 and its
    /// siblings; on a part with V-cache on one CCD, a core of the other CCD).
    #[arg(long, value_name = "CPUS")]
    pub reserve: Option<String>,
    /// The passed-through GPU: its NUMA node is preferred.
    #[arg(long, value_name = "ADDRESS")]
    pub gpu: Option<String>,
    /// Add vcpusched fifo (real-time scheduling of the vCPU threads).
    #[arg(long)]
    pub fifo: bool,
    /// Print the plan as JSON.
    #[arg(long, conflicts_with = "xml")]
    pub json: bool,
    /// Print only the libvirt XML fragment.
    #[arg(long)]
    pub xml: bool,
}

pub fn run(root: &HostRoot, args: &PinArgs) -> anyhow::Result<i32> {
    let snap = scan(root)?;
    let reserve = match &args.reserve {
        Some(r) => {
            let cpus = parse_cpulist(r).with_context(|| format!("--reserve {r:?}"))?;
            // An empty reserve would pin the emulator nowhere (cpuset='').
            anyhow::ensure!(
                !cpus.is_empty(),
                "--reserve {r:?} names no CPU: the host keeps at least one core for itself, the emulator and I/O (default: core 0 and its siblings, or off the V-cache CCD on an X3D part)"
            );
            Some(cpus)
        }
        None => None,
    };
    let gpu_numa_node = match &args.gpu {
        Some(a) => {
            let dev = snap
                .device(&full_address(a))
                .with_context(|| format!("--gpu {a}: no such PCI device"))?;
            dev.device.numa_node
        }
        None => None,
    };
    let req = PinRequest {
        vcpus: usize::try_from(args.vcpus).unwrap_or(usize::MAX),
        reserve: reserve.clone(),
        gpu_numa_node,
        amd: snap.cpu.vendor.as_deref() == Some("AuthenticAMD"),
        vcpusched_fifo: args.fifo,
    };
    let p = match plan(&snap.topology, &req) {
        Ok(p) => p,
        Err(e @ PlanError::TooMany { .. }) => {
            anyhow::bail!("{}", too_many(&snap.topology, &e, reserve.as_ref()))
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&p)?)?;
        return Ok(0);
    }
    if args.xml {
        out!("{}", p.to_xml())?;
        return Ok(0);
    }
    let mut o = String::new();
    let _ = writeln!(o, "Pinning plan for {} vCPUs\n", p.vcpus);
    let _ = writeln!(o, "  vCPU -> host CPU (core, L3 group, NUMA node)");
    for (v, c) in &p.vcpupin {
        let cpu = snap.topology.cpu(*c);
        let core = cpu
            .and_then(|x| x.core)
            .and_then(|k| snap.topology.cores.get(k));
        let _ = writeln!(
            o,
            "  {v:>4} -> {c:<4} ({}, L3 #{}, node {})",
            core.map(|k| k.name()).unwrap_or_else(|| "core ?".into()),
            cpu.and_then(|x| x.l3_group)
                .map(|l| l.to_string())
                .unwrap_or_else(|| "-".into()),
            cpu.and_then(|x| x.numa_node)
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into())
        );
    }
    let _ = writeln!(
        o,
        "\n  emulator and iothread: CPUs {}",
        format_cpulist(&p.emulatorpin)
    );
    let _ = writeln!(
        o,
        "  guest topology: {} sockets, {} cores, {} threads{}",
        p.guest.sockets,
        p.guest.cores,
        p.guest.threads,
        if p.topoext { " (topoext)" } else { "" }
    );
    let _ = writeln!(o, "\nWhy:");
    for r in &p.reasons {
        let _ = writeln!(o, "  - {r}");
    }
    if !p.warnings.is_empty() {
        let _ = writeln!(o, "\nWarnings:");
        for w in &p.warnings {
            let _ = writeln!(o, "  - {w}");
        }
    }
    for problem in validate(&snap.topology, &p.pinning()) {
        let _ = writeln!(o, "  - check: {}", problem.reason);
    }
    let _ = writeln!(
        o,
        "\nKernel command line (static isolation):\n  {}",
        p.kernel.cmdline()
    );
    let _ = writeln!(
        o,
        "Or isolate only while the VM runs (systemd):\n  systemctl set-property --runtime system.slice AllowedCPUs={0}; the same for user.slice and init.scope",
        p.allowed_cpus_host
    );
    let _ = writeln!(o, "\nlibvirt XML (also: --xml):\n{}", p.to_xml());
    out!("{o}")?;
    Ok(0)
}

/// Why `plan` refused a request as too big, and what would fit: the most
/// vCPUs this host can pin (every core but the smallest one), and the
/// `--reserve` that frees them, or that none frees more.
pub fn too_many(t: &Topology, err: &PlanError, given: Option<&BTreeSet<u32>>) -> String {
    let PlanError::TooMany {
        asked,
        available,
        reserved,
    } = err
    else {
        return err.to_string();
    };
    let (asked, available) = (*asked, *available);
    let threads = |n: usize| if n == 1 { "thread" } else { "threads" };
    let mut o = format!(
        "asked for {asked} vCPUs, but with CPUs {reserved} kept for the host only {available} host {} free",
        if available == 1 {
            "thread is"
        } else {
            "threads are"
        }
    );
    if let Some(g) = given
        && format_cpulist(g) != *reserved
    {
        o.push_str(&format!(
            " (--reserve {} widened to whole cores: SMT siblings stay together)",
            format_cpulist(g)
        ));
    }
    let online: Vec<u32> = t.online_cpus().map(|c| c.id).collect();
    // The smallest core the host could keep; core 0's (the default) on a tie.
    let Some(smallest) = t
        .cores
        .iter()
        .filter(|c| !c.cpus.is_empty())
        .min_by_key(|c| (c.cpus.len(), !c.cpus.contains(&0)))
    else {
        return o;
    };
    let total: usize = t.cores.iter().map(|c| c.cpus.len()).sum();
    let most = total - smallest.cpus.len();
    let keep = format_cpulist(&smallest.cpus);
    if asked > most {
        o.push_str(&format!(
            ". This host has {} CPUs online ({}) and keeps at least one core for itself, the emulator and I/O: at most {most} {} can be pinned here",
            online.len(),
            format_cpulist(&online),
            if most == 1 { "vCPU" } else { "vCPUs" }
        ));
    }
    if available < most {
        o.push_str(&format!(
            ". `--reserve {keep}` keeps only that core ({} {}) for the host and frees {most} {}",
            smallest.cpus.len(),
            threads(smallest.cpus.len()),
            threads(most)
        ));
        if asked > most {
            o.push_str(", still fewer than asked");
        }
    } else {
        o.push_str(&format!(
            "; --reserve cannot free more: the reserve ({reserved}) already is a single core of the smallest size"
        ));
    }
    o.push('.');
    o
}
