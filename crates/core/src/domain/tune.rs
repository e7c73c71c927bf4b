//! Typed edits that tune an existing domain for a passthrough gaming VM, each
//! with the one-line "why" the UI and the CLI show. Everything the edits do not
//! name stays as the user wrote it (the document is lossless).

use super::xml::{Document, Element};
use crate::parse::cpulist::format_cpulist;
use crate::pinning::PinPlan;
use serde::Serialize;

/// One change made, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Edit {
    /// The element path touched, e.g. `devices/memballoon`.
    pub path: String,
    pub what: String,
    pub why: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TuneError {
    #[error("the root element is <{0}>, not <domain>: this is not a libvirt domain")]
    NotADomain(String),
    #[error("the domain has no <{0}> element and one could not be added")]
    Missing(String),
}

/// Which tunings to apply; the defaults are what a Windows gaming VM wants.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// CPU pinning and the guest topology from a plan.
    pub plan: Option<PinPlan>,
    pub memballoon_off: bool,
    pub cpu_host_passthrough: bool,
    pub hyperv: bool,
    /// The Hyper-V enlightenments the host offers (from its domain
    /// capabilities); `None` when unknown: then the usual set is used.
    pub hyperv_supported: Option<Vec<String>>,
    pub timers: bool,
    /// Hide the hypervisor from the guest (kvm hidden + a Hyper-V vendor_id):
    /// only NVIDIA drivers before 465 need it (Code 43). Off by default.
    pub hide_kvm: bool,
    /// The guest agent's port (`org.qemu.guest_agent.0`), added where the
    /// domain has none: the checks inside the VM read through it.
    pub guest_agent: bool,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            plan: None,
            memballoon_off: true,
            cpu_host_passthrough: true,
            hyperv: true,
            hyperv_supported: None,
            timers: true,
            hide_kvm: false,
            guest_agent: true,
        }
    }
}

/// The Hyper-V enlightenments Windows uses, with what each spares the VM.
/// (Without the host's domain capabilities, this is the set libvirt and QEMU
/// have supported for years.) With capabilities, anything the host does not
/// list is left out (and whatever needs it: synic/stimer/tlbflush/ipi need
/// vpindex), and `avic` is added when listed (AMD). Deliberately not set:
/// `evmcs` (only for a hypervisor nested inside the guest — WSL2, VBS — and it
/// needs VMX exposed), `reenlightenment` (for live migration, which a VM with a
/// passed-through GPU cannot do), `vendor_id` (only with `hide_kvm`). Other
/// choices written down here: `<memoryBacking><locked/>` is not set, because
/// VFIO pins all guest memory anyway and `locked` needs a memtune hard_limit;
/// the CPUID hypervisor bit is not cleared, because Windows then stops using
/// these enlightenments; invtsc comes with `migratable='off'` host-passthrough.
/// (element, extra attributes, what it spares the VM).
pub type Enlightenment = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

pub const HYPERV: &[Enlightenment] = &[
    (
        "relaxed",
        &[],
        "Windows stops treating a late timer as a hardware fault",
    ),
    (
        "vapic",
        &[],
        "interrupt controller accesses without VM exits",
    ),
    (
        "spinlocks",
        &[("retries", "8191")],
        "a vCPU spinning on a lock yields instead of burning time",
    ),
    ("vpindex", &[], "needed by synic and tlbflush"),
    ("runtime", &[], "the guest sees how long it really ran"),
    ("synic", &[], "synthetic interrupts, needed by stimer"),
    (
        "stimer",
        &[],
        "synthetic timers instead of polling: far fewer exits on an idle desktop",
    ),
    ("reset", &[], "the guest can reset itself cleanly"),
    (
        "frequencies",
        &[],
        "TSC and APIC frequencies without calibration loops",
    ),
    (
        "tlbflush",
        &[],
        "remote TLB flushes without interrupting every vCPU",
    ),
    (
        "ipi",
        &[],
        "inter-processor interrupts in one call instead of many exits",
    ),
];

fn set(el: &mut Element, attrs: &[(&str, &str)]) {
    for (k, v) in attrs {
        el.set_attr(k, v);
    }
}

/// The child element named `name` with attribute `key=value`, created when absent.
fn child_where<'a>(
    parent: &'a mut Element,
    name: &'a str,
    key: &str,
    value: &str,
) -> Option<&'a mut Element> {
    let exists = parent
        .elements()
        .any(|e| e.name == name && e.attr(key) == Some(value));
    if !exists {
        let mut el = Element::new(name);
        el.set_attr(key, value);
        parent.append_child(el);
    }
    parent
        .children_named_mut(name)
        .find(|e| e.attr(key) == Some(value))
}

fn need<'a>(el: Option<&'a mut Element>, name: &str) -> Result<&'a mut Element, TuneError> {
    el.ok_or_else(|| TuneError::Missing(name.to_string()))
}

/// Apply the tunings `opts` asks for. Each comes back as an `Edit` only when
/// it changed the document: a domain that already has it is said to have
/// nothing to change, and `--diff` and the list of changes agree.
pub fn tune(doc: &mut Document, opts: &TuneOptions) -> Result<Vec<Edit>, TuneError> {
    if doc.root.name != "domain" {
        return Err(TuneError::NotADomain(doc.root.name.clone()));
    }
    let mut edits = Vec::new();
    let mut current = doc.serialize();
    if let Some(plan) = &opts.plan {
        step(doc, &mut current, &mut edits, |r, e| pin(r, plan, e))?;
    }
    if opts.cpu_host_passthrough {
        step(doc, &mut current, &mut edits, |r, e| {
            cpu(r, opts.plan.as_ref(), e)
        })?;
    }
    if opts.memballoon_off {
        step(doc, &mut current, &mut edits, memballoon)?;
    }
    if opts.hyperv {
        step(doc, &mut current, &mut edits, |r, e| {
            hyperv(r, opts.hyperv_supported.as_deref(), e)
        })?;
    }
    if opts.timers {
        step(doc, &mut current, &mut edits, timers)?;
    }
    if opts.hide_kvm {
        step(doc, &mut current, &mut edits, |r, e| {
            hide_kvm(r, opts.hyperv_supported.as_deref(), e)
        })?;
    }
    if opts.guest_agent {
        step(doc, &mut current, &mut edits, agent_channel)?;
    }
    Ok(edits)
}

/// The name of the guest agent's virtio port.
pub const AGENT_PORT: &str = "org.qemu.guest_agent.0";

/// The guest agent's port, unless the domain has one (of any type: a user's
/// own socket path stays). libvirt makes the socket.
fn agent_channel(root: &mut Element, edits: &mut Vec<Edit>) -> Result<(), TuneError> {
    let devices = need(root.child_or_insert("devices"), "devices")?;
    let has = devices.elements().any(|e| {
        e.name == "channel" && e.child("target").and_then(|t| t.attr("name")) == Some(AGENT_PORT)
    });
    if has {
        return Ok(());
    }
    let mut ch = Element::new("channel");
    ch.set_attr("type", "unix");
    let mut target = Element::new("target");
    target.set_attr("type", "virtio");
    target.set_attr("name", AGENT_PORT);
    ch.append_child(target);
    devices.append_child(ch);
    edits.push(Edit {
        path: "devices/channel".into(),
        what: format!("the guest agent's port ({AGENT_PORT})"),
        why: "Lets the host ask Windows what it sees — its version, the GPU's driver, a Code 43, MSI mode — and shut it down cleanly; the guest tools' QEMU Guest Agent answers on it.".into(),
    });
    Ok(())
}

/// One tuning on a copy; kept (with its edits) only if the text changed.
fn step(
    doc: &mut Document,
    current: &mut String,
    edits: &mut Vec<Edit>,
    f: impl FnOnce(&mut Element, &mut Vec<Edit>) -> Result<(), TuneError>,
) -> Result<(), TuneError> {
    let mut trial = doc.clone();
    let mut mine = Vec::new();
    f(&mut trial.root, &mut mine)?;
    trial.indent_new_elements();
    let text = trial.serialize();
    if text != *current {
        *doc = trial;
        *current = text;
        edits.extend(mine);
    }
    Ok(())
}

fn cpu(root: &mut Element, plan: Option<&PinPlan>, edits: &mut Vec<Edit>) -> Result<(), TuneError> {
    let cpu = need(root.child_or_insert("cpu"), "cpu")?;
    set(
        cpu,
        &[
            ("mode", "host-passthrough"),
            ("check", "none"),
            ("migratable", "off"),
        ],
    );
    need(cpu.child_or_insert("cache"), "cache")?.set_attr("mode", "passthrough");
    if let Some(plan) = plan {
        let g = plan.guest;
        let topo = need(cpu.child_or_insert("topology"), "topology")?;
        set(
            topo,
            &[
                ("sockets", &g.sockets.to_string()),
                ("dies", &g.dies.to_string()),
                ("cores", &g.cores.to_string()),
                ("threads", &g.threads.to_string()),
            ],
        );
        if plan.topoext {
            set(
                need(child_where(cpu, "feature", "name", "topoext"), "feature")?,
                &[("policy", "require")],
            );
        }
    }
    edits.push(Edit {
        path: "cpu".into(),
        what: "host-passthrough CPU, cache passthrough, check none".into(),
        why: "The guest sees the real CPU model and cache layout, so games and Windows pick the right code paths; 'check none' stops libvirt refusing it over flags.".into(),
    });
    Ok(())
}

fn memballoon(root: &mut Element, edits: &mut Vec<Edit>) -> Result<(), TuneError> {
    let devices = need(root.child_or_insert("devices"), "devices")?;
    let balloons: Vec<&Element> = devices
        .elements()
        .filter(|e| e.name == "memballoon")
        .collect();
    if balloons.len() == 1
        && balloons[0].attr("model") == Some("none")
        && balloons[0].elements().next().is_none()
    {
        return Ok(());
    }
    devices.remove_children("memballoon");
    let mut mb = Element::new("memballoon");
    mb.set_attr("model", "none");
    devices.append_child(mb);
    edits.push(Edit {
        path: "devices/memballoon".into(),
        what: "memballoon model='none'".into(),
        why: "With a GPU passed through, all guest memory is pinned: a balloon cannot reclaim any, it only adds a device and polling.".into(),
    });
    Ok(())
}

fn hyperv(
    root: &mut Element,
    supported: Option<&[String]>,
    edits: &mut Vec<Edit>,
) -> Result<(), TuneError> {
    let features = need(root.child_or_insert("features"), "features")?;
    let hv = need(features.child_or_insert("hyperv"), "hyperv")?;
    if hv.attr("mode") == Some("passthrough") {
        edits.push(Edit {
            path: "features/hyperv".into(),
            what: "kept Hyper-V mode='passthrough'".into(),
            why: "Passthrough mode already gives Windows every enlightenment the host supports; listing them one by one is not allowed alongside it.".into(),
        });
        return Ok(());
    }
    if hv.attr("mode").is_none() {
        hv.set_attr("mode", "custom");
    }
    let has = |n: &str| supported.is_none_or(|s| s.iter().any(|f| f == n));
    // KVM refuses an enlightenment whose prerequisites are off.
    let needs = |n: &str| -> &'static [&'static str] {
        match n {
            "synic" | "tlbflush" | "ipi" => &["vpindex"],
            "stimer" => &["synic", "vpindex"],
            _ => &[],
        }
    };
    let offered = |n: &str| has(n) && needs(n).iter().all(|d| has(d));
    let mut names = Vec::new();
    let mut missing = Vec::new();
    for (name, extra, _) in HYPERV {
        if !offered(name) {
            missing.push(*name);
            continue;
        }
        let el = need(hv.child_or_insert(name), name)?;
        el.set_attr("state", "on");
        set(el, extra);
        names.push(*name);
    }
    // AVIC (AMD) only when the host's capabilities list it: unknown is not yes.
    if supported.is_some_and(|s| s.iter().any(|f| f == "avic")) {
        need(hv.child_or_insert("avic"), "avic")?.set_attr("state", "on");
        names.push("avic");
    }
    if names.is_empty() {
        features.remove_children("hyperv");
    }
    let mut why = String::from(
        "Windows talks to a hypervisor it recognises through these paravirtual shortcuts instead of emulated hardware: fewer VM exits, steadier frame times.",
    );
    if !missing.is_empty() {
        why.push_str(&format!(
            " Left out because this host's KVM does not offer them (domain capabilities): {}.",
            missing.join(", ")
        ));
    }
    edits.push(Edit {
        path: "features/hyperv".into(),
        what: if names.is_empty() {
            "no Hyper-V enlightenments (the host offers none of them)".into()
        } else {
            format!("Hyper-V enlightenments: {}", names.join(", "))
        },
        why,
    });
    Ok(())
}

fn timers(root: &mut Element, edits: &mut Vec<Edit>) -> Result<(), TuneError> {
    let clock = need(root.child_or_insert("clock"), "clock")?;
    if clock.attr("offset").is_none() {
        clock.set_attr("offset", "localtime");
    }
    set(
        need(child_where(clock, "timer", "name", "rtc"), "timer")?,
        &[("tickpolicy", "catchup")],
    );
    let pit = need(child_where(clock, "timer", "name", "pit"), "timer")?;
    set(pit, &[("tickpolicy", "delay")]);
    // <catchup> tunes the catchup policy only; with delay it is invalid.
    pit.remove_children("catchup");
    set(
        need(child_where(clock, "timer", "name", "hpet"), "timer")?,
        &[("present", "no")],
    );
    set(
        need(child_where(clock, "timer", "name", "hypervclock"), "timer")?,
        &[("present", "yes")],
    );
    edits.push(Edit {
        path: "clock".into(),
        what: "rtc catchup, pit delay, hpet off, hypervclock on".into(),
        why: "Windows keeps time from the Hyper-V clock; the emulated HPET is slow and a source of DPC latency, and lost PIT/RTC ticks are replayed instead of skewing time. (The documented alternative on a host with a stable, invariant TSC: <timer name='tsc' present='yes' mode='native'/> instead of hypervclock.)".into(),
    });
    Ok(())
}

fn pin(root: &mut Element, plan: &PinPlan, edits: &mut Vec<Edit>) -> Result<(), TuneError> {
    let vcpu = need(root.child_or_insert("vcpu"), "vcpu")?;
    vcpu.set_text(&plan.vcpus.to_string());
    vcpu.set_attr("placement", "static");
    need(
        root.child_or_insert_after("iothreads", &["vcpu"]),
        "iothreads",
    )?
    .set_text("1");
    let cputune = need(
        root.child_or_insert_after("cputune", &["iothreads", "vcpu"]),
        "cputune",
    )?;
    for name in ["vcpupin", "emulatorpin", "iothreadpin", "vcpusched"] {
        cputune.remove_children(name);
    }
    for (v, c) in &plan.vcpupin {
        let mut el = Element::new("vcpupin");
        el.set_attr("vcpu", &v.to_string());
        el.set_attr("cpuset", &c.to_string());
        cputune.append_child(el);
    }
    let mut emu = Element::new("emulatorpin");
    emu.set_attr("cpuset", &format_cpulist(&plan.emulatorpin));
    cputune.append_child(emu);
    let mut io = Element::new("iothreadpin");
    io.set_attr("iothread", "1");
    io.set_attr("cpuset", &format_cpulist(&plan.iothreadpin));
    cputune.append_child(io);
    if plan.vcpusched_fifo {
        let mut s = Element::new("vcpusched");
        s.set_attr("vcpus", &format!("0-{}", plan.vcpus.saturating_sub(1)));
        s.set_attr("scheduler", "fifo");
        s.set_attr("priority", "1");
        cputune.append_child(s);
    }
    if !plan.numa_nodes.is_empty() {
        let nt = need(
            root.child_or_insert_after("numatune", &["cputune"]),
            "numatune",
        )?;
        let mem = need(nt.child_or_insert("memory"), "memory")?;
        mem.set_attr("mode", "strict");
        // placement='auto' asks numad to choose; an explicit nodeset replaces it.
        mem.remove_attr("placement");
        mem.set_attr("nodeset", &format_cpulist(&plan.numa_nodes));
    }
    edits.push(Edit {
        path: "cputune".into(),
        what: format!(
            "{} vCPUs pinned to CPUs {}, emulator and iothread on {}",
            plan.vcpus,
            format_cpulist(&plan.vm_cpus),
            format_cpulist(&plan.emulatorpin)
        ),
        why: plan
            .reasons
            .first()
            .cloned()
            .unwrap_or_else(|| "Each vCPU keeps its own host thread and cache.".into()),
    });
    Ok(())
}

fn hide_kvm(
    root: &mut Element,
    supported: Option<&[String]>,
    edits: &mut Vec<Edit>,
) -> Result<(), TuneError> {
    let features = need(root.child_or_insert("features"), "features")?;
    let kvm = need(features.child_or_insert("kvm"), "kvm")?;
    need(kvm.child_or_insert("hidden"), "hidden")?.set_attr("state", "on");
    let vendor = supported.is_none_or(|s| s.iter().any(|f| f == "vendor_id"));
    let passthrough = features
        .child("hyperv")
        .is_some_and(|h| h.attr("mode") == Some("passthrough"));
    if vendor && !passthrough {
        let hv = need(features.child_or_insert("hyperv"), "hyperv")?;
        if hv.attr("mode").is_none() {
            hv.set_attr("mode", "custom");
        }
        let v = need(hv.child_or_insert("vendor_id"), "vendor_id")?;
        v.set_attr("state", "on");
        // Any 12 characters other than KVM's own signature.
        if v.attr("value").is_none() {
            v.set_attr("value", "0123456789ab");
        }
    }
    edits.push(Edit {
        path: "features/kvm".into(),
        what: if vendor && !passthrough {
            "kvm hidden, Hyper-V vendor_id set".into()
        } else {
            "kvm hidden".into()
        },
        why: "NVIDIA drivers before 465 stopped with Code 43 when they saw a hypervisor; hiding KVM's signature (and Hyper-V's vendor id) lets them load. Newer drivers do not need it.".into(),
    });
    Ok(())
}

/// A unified diff of two texts (for `domain tune --diff`).
pub fn diff(before: &str, after: &str, name: &str) -> String {
    diff_labeled(before, after, name, &format!("{name} (tuned)"))
}

/// A unified diff with both headers given.
pub fn diff_labeled(before: &str, after: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(2)
        .header(old, new)
        .to_string()
}
