//! Rates from two samples: pure arithmetic, no I/O. Counters that went
//! backwards (a reset, a CPU that went offline and came back) give a rate of
//! zero for that sample and a note, never a huge number.

use super::sample::{GovernorCpus, Sample, VmThreads};
use super::vm::{KvmSource, WHOLE_VM};
use crate::parse::cpulist::format_cpulist;
use crate::parse::interrupts::{InterruptRow, VfioIrqMode, vfio_handlers};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceRate {
    /// `16`, `LOC`, `IPI0`…
    pub label: String,
    pub description: String,
    pub per_s: f64,
    /// CPUs that took some of them in this interval.
    pub cpus: Vec<u32>,
    /// Of those, the VM's CPUs (pinned vCPUs): interrupts there steal guest time.
    pub on_vm_cpus: Vec<u32>,
    /// Of those, the isolated CPUs (`isolcpus`/`nohz_full`): set aside for the
    /// VM, yet interrupted. (`Sample::isolated` is sorted.)
    pub on_isolated_cpus: Vec<u32>,
    /// A passed-through device's interrupt, and how it signals.
    pub vfio: Option<VfioIrqMode>,
}

impl SourceRate {
    /// A device's interrupt (a numbered line with a `/proc/irq/N`), which can
    /// be steered to other CPUs; the per-CPU kinds (`LOC`, `RES`, `CAL`,
    /// `TLB`…) every CPU takes cannot.
    pub fn is_device(&self) -> bool {
        self.label.parse::<u32>().is_ok()
    }

    /// Where a device interrupt lands that it should not, in words: "VM CPUs
    /// [2, 3]", "isolated CPUs [4]", or both; None when neither, for the
    /// per-CPU kinds (a timer tick on an isolated CPU is expected) and for a
    /// passed-through device's own interrupts (they are the guest's).
    pub fn misplaced(&self) -> Option<String> {
        if !self.is_device() || self.vfio.is_some() {
            return None;
        }
        let isolated: Vec<u32> = self
            .on_isolated_cpus
            .iter()
            .copied()
            .filter(|c| !self.on_vm_cpus.contains(c))
            .collect();
        let parts: Vec<String> = [("VM CPUs", &self.on_vm_cpus), ("isolated CPUs", &isolated)]
            .into_iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|(what, c)| format!("{what} {c:?}"))
            .collect();
        (!parts.is_empty()).then(|| parts.join(" and "))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    pub cpu: u32,
    /// Fractions of the interval (0..1).
    pub busy: f64,
    pub user: f64,
    pub system: f64,
    pub irq: f64,
    pub softirq: f64,
    pub steal: f64,
    pub guest: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VcpuRate {
    pub vcpu: u32,
    pub tid: u32,
    /// Where it last ran.
    pub cpu: u32,
    pub pinned: Vec<u32>,
    /// Whether `cpu` is one it is pinned to (None when not pinned).
    pub on_pin: Option<bool>,
    /// Share of the interval it ran (1.0 = a whole CPU).
    pub running: f64,
    /// Milliseconds per second it waited for a CPU while runnable.
    pub wait_ms_per_s: f64,
    pub switches_per_s: f64,
    pub involuntary_per_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvmRate {
    pub name: String,
    /// All vCPUs together.
    pub per_s: f64,
    pub per_vcpu: Vec<(u32, f64)>,
    /// Not read back from JSON: `kvm_meaning(name)` again.
    #[serde(skip_deserializing)]
    pub meaning: &'static str,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    pub dt_s: f64,
    /// (CPU, interrupts per second).
    pub irq_per_cpu: Vec<(u32, f64)>,
    /// Sources that fired, busiest first.
    pub sources: Vec<SourceRate>,
    pub cpu_use: Vec<CpuUse>,
    pub freq_mhz: Vec<(u32, f64)>,
    /// The cpufreq governors and their CPUs (read every five seconds).
    pub governors: Vec<GovernorCpus>,
    pub vcpus: Vec<VcpuRate>,
    /// The KVM counters that moved, busiest first.
    pub kvm: Vec<KvmRate>,
    /// Where they came from (libvirt, QMP, debugfs).
    pub kvm_source: Option<KvmSource>,
    pub problems: Vec<String>,
}

impl Rates {
    /// `performance on 0-3, powersave on 4-7`.
    pub fn governors_text(&self) -> String {
        self.governors
            .iter()
            .map(|g| format!("{} on {}", g.governor, format_cpulist(&g.cpus)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What each KVM counter says about the guest, in plain words.
pub fn kvm_meaning(name: &str) -> &'static str {
    match name {
        "exits" => "every time a vCPU left the guest for KVM",
        "halt_exits" => "the guest idled (HLT): normal on an idle desktop",
        "io_exits" => "port I/O emulated by QEMU: emulated devices (no virtio driver yet?)",
        "mmio_exits" => {
            "memory-mapped I/O emulated by QEMU: emulated devices, or no Hyper-V vapic/synic"
        }
        "irq_exits" => "a host interrupt arrived while the guest ran: host IRQs on the VM's CPUs",
        "irq_injections" => "interrupts delivered into the guest",
        "irq_window_exits" => "KVM waited for the guest to accept an interrupt",
        "signal_exits" => "QEMU signalled the vCPU thread",
        "insn_emulation" => {
            "instructions KVM had to emulate: emulated devices, or guest code KVM runs itself without entering the guest (real-mode firmware where the CPU, or a nested setup, lacks 'unrestricted guest'), which can count more than the exits"
        }
        "hypercalls" => "the guest called the hypervisor (Hyper-V enlightenments use these)",
        "request_irq_exits" => "exits to deliver an interrupt request",
        "halt_wakeup" => "an idle vCPU was woken up",
        "tlb_flush" => "guest TLB flushes KVM performed",
        "fpu_reload" => "the guest's FPU state was loaded again (the host used the FPU meanwhile)",
        "req_event" => "KVM re-checked pending interrupts/events before re-entering the guest",
        "host_state_reload" => "host state restored after an exit to QEMU",
        "preemption_other" | "preemption_reported" => {
            "the vCPU thread was preempted on the host: something else ran on its CPU"
        }
        "directed_yield_attempted" | "directed_yield_successful" => {
            "a spinning vCPU handed its time to another (pause-loop exiting)"
        }
        "pf_fixed" | "pf_taken" | "pf_fast" | "pf_guest" | "pf_spurious" => {
            "page faults KVM handled: many at start-up is normal (memory being mapped)"
        }
        "l1d_flush" => "L1 cache flushed before guest entry (L1TF mitigation)",
        "nmi_injections" | "nmi_window_exits" => "NMIs delivered into the guest",
        "invlpg" => "guest page invalidations KVM intercepted",
        "nested_run" => "the guest ran a nested guest of its own (e.g. Windows VBS/Hyper-V)",
        _ => "",
    }
}

/// Interrupt counts are 32-bit in the kernel (`unsigned int`, printed as
/// `%10u`): a count near 2^32 that comes back small has wrapped around, and
/// the interrupts in between are counted. Anything else that went backwards
/// (a driver freed and requested its IRQ again) is a reset: zero, and said.
/// A "wrap" worth more than `most` interrupts is not believed (no source
/// fires 2 million times a second on one CPU).
fn irq_delta(a: u64, b: u64, most: u64, resets: &mut usize) -> u64 {
    if b >= a {
        return b - a;
    }
    match b.checked_add(1u64 << 32).and_then(|w| w.checked_sub(a)) {
        Some(d) if a <= u64::from(u32::MAX) && d <= most => d,
        _ => {
            *resets += 1;
            0
        }
    }
}

/// The columns of `new` from the first that differs from `old` to the last
/// (all of them when the rows are not equally long), eight at a time from
/// both ends.
fn moved_span(old: &[u64], new: &[u64]) -> std::ops::Range<usize> {
    if old.len() != new.len() {
        return 0..new.len();
    }
    let differs = |a: &[u64], b: &[u64]| a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) != 0;
    let n = new.len();
    let mut start = 0;
    while start + 8 <= n && !differs(&old[start..start + 8], &new[start..start + 8]) {
        start += 8;
    }
    while start < n && old[start] == new[start] {
        start += 1;
    }
    let mut end = n;
    while end >= start + 8 && !differs(&old[end - 8..end], &new[end - 8..end]) {
        end -= 8;
    }
    while end > start && old[end - 1] == new[end - 1] {
        end -= 1;
    }
    start..end
}

fn delta(a: u64, b: u64, resets: &mut usize) -> u64 {
    b.checked_sub(a).unwrap_or_else(|| {
        *resets += 1;
        0
    })
}

fn interrupts(
    prev: &Sample,
    cur: &Sample,
    vm_cpus: &BTreeSet<u32>,
    dt: f64,
    r: &mut Rates,
    resets: &mut usize,
) {
    let (Some(a), Some(b)) = (&prev.interrupts, &cur.interrupts) else {
        return;
    };
    // Rows are matched by position first (the usual case: the same lines in
    // the same order), by label only when a line came or went.
    let mut by_label: Option<HashMap<&str, &Arc<InterruptRow>>> = None;
    let mut per_cpu = vec![0u64; b.cpus.len()];
    // Past 2^31 a "wrap" and a reset cannot be told apart (long intervals).
    let most = ((dt * 2e6) as u64).min(1 << 31);
    for (idx, row) in b.rows.iter().enumerate() {
        let old_row = match a.rows.get(idx).filter(|o| o.label == row.label) {
            Some(o) => o,
            None => {
                let map = by_label
                    .get_or_insert_with(|| a.rows.iter().map(|o| (o.label.as_str(), o)).collect());
                let Some(o) = map.get(row.label.as_str()) else {
                    continue;
                };
                o
            }
        };
        // The same row (its line did not change): nothing moved.
        if Arc::ptr_eq(old_row, row) {
            continue;
        }
        let old = old_row.per_cpu.as_slice();
        let mut total = 0u64;
        let mut cpus = Vec::with_capacity(row.per_cpu.len().min(16));
        // Even a changed line moved on few CPUs: the columns before the first
        // and after the last that moved are skipped, and between them runs
        // of eight that did not move are skipped with one comparison.
        // The parse knows which columns it read anew; else compare.
        let moved = row
            .may_differ_from(old_row)
            .unwrap_or_else(|| moved_span(old, &row.per_cpu));
        let start = moved.start;
        for (k, chunk) in row.per_cpu[moved].chunks(8).enumerate() {
            let at = start + k * 8;
            if old.get(at..at + chunk.len()) == Some(chunk) {
                continue;
            }
            for (j, &now) in chunk.iter().enumerate() {
                let i = at + j;
                let d = irq_delta(old.get(i).copied().unwrap_or(0), now, most, resets);
                if d > 0 {
                    if let Some(slot) = per_cpu.get_mut(i) {
                        *slot = slot.saturating_add(d);
                    }
                    if let Some(&cpu) = b.cpus.get(i) {
                        cpus.push(cpu);
                    }
                    total = total.saturating_add(d);
                }
            }
        }
        if total == 0 {
            continue;
        }
        let on_vm_cpus = cpus
            .iter()
            .copied()
            .filter(|c| vm_cpus.contains(c))
            .collect();
        let on_isolated_cpus = cpus
            .iter()
            .copied()
            .filter(|c| cur.isolated.binary_search(c).is_ok())
            .collect();
        r.sources.push(SourceRate {
            label: row.label.clone(),
            description: row.description.clone(),
            per_s: total as f64 / dt,
            cpus,
            on_vm_cpus,
            on_isolated_cpus,
            vfio: vfio_handlers(&row.description).next().map(|(m, _)| m),
        });
    }
    r.sources.sort_by(|x, y| y.per_s.total_cmp(&x.per_s));
    r.irq_per_cpu = b
        .cpus
        .iter()
        .zip(per_cpu)
        .map(|(&c, n)| (c, n as f64 / dt))
        .collect();
}

fn cpu_use(prev: &Sample, cur: &Sample, r: &mut Rates, resets: &mut usize) {
    let before: BTreeMap<u32, _> = prev.cpu_times.iter().map(|t| (t.cpu, t)).collect();
    for b in &cur.cpu_times {
        let Some(a) = before.get(&b.cpu) else {
            continue;
        };
        let total = delta(a.total(), b.total(), resets);
        if total == 0 {
            continue;
        }
        let f = |x: u64, y: u64, resets: &mut usize| delta(x, y, resets) as f64 / total as f64;
        let idle = f(a.idle + a.iowait, b.idle + b.iowait, resets);
        r.cpu_use.push(CpuUse {
            cpu: b.cpu,
            busy: (1.0 - idle).clamp(0.0, 1.0),
            user: f(a.user + a.nice, b.user + b.nice, resets),
            system: f(a.system, b.system, resets),
            irq: f(a.irq, b.irq, resets),
            softirq: f(a.softirq, b.softirq, resets),
            steal: f(a.steal, b.steal, resets),
            guest: f(a.guest + a.guest_nice, b.guest + b.guest_nice, resets),
        });
    }
}

fn vcpus(
    prev: &Sample,
    cur: &Sample,
    vm: Option<&VmThreads>,
    dt: f64,
    r: &mut Rates,
    resets: &mut usize,
) {
    let before: BTreeMap<u32, _> = prev.threads.iter().map(|t| (t.tid, t)).collect();
    for t in &cur.threads {
        let pinned = vm
            .and_then(|v| v.pins.get(&t.vcpu))
            .cloned()
            .unwrap_or_default();
        let on_pin = (!pinned.is_empty()).then(|| pinned.contains(&t.cpu));
        let (running, wait, sw, inv) = match before.get(&t.tid) {
            Some(a) => (
                delta(a.run_ns, t.run_ns, resets) as f64 / 1e9 / dt,
                delta(a.wait_ns, t.wait_ns, resets) as f64 / 1e6 / dt,
                delta(
                    a.voluntary + a.involuntary,
                    t.voluntary + t.involuntary,
                    resets,
                ) as f64
                    / dt,
                delta(a.involuntary, t.involuntary, resets) as f64 / dt,
            ),
            None => (0.0, 0.0, 0.0, 0.0),
        };
        r.vcpus.push(VcpuRate {
            vcpu: t.vcpu,
            tid: t.tid,
            cpu: t.cpu,
            pinned,
            on_pin,
            running,
            wait_ms_per_s: wait,
            switches_per_s: sw,
            involuntary_per_s: inv,
        });
    }
}

fn kvm(prev: &Sample, cur: &Sample, dt: f64, r: &mut Rates, resets: &mut usize) {
    let before: HashMap<(u32, &str), u64> = prev
        .kvm
        .iter()
        .map(|(v, n, x)| ((*v, n.as_str()), *x))
        .collect();
    // name → (all vCPUs, per vCPU); whole-VM counters (debugfs) add to the
    // total only.
    type Total = (f64, Vec<(u32, f64)>);
    let mut by_name: BTreeMap<&str, Total> = BTreeMap::new();
    for (v, n, x) in &cur.kvm {
        // Nanosecond totals (`halt_wait_ns`, `halt_poll_success_ns`…) are
        // times, not events: not exits.
        if n.ends_with("_ns") {
            continue;
        }
        if let Some(&old) = before.get(&(*v, n.as_str())) {
            let rate = delta(old, *x, resets) as f64 / dt;
            let entry = by_name.entry(n.as_str()).or_default();
            entry.0 += rate;
            if *v != WHOLE_VM {
                entry.1.push((*v, rate));
            }
        }
    }
    for (name, (per_s, per_vcpu)) in by_name {
        if per_s > 0.0 || name == "exits" {
            r.kvm.push(KvmRate {
                name: name.to_string(),
                per_s,
                per_vcpu,
                meaning: kvm_meaning(name),
            });
        }
    }
    r.kvm.sort_by(|x, y| y.per_s.total_cmp(&x.per_s));
}

/// The rates between two samples. `vm` ties them to a VM's pinning.
pub fn rates(prev: &Sample, cur: &Sample, vm: Option<&VmThreads>) -> Rates {
    let dt = cur.t_ns.saturating_sub(prev.t_ns) as f64 / 1e9;
    let mut r = Rates {
        dt_s: dt,
        problems: cur.problems.clone(),
        ..Rates::default()
    };
    if dt <= 0.0 {
        r.problems
            .push("samples taken at the same instant: no rates".into());
        return r;
    }
    let vm_cpus: BTreeSet<u32> = vm
        .map(|v| v.pins.values().flatten().copied().collect())
        .unwrap_or_default();
    let mut resets = 0;
    interrupts(prev, cur, &vm_cpus, dt, &mut r, &mut resets);
    cpu_use(prev, cur, &mut r, &mut resets);
    r.governors = cur.governors.clone();
    r.freq_mhz = cur
        .freq_khz
        .iter()
        .map(|(c, k)| (*c, *k as f64 / 1000.0))
        .collect();
    vcpus(prev, cur, vm, dt, &mut r, &mut resets);
    kvm(prev, cur, dt, &mut r, &mut resets);
    r.kvm_source = cur.kvm_source;
    if resets > 0 {
        r.problems.push(format!(
            "{resets} counter(s) went backwards (reset or CPU hot-plug): counted as 0 this time"
        ));
    }
    r
}

#[cfg(test)]
mod tests;
