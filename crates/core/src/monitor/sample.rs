//! One sample of the live counters, read through a `HostRoot`: interrupts,
//! per-CPU time, current frequency, and — for a VM — its vCPU threads (where
//! they ran, run and wait time, context switches) and KVM's per-vCPU counters.
//! A source that cannot be read yields nothing and a reason in `problems`.

use crate::parse::interrupts::{Interrupts, parse_interrupts_reusing};
use crate::parse::procstat::{CpuTimes, parse_cpu_times};
use crate::parse::task::{parse_ctxt_switches, parse_schedstat, parse_task_stat};
use crate::sysroot::{HostPath, HostRoot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A running VM's threads and pinning, found once (see `vm.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmThreads {
    pub name: String,
    /// QEMU's process id.
    pub pid: u32,
    /// (vCPU index, thread id).
    pub vcpus: Vec<(u32, u32)>,
    /// vCPU index → host CPUs it is pinned to (empty map: not pinned).
    pub pins: BTreeMap<u32, Vec<u32>>,
    /// vCPU index → QOM path, to match KVM's counters.
    pub qom_paths: BTreeMap<u32, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ThreadSample {
    pub vcpu: u32,
    pub tid: u32,
    /// The host CPU it last ran on.
    pub cpu: u32,
    pub run_ns: u64,
    pub wait_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// CLOCK_MONOTONIC in nanoseconds when the sample was taken.
    pub t_ns: u64,
    pub interrupts: Option<Interrupts>,
    /// The text `interrupts` came from, so the next sample can reuse the rows
    /// whose lines did not change.
    #[serde(skip)]
    pub interrupts_text: Option<Arc<String>>,
    pub cpu_times: Vec<CpuTimes>,
    /// (CPU, current kHz).
    pub freq_khz: Vec<(u32, u64)>,
    /// When `freq_khz` was read (it is carried over between samples: one
    /// sysfs file per CPU is the dearest part of a sample on a big host).
    #[serde(skip)]
    pub freq_t_ns: u64,
    /// How long that read took (see `freq_every_ns`).
    #[serde(skip)]
    pub freq_cost_ns: u64,
    /// The cpufreq governors and the CPUs that run them (`scaling_governor`),
    /// read every five seconds and carried over between.
    pub governors: Vec<GovernorCpus>,
    #[serde(skip)]
    pub governors_t_ns: u64,
    pub threads: Vec<ThreadSample>,
    /// (vCPU index, counter name, value): KVM's own counters. The index is
    /// `vm::WHOLE_VM` for counters known only per VM (debugfs).
    pub kvm: Vec<(u32, String, u64)>,
    /// Where `kvm` came from.
    pub kvm_source: Option<super::vm::KvmSource>,
    /// CPUs set aside from the host's scheduler or timer tick (`isolcpus`,
    /// `nohz_full`): an interrupt there disturbs what they were set aside for.
    /// Read with the first sample (they change only at boot) and carried over.
    pub isolated: Vec<u32>,
    /// "source: why" for each source that gave nothing, and a note while the
    /// CPU clocks are read rarer than once a second (`clocks_note`).
    pub problems: Vec<String>,
}

/// The per-CPU frequencies are read at most this often (at least this far
/// apart).
const FREQ_EVERY_NS: u64 = 1_000_000_000;

/// How far apart the frequencies are read when the last read took
/// `cost_ns`: a second, or more so that reading them takes at most 2 % of
/// the time. On some older x86 kernels (from about 4.14 to 5.18) reading a
/// CPU's `scaling_cur_freq` more than a second after the last read
/// interrupts that CPU, sleeps 10 ms and interrupts it again (CPUs isolated
/// with isolcpus/nohz_full are skipped): a 256-CPU host took seconds, every
/// second, and the VM's other CPUs were interrupted each time.
pub fn freq_every_ns(cost_ns: u64) -> u64 {
    FREQ_EVERY_NS.max(cost_ns.saturating_mul(50))
}

/// The note said while the frequencies are read rarer than once a second
/// because the last read took `cost_ns` (20 ms or more). Its numbers change
/// only when the clocks are read again.
pub fn clocks_note(cost_ns: u64) -> Option<String> {
    let every = freq_every_ns(cost_ns);
    (every > FREQ_EVERY_NS).then(|| {
        format!(
            "CPU clocks: reading them took {} ms, so they are read every {} s (some older x86 kernels wait 10 ms per CPU to read its clock)",
            cost_ns / 1_000_000,
            every.div_ceil(1_000_000_000)
        )
    })
}

/// How often the per-CPU governors are read again.
const GOVERNORS_EVERY_NS: u64 = 5_000_000_000;

/// CLOCK_MONOTONIC now, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

/// `isolcpus` and `nohz_full` CPUs, read as the topology reads them (none
/// when neither is set or the files cannot be read: nothing to flag then).
fn read_isolated(root: &HostRoot) -> Vec<u32> {
    let (isolated, nohz_full) = crate::host::topology::read_isolation(
        root,
        &mut crate::host::warnings::Warnings::default(),
    );
    isolated.union(&nohz_full).copied().collect()
}

/// Interrupts, CPU times and frequencies.
pub fn read_host(root: &HostRoot) -> Sample {
    read_host_after(root, None)
}

/// `read_host`, reusing what did not change since `prev`.
pub fn read_host_after(root: &HostRoot, prev: Option<&Sample>) -> Sample {
    let mut s = Sample {
        t_ns: monotonic_ns(),
        ..Sample::default()
    };
    let expected = prev
        .and_then(|p| p.interrupts_text.as_ref())
        .map_or(0, |t| t.len());
    match root.read_text_sized(&HostPath::proc("interrupts"), expected) {
        Ok(t) => {
            let old = prev
                .and_then(|p| Some((p.interrupts_text.as_ref()?.as_str(), p.interrupts.as_ref()?)));
            s.interrupts = Some(parse_interrupts_reusing(&t, old));
            s.interrupts_text = Some(Arc::new(t));
        }
        Err(e) => s.problems.push(format!("interrupts: {e}")),
    }
    match root.read_text(&HostPath::proc("stat")) {
        Ok(t) => s.cpu_times = parse_cpu_times(&t),
        Err(e) => s.problems.push(format!("CPU time: {e}")),
    }
    s.isolated = match prev {
        Some(p) => p.isolated.clone(),
        None => read_isolated(root),
    };
    // Frequencies move slowly next to interrupts: read them once a second;
    // governors change only when someone switches them: every five.
    let age = |t: u64| s.t_ns.saturating_sub(t);
    match prev.filter(|p| age(p.freq_t_ns) < freq_every_ns(p.freq_cost_ns)) {
        Some(p) => {
            s.freq_khz = p.freq_khz.clone();
            s.freq_t_ns = p.freq_t_ns;
            s.freq_cost_ns = p.freq_cost_ns;
        }
        None => {
            s.freq_t_ns = s.t_ns;
            let t0 = monotonic_ns();
            s.freq_khz = per_cpu_cpufreq(root, &s.cpu_times, "scaling_cur_freq", |t| {
                t.parse::<u64>().ok()
            });
            s.freq_cost_ns = monotonic_ns().saturating_sub(t0);
        }
    }
    s.problems.extend(clocks_note(s.freq_cost_ns));
    match prev.filter(|p| age(p.governors_t_ns) < GOVERNORS_EVERY_NS) {
        Some(p) => {
            s.governors = p.governors.clone();
            s.governors_t_ns = p.governors_t_ns;
        }
        None => {
            s.governors_t_ns = s.t_ns;
            let mut by_name: BTreeMap<String, Vec<u32>> = BTreeMap::new();
            // A governor name is one short word; anything else is not one.
            let word = |g: &str| {
                (!g.is_empty()
                    && g.len() <= 32
                    && g.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
                .then(|| g.to_string())
            };
            for (cpu, g) in per_cpu_cpufreq(root, &s.cpu_times, "scaling_governor", word) {
                by_name.entry(g).or_default().push(cpu);
            }
            s.governors = by_name
                .into_iter()
                .map(|(governor, cpus)| GovernorCpus { governor, cpus })
                .collect();
        }
    }
    s
}

/// One cpufreq file of each CPU in `/proc/stat`, read by `value` (given the
/// trimmed text); CPUs without it (no cpufreq: a VM) or with a value it
/// refuses are left out.
fn per_cpu_cpufreq<T>(
    root: &HostRoot,
    cpus: &[CpuTimes],
    file: &str,
    value: impl Fn(&str) -> Option<T>,
) -> Vec<(u32, T)> {
    cpus.iter()
        .filter_map(|c| {
            let p = HostPath::sys(&format!("devices/system/cpu/cpu{}/cpufreq/{file}", c.cpu));
            let text = root.read_text(&p).ok()?;
            Some((c.cpu, value(text.trim())?))
        })
        .collect()
}

/// One cpufreq governor and the CPUs that run it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GovernorCpus {
    /// `performance`, `powersave`, `schedutil`, `ondemand`…
    pub governor: String,
    pub cpus: Vec<u32>,
}

/// The vCPU threads' placement, run/wait time and context switches.
pub fn read_threads(root: &HostRoot, vm: &VmThreads, s: &mut Sample) {
    for &(vcpu, tid) in &vm.vcpus {
        let dir = format!("{}/task/{tid}", vm.pid);
        let stat = root
            .read_text(&HostPath::proc(&format!("{dir}/stat")))
            .ok()
            .and_then(|t| parse_task_stat(&t));
        let Some(stat) = stat else {
            s.problems.push(format!(
                "vCPU {vcpu} (thread {tid}): its /proc entry is gone or unreadable"
            ));
            continue;
        };
        let (run_ns, wait_ns, _) = root
            .read_text(&HostPath::proc(&format!("{dir}/schedstat")))
            .ok()
            .and_then(|t| parse_schedstat(&t))
            .unwrap_or_default();
        let (voluntary, involuntary) = root
            .read_text(&HostPath::proc(&format!("{dir}/status")))
            .ok()
            .and_then(|t| parse_ctxt_switches(&t))
            .unwrap_or_default();
        s.threads.push(ThreadSample {
            vcpu,
            tid,
            cpu: stat.processor,
            run_ns,
            wait_ns,
            voluntary,
            involuntary,
        });
    }
}
