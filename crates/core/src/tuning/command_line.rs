//! A request as the command a terminal runs: `sudo vfio-assistant tune
//! apply` with the flags that make the same request (the window's "or in a
//! terminal" line, and what the password prompt says it runs). One grammar
//! with the CLI's flags: tests/it/tuning_command_line.rs parses it back
//! through the CLI and gets the same request.

use super::kind::ChangeId;
use super::model::Request;
use crate::parse::cpulist::format_cpulist;

/// `sudo vfio-assistant tune apply …` for `r`.
pub fn apply_command(r: &Request) -> String {
    let mut s = String::from("sudo vfio-assistant tune apply");
    for g in &r.gpus {
        s.push_str(&format!(" --gpu {g}"));
    }
    if let Some(n) = r.vcpus {
        s.push_str(&format!(" --vcpus {n}"));
    }
    if let Some(c) = &r.cpus {
        s.push_str(&format!(" --cpus {}", format_cpulist(c)));
    }
    if let Some(m) = r.memory_mib {
        s.push_str(&format!(" --memory {m}M"));
    }
    if r.hugepages_1g {
        s.push_str(" --hugepages-1g");
    }
    for (pf, n) in &r.sriov {
        s.push_str(&format!(" --sriov {pf}={n}"));
    }
    if r.host_keeps_vm_cpus && (r.vcpus.is_some() || r.cpus.is_some()) {
        s.push_str(" --no-isolcpus");
    }
    if let Some(vm) = r.vm.as_ref().filter(|_| r.isolation_hook) {
        s.push_str(&format!(" --isolate-vm {vm}"));
    }
    if let Some(vm) = r.vm.as_ref().filter(|_| r.single_gpu && !r.isolation_hook) {
        s.push_str(&format!(" --single-gpu {vm}"));
    }
    if let Some(vm) = r.vm.as_ref().filter(|_| r.shared_gpu) {
        s.push_str(&format!(" --shared-gpu {vm}"));
        for u in &r.shared_stop_units {
            s.push_str(&format!(" --shared-stop {u}"));
        }
    }
    if let Some(m) = r.looking_glass_mib {
        s.push_str(&format!(" --looking-glass-mib {m}"));
        if r.kvmfr {
            s.push_str(" --kvmfr");
        }
    }
    if r.qemu_as_user {
        s.push_str(" --qemu-as-me");
    }
    if !r.only.is_empty() {
        s.push_str(&format!(
            " --only {}",
            ChangeId::joined(&r.only).replace(", ", ",")
        ));
    }
    s
}
