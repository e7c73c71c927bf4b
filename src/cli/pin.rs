//! `vfio-assistant pin --vcpus N [--reserve CPUS] [--gpu ADDRESS] [--fifo] [--json | --xml]`.

use crate::host::pci::full_address;
use crate::host::scan;
use crate::parse::cpulist::{format_cpulist, parse_cpulist};
use crate::pinning::{PinRequest, plan, validate};
use crate::sysroot::HostRoot;
use anyhow::Context;
use clap::Args;
use std::fmt::Write;

#[derive(Debug, Args)]
pub struct PinArgs {
    /// How many vCPUs the VM gets.
    #[arg(long)]
    pub vcpus: usize,
    /// Host CPUs kept for the host, the emulator and I/O (default: core 0 and its siblings).
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
        Some(r) => Some(parse_cpulist(r).with_context(|| format!("--reserve {r:?}"))?),
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
        vcpus: args.vcpus,
        reserve,
        gpu_numa_node,
        amd: snap.cpu.vendor.as_deref() == Some("AuthenticAMD"),
        vcpusched_fifo: args.fifo,
    };
    let p = plan(&snap.topology, &req)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&p)?);
        return Ok(0);
    }
    if args.xml {
        print!("{}", p.to_xml());
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
            "  {v:>4} -> {c:<4} (core {}, L3 #{}, node {})",
            core.map(|k| format_cpulist(&k.cpus)).unwrap_or_default(),
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
    print!("{o}");
    Ok(0)
}
