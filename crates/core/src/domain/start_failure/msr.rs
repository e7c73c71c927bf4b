//! "failed to set MSR 0x…": which CPU feature or Hyper-V enlightenment the
//! MSR belongs to, and the change to the domain that starts it on this host.

use super::{Adaptation, StartCause, cause};

/// MSRs QEMU sets for a CPU feature, and the libvirt feature name that turns
/// them off (Intel SDM vol. 4; Hyper-V TLFS for 0x4000_00xx).
const MSR_FEATURES: &[(u32, &str, &str)] = &[
    (0x10a, "arch-capabilities", "IA32_ARCH_CAPABILITIES"),
    (0x48, "spec-ctrl", "IA32_SPEC_CTRL"),
    (0x122, "tsx-ctrl", "IA32_TSX_CTRL"),
    (0x1a0, "mpx", "IA32_MISC_ENABLE"),
    (0xc0011029, "amd-ssbd", "AMD DE_CFG"),
    (0x6e0, "tsc-deadline", "IA32_TSC_DEADLINE"),
    (0x3b, "tsc-adjust", "IA32_TSC_ADJUST"),
    (0xda0, "xsaves", "IA32_XSS"),
];

/// Hyper-V synthetic MSRs (Hyper-V TLFS, "Partition and VP MSRs") and what
/// in the domain asks for them: an enlightenment under `<features><hyperv>`,
/// or the `hypervclock` timer (the reference TSC page, 0x40000020/21).
const HYPERV_MSRS: &[(u32, u32, HypervUser)] = &[
    (0x40000002, 0x40000002, HypervUser::Feature("vpindex")),
    (0x40000003, 0x40000003, HypervUser::Feature("reset")),
    (0x40000010, 0x40000010, HypervUser::Feature("runtime")),
    (0x40000020, 0x40000021, HypervUser::Timer("hypervclock")),
    (0x40000022, 0x40000023, HypervUser::Feature("frequencies")),
    (0x40000070, 0x40000073, HypervUser::Feature("vapic")),
    (0x40000080, 0x4000009f, HypervUser::Feature("synic")),
    (0x400000b0, 0x400000b7, HypervUser::Feature("stimer")),
    (0x40000100, 0x40000105, HypervUser::Feature("crash")),
    (
        0x40000106,
        0x40000108,
        HypervUser::Feature("reenlightenment"),
    ),
];

#[derive(Debug, Clone, Copy)]
enum HypervUser {
    Feature(&'static str),
    Timer(&'static str),
}

/// The number after `MSR 0x` on a `failed to set MSR 0x10a to …` line.
fn msr_number(line: &str) -> Option<u32> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find("msr 0x")? + "msr 0x".len();
    let hex: String = lower[at..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    u32::from_str_radix(&hex, 16).ok()
}

pub(super) fn msr_cause(line: &str) -> StartCause {
    let msr = msr_number(line);
    if let Some(m) = msr
        && let Some((_, _, user)) = HYPERV_MSRS
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&m))
    {
        let (what, fix, adapt) = match user {
            HypervUser::Feature(f) => (
                format!("the '{f}' enlightenment"),
                format!(
                    "Drop '{f}' from <features><hyperv> (tuning the domain, on the CPU page or with `vfio-assistant domain tune NAME` in a terminal, keeps only what this host offers)."
                ),
                Adaptation::DropHyperv((*f).to_string()),
            ),
            HypervUser::Timer(t) => (
                format!("the '{t}' timer"),
                format!("Remove <timer name='{t}'/> from <clock>."),
                Adaptation::DropTimer((*t).to_string()),
            ),
        };
        let mut c = cause(
            "cpu.hyperv",
            format!("KVM here refuses the Hyper-V register 0x{m:x} that {what} needs"),
            line,
            "QEMU sets a Hyper-V enlightenment's register when the vCPU starts; this host's KVM (often a nested one) does not emulate it, so QEMU stops.",
            fix,
        );
        c.adapt = Some(adapt);
        return c;
    }
    let known = msr.and_then(|m| MSR_FEATURES.iter().find(|(n, _, _)| *n == m));
    match known {
        Some((m, feature, reg)) => {
            let mut c = cause(
                "cpu.msr",
                format!("KVM here cannot set MSR 0x{m:x} ({reg}), which the '{feature}' CPU feature needs"),
                line,
                "With host-passthrough QEMU gives the guest every CPU feature KVM lists, and sets their registers when the vCPU starts. On a nested or older host KVM lists a feature it then refuses to set (here the CPU itself lacks it), so QEMU aborts.",
                format!(
                    "Turn the feature off for this guest: <cpu mode='host-passthrough'><feature policy='disable' name='{feature}'/></cpu> (the preflight does it). The guest only loses a register that this host cannot back anyway."
                ),
            );
            c.adapt = Some(Adaptation::DisableCpuFeature((*feature).to_string()));
            c
        }
        None => cause(
            "cpu.msr",
            match msr {
                Some(m) => format!("KVM here cannot set MSR 0x{m:x}"),
                None => "KVM here cannot set a CPU register (MSR)".into(),
            },
            line,
            "QEMU gives the guest a CPU feature whose register this host's KVM will not set.",
            "Find the feature that owns this MSR and disable it in <cpu> (<feature policy='disable' name='…'/>), or use <cpu mode='host-model'>.".into(),
        ),
    }
}
