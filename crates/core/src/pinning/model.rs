//! What a pinning request asks and what a plan answers, with the libvirt XML
//! fragment and the kernel command line that go with it.

use crate::parse::cpulist::format_cpulist;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinRequest {
    pub vcpus: usize,
    /// Housekeeping CPUs for the host (widened to whole cores); core 0 by default.
    pub reserve: Option<BTreeSet<u32>>,
    /// The passed-through GPU's NUMA node: its cores are preferred.
    pub gpu_numa_node: Option<u32>,
    /// AMD host: `topoext` is needed for the guest to see SMT.
    pub amd: bool,
    pub vcpusched_fifo: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GuestTopology {
    pub sockets: u32,
    pub dies: u32,
    pub cores: u32,
    pub threads: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelArgs {
    pub isolcpus: String,
    pub nohz_full: String,
    pub rcu_nocbs: String,
    pub irqaffinity: String,
}

impl KernelArgs {
    /// The kernel parameters that keep the host off `vm` and its interrupts
    /// on `housekeeping` (both CPU lists, e.g. `2-5,8-11`).
    pub fn for_cpus(vm: &str, housekeeping: &str) -> Self {
        KernelArgs {
            isolcpus: format!("managed_irq,domain,{vm}"),
            nohz_full: vm.to_string(),
            rcu_nocbs: vm.to_string(),
            irqaffinity: housekeeping.to_string(),
        }
    }

    pub fn cmdline(&self) -> String {
        format!(
            "isolcpus={} nohz_full={} rcu_nocbs={} irqaffinity={}",
            self.isolcpus, self.nohz_full, self.rcu_nocbs, self.irqaffinity
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinPlan {
    pub vcpus: usize,
    /// (vCPU, host CPU).
    pub vcpupin: Vec<(u32, u32)>,
    pub emulatorpin: Vec<u32>,
    pub iothreadpin: Vec<u32>,
    pub guest: GuestTopology,
    pub topoext: bool,
    /// `<numatune>` memory nodes.
    pub numa_nodes: Vec<u32>,
    pub vcpusched_fifo: bool,
    /// Host CPUs running vCPUs.
    pub vm_cpus: Vec<u32>,
    /// Host CPUs left to the host (everything not on a VM core).
    pub housekeeping_cpus: Vec<u32>,
    pub kernel: KernelArgs,
    /// systemd AllowedCPUs for system.slice, user.slice and init.scope while the
    /// VM runs (dynamic isolation instead of isolcpus).
    pub allowed_cpus_host: String,
    /// One plain sentence per decision.
    pub reasons: Vec<String>,
    /// Where the request could not be met well.
    pub warnings: Vec<String>,
}

impl PinPlan {
    /// The libvirt fragment: `<vcpu>`, `<cputune>`, `<cpu>` and `<numatune>`.
    pub fn to_xml(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "<vcpu placement='static'>{}</vcpu>", self.vcpus);
        let _ = writeln!(o, "<iothreads>1</iothreads>");
        let _ = writeln!(o, "<cputune>");
        for (v, c) in &self.vcpupin {
            let _ = writeln!(o, "  <vcpupin vcpu='{v}' cpuset='{c}'/>");
        }
        let _ = writeln!(
            o,
            "  <emulatorpin cpuset='{}'/>",
            format_cpulist(&self.emulatorpin)
        );
        let _ = writeln!(
            o,
            "  <iothreadpin iothread='1' cpuset='{}'/>",
            format_cpulist(&self.iothreadpin)
        );
        if self.vcpusched_fifo {
            let _ = writeln!(
                o,
                "  <vcpusched vcpus='0-{}' scheduler='fifo' priority='1'/>",
                self.vcpus.saturating_sub(1)
            );
        }
        let _ = writeln!(o, "</cputune>");
        if !self.numa_nodes.is_empty() {
            let _ = writeln!(
                o,
                "<numatune>\n  <memory mode='strict' nodeset='{}'/>\n</numatune>",
                format_cpulist(&self.numa_nodes)
            );
        }
        let g = self.guest;
        let _ = writeln!(
            o,
            "<cpu mode='host-passthrough' check='none' migratable='off'>"
        );
        let _ = writeln!(
            o,
            "  <topology sockets='{}' dies='{}' cores='{}' threads='{}'/>",
            g.sockets, g.dies, g.cores, g.threads
        );
        let _ = writeln!(o, "  <cache mode='passthrough'/>");
        if self.topoext {
            let _ = writeln!(o, "  <feature policy='require' name='topoext'/>");
        }
        let _ = writeln!(o, "</cpu>");
        o
    }
}
