//! Why a domain did not start, from libvirt's error and the domain's QEMU log
//! (`/var/log/libvirt/qemu/NAME.log`): the common failures of a passthrough
//! VM mapped to their cause and fix, each with the line it rests on. Pure:
//! text in, causes out. Where a failure means "this host cannot give that",
//! the cause carries the `Adaptation` that makes the domain start here (the
//! preflight applies it and says why).

mod msr;

use msr::msr_cause;
use serde::Serialize;

/// A change to the domain that makes it start on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Adaptation {
    /// `<cpu><feature policy='disable' name=…/>`: KVM here cannot give it.
    DisableCpuFeature(String),
    /// Drop a Hyper-V enlightenment KVM here refuses.
    DropHyperv(String),
    /// Drop a `<clock><timer>` (hypervclock) KVM here refuses.
    DropTimer(String),
    /// No System Management Mode: SMM off, and with it Secure Boot.
    SmmOff,
    /// UEFI firmware cannot run here: boot with SeaBIOS.
    Bios,
    /// No vhost-net here: virtio network in QEMU itself.
    NoVhost,
    /// No KVM here: QEMU emulates the CPU (`type='qemu'`, the most CPU TCG
    /// gives, no Hyper-V enlightenments — they are KVM's).
    Emulate,
}

/// One reason a start failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartCause {
    /// Stable id: `cpu.msr`, `smm`, `network.inactive`, …
    pub id: &'static str,
    pub title: String,
    /// The line of the log or error this rests on.
    pub evidence: String,
    pub why: String,
    pub fix: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapt: Option<Adaptation>,
}

/// The first line of `text` that contains `needle` (ASCII case-insensitive).
fn line_with<'a>(text: &'a str, needle: &str) -> Option<&'a str> {
    let needle = needle.to_ascii_lowercase();
    text.lines()
        .find(|l| l.to_ascii_lowercase().contains(&needle))
        .map(str::trim)
}

/// The quoted path after `word` in a line like `Could not open '/x': …`.
fn quoted(line: &str) -> Option<&str> {
    let start = line.find('\'')? + 1;
    let end = line[start..].find('\'')? + start;
    Some(&line[start..end])
}

fn cause(id: &'static str, title: String, evidence: &str, why: &str, fix: String) -> StartCause {
    StartCause {
        id,
        title,
        evidence: bounded(evidence),
        why: why.to_string(),
        fix,
        adapt: None,
    }
}

/// A log line kept short enough to show (a char boundary, not a byte count).
fn bounded(line: &str) -> String {
    const MAX_CHARS: usize = 300;
    if line.chars().count() <= MAX_CHARS {
        return line.to_string();
    }
    let mut s: String = line.chars().take(MAX_CHARS).collect();
    s.push('…');
    s
}

/// Every cause found in libvirt's error `message` and the QEMU `log`
/// (either may be empty), most specific first, each once.
pub fn explain(message: &str, log: &str) -> Vec<StartCause> {
    let text = format!("{message}\n{log}");
    let mut out: Vec<StartCause> = Vec::new();
    let mut push = |c: StartCause| {
        if !out.iter().any(|o| o.id == c.id && o.title == c.title) {
            out.push(c);
        }
    };
    if let Some(l) = line_with(&text, "failed to set msr") {
        push(msr_cause(l));
    }
    if let Some(l) = line_with(&text, "System Management Mode not supported") {
        let mut c = cause(
            "smm",
            "This host's KVM has no System Management Mode".into(),
            l,
            "Secure Boot firmware (OVMF with Secure Boot) runs its variable store in SMM, so libvirt asks for smm=on; this KVM (often a nested one, or a kernel built without CONFIG_KVM_SMM) cannot give it.",
            "Turn SMM off (<features><smm state='off'/>) and use the OVMF build without Secure Boot. Windows 11 then needs its Secure Boot check bypassed at install; on a bare-metal host with a normal kernel this does not happen.".into(),
        );
        c.adapt = Some(Adaptation::SmmOff);
        push(c);
    }
    if let Some(l) = line_with(&text, "KVM internal error") {
        let emulation = line_with(&text, "emulation failure").is_some();
        let mut c = cause(
            "kvm.internal",
            if emulation {
                "KVM could not emulate an instruction the guest ran, and stopped it".into()
            } else {
                "KVM stopped the guest with an internal error".into()
            },
            l,
            "The vCPU hit something KVM cannot run or emulate. Under nested virtualisation this is what UEFI firmware (OVMF) does when it runs from its flash: the outer hypervisor cannot emulate it. The guest sits paused with QEMU status 'internal-error'.",
            "On a nested host boot the guest with SeaBIOS (drop firmware='efi' and the loader) — fine for tests, not for Windows 11. On bare metal, update the kernel and QEMU and report the log.".into(),
        );
        if emulation {
            c.adapt = Some(Adaptation::Bios);
        }
        push(c);
    }
    if let Some(l) = line_with(&text, "is not active")
        && let Some(net) = l
            .find("network '")
            .and_then(|i| quoted(&l[i..]))
            .map(str::to_string)
    {
        push(cause(
            "network.inactive",
            format!("The libvirt network '{net}' is not running"),
            l,
            "The VM's network card is plugged into a libvirt network that has not been started (libvirt starts 'default' only when it is marked autostart).",
            format!(
                "Start it, and keep it started: `virsh net-start {net} && virsh net-autostart {net}` (a VM started from this tool tries that first, and says why when libvirt refuses)."
            ),
        ));
    }
    if let Some(l) = line_with(&text, "no network with matching name") {
        let net = quoted(l).unwrap_or("default").to_string();
        push(cause(
            "network.missing",
            format!("There is no libvirt network named '{net}'"),
            l,
            "The VM's network card names a libvirt network this host does not have.",
            format!(
                "Define it (for 'default': `virsh net-define /usr/share/libvirt/networks/default.xml`, then `virsh net-start {net}`), or give the VM a bridge or macvtap network instead."
            ),
        ));
    }
    for needle in [
        "unable to find any master var store",
        "nvram",
        "ovmf",
        "edk2",
        "pflash",
    ] {
        if let Some(l) = line_with(&text, needle)
            && (l.contains("No such file")
                || l.contains("unable to find")
                || l.contains("Could not open"))
        {
            push(cause(
                "firmware.missing",
                "The UEFI firmware or its variable store (NVRAM) file is missing".into(),
                l,
                "The domain names an OVMF code or VARS file (or a NVRAM copy) that is not on disk: the firmware package is missing, or the domain came from another distribution with other paths.",
                "Install OVMF (Debian/Ubuntu: ovmf; Fedora/Arch: edk2-ovmf) and let libvirt choose it: <os firmware='efi'> without explicit <loader>/<nvram> paths.".into(),
            ));
            break;
        }
    }
    if let Some(l) = line_with(&text, "vhost-net was requested") {
        let mut c = cause(
            "network.vhost",
            "This host has no vhost-net (/dev/vhost-net)".into(),
            l,
            "The domain asks for the in-kernel virtio network backend (vhost), which needs the vhost_net module; without it libvirt refuses the start.",
            "Load it (`modprobe vhost_net`, and name it in /etc/modules-load.d/ to keep it), or drop <driver name='vhost'/> from the interface (QEMU then does the network itself, a little slower).".into(),
        );
        c.adapt = Some(Adaptation::NoVhost);
        push(c);
    }
    if let Some(l) = line_with(&text, "is in use by driver") {
        push(cause(
            "hostdev.in_use",
            "A passed-through device is already in use by another VM".into(),
            l,
            "A PCI device can belong to one running VM at a time.",
            "Shut the other VM down first, or remove the device from one of them.".into(),
        ));
    }
    if let Some(l) = line_with(&text, "Device or resource busy")
        && (l.contains("vfio") || l.contains("PCI"))
    {
        push(cause(
            "hostdev.busy",
            "A passed-through device is busy: the host or another VM holds it".into(),
            l,
            "vfio could not take the device: a host driver still uses it (a GPU driving the desktop, an audio server on its HDMI function) or another QEMU has its group open.",
            "Bind it to vfio-pci before the VM starts (the Tuning page does it at boot; in a terminal: `vfio-assistant tune plan --only vfio-boot --gpu ADDRESS`), or stop what uses it; the Devices page shows which driver holds each device.".into(),
        ));
    }
    if let Some(l) = line_with(&text, "is not viable") {
        push(cause(
            "hostdev.group",
            "An IOMMU group is not viable: another device in it is still on a host driver".into(),
            l,
            "vfio hands over a whole IOMMU group or nothing; every device in the group (bridges aside) must be bound to vfio-pci or to no driver.",
            "Pass the whole group through (the Devices page shows each device's passthrough set; in a terminal: `vfio-assistant scan`) or bind its other members to vfio-pci; with managed='yes' libvirt binds only the devices the domain lists.".into(),
        ));
    }
    if let Some(l) = line_with(&text, "no iommu_group found")
        .or_else(|| line_with(&text, "No available IOMMU models"))
    {
        push(cause(
            "hostdev.no_iommu",
            "The kernel has no IOMMU groups, so vfio cannot take the device".into(),
            l,
            "Without the IOMMU on (firmware and kernel), devices have no groups and cannot be given to a VM.",
            "Turn the IOMMU on in the firmware and on the kernel command line (`vfio-assistant check` says which setting), then reboot.".into(),
        ));
    }
    if let Some(l) = line_with(&text, "Could not access KVM kernel module")
        .or_else(|| line_with(&text, "failed to initialize kvm"))
    {
        let denied = l.contains("Permission denied");
        push(cause(
            if denied { "kvm.denied" } else { "kvm.missing" },
            if denied {
                "QEMU may not open /dev/kvm".into()
            } else {
                "There is no KVM on this host (/dev/kvm is missing)".into()
            },
            l,
            if denied {
                "QEMU runs as its own user, which must be able to open /dev/kvm (the kvm group)."
            } else {
                "The KVM module is not loaded, or the firmware has VT-x/AMD-V (SVM) turned off."
            },
            if denied {
                "Make /dev/kvm usable by the qemu user: it must be group kvm with mode 0660 and the qemu user in that group (udev does this on a desktop; `ls -l /dev/kvm`).".into()
            } else {
                "Turn on VT-x (Intel) or SVM Mode (AMD) in the firmware and load kvm_intel or kvm_amd (`vfio-assistant check` says which).".into()
            },
        ));
    }
    if let Some(l) = line_with(&text, "/dev/vfio/")
        && l.contains("Permission denied")
    {
        push(cause(
            "vfio.denied",
            "QEMU may not open the device's /dev/vfio group file".into(),
            l,
            "Each IOMMU group has a /dev/vfio/N file; with managed='yes' libvirt gives it to QEMU's user. Without that (a session connection, managed='no'), QEMU cannot open it.",
            "Use qemu:///system with managed='yes' hostdevs (the generated domain does), or give the qemu user the group file.".into(),
        ));
    }
    if let Some(l) = line_with(&text, "Insufficient free host memory pages")
        .or_else(|| line_with(&text, "unable to map backing store for guest RAM"))
        .or_else(|| line_with(&text, "usable hugetlbfs mount"))
    {
        push(cause(
            "memory.hugepages",
            "Not enough hugepages (or memory) for the guest's RAM".into(),
            l,
            "The domain backs its memory with hugepages, and fewer are free than the guest needs; the kernel reserves them separately from normal memory.",
            "Reserve enough pages before the start (`vfio-assistant tune plan --memory SIZE` shows how), or remove <hugepages> from <memoryBacking>.".into(),
        ));
    }
    if let Some(l) = line_with(&text, "Cannot allocate memory")
        && (l.contains("vfio") || l.contains("DMA"))
    {
        push(cause(
            "memory.lock",
            "vfio could not pin the guest's memory".into(),
            l,
            "A VM with a device passed through pins all of its RAM; the host has too little free memory, or the locked-memory limit is lower than the guest's RAM (a session connection).",
            "Give the VM less memory or free some on the host; use qemu:///system, whose QEMU may lock the memory.".into(),
        ));
    }
    for needle in ["Could not open '", "Cannot access storage file '"] {
        if let Some(l) = line_with(&text, needle) {
            let path = l
                .find(needle)
                .and_then(|i| quoted(&l[i..]))
                .unwrap_or("")
                .to_string();
            if l.contains("Permission denied") {
                push(cause(
                    "file.denied",
                    format!("QEMU may not read {path}"),
                    l,
                    "QEMU runs as its own user. libvirt gives it the image file, but not the folders above it: a folder it cannot enter (a home folder with mode 0700) stops it.",
                    format!(
                        "Move the file under /var/lib/libvirt/images, or let others enter the folders above it (`chmod o+x` on each), for {path}."
                    ),
                ));
            } else if l.contains("No such file") {
                push(cause(
                    "file.missing",
                    format!("{path} does not exist"),
                    l,
                    "The domain names a disk or ISO file that is not there (moved, renamed, or a relative path).",
                    "Give the absolute path of an existing file (`vfio-assistant domain validate FILE` checks every file).".into(),
                ));
            }
        }
    }
    if let Some(l) = line_with(&text, "swtpm") {
        push(cause(
            "tpm.swtpm",
            "The emulated TPM (swtpm) did not start".into(),
            l,
            "A TPM 2.0 device is emulated by swtpm, which libvirt starts next to QEMU; it is missing or could not write its state.",
            "Install swtpm and swtpm-tools (Debian/Ubuntu) or swtpm (Fedora, Arch).".into(),
        ));
    }
    out
}

/// The tail of a QEMU log for one start: from the last `starting up` line on
/// (each start appends to the same file), at most `max_bytes` of it.
pub fn last_start(log: &str, max_bytes: usize) -> &str {
    let from = log
        .rfind("starting up")
        .map_or(0, |i| log[..i].rfind('\n').map_or(0, |n| n + 1));
    let tail = &log[from..];
    if tail.len() <= max_bytes {
        return tail;
    }
    let mut cut = tail.len() - max_bytes;
    while !tail.is_char_boundary(cut) {
        cut += 1;
    }
    &tail[cut..]
}

#[cfg(test)]
mod tests {
    use super::*;

    // Seen on this project's CI machine (AMD EPYC, nested KVM, Debian 12
    // QEMU 7.2), /var/log/libvirt/qemu/NAME.log.
    const MSR: &str = "2026-12-01T20:23:02.199362Z qemu-system-x86_64: error: failed to set MSR 0x10a to 0x400000000c000069\nqemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.";
    const SMM: &str = "2026-12-01T20:23:13.707872Z qemu-system-x86_64: System Management Mode not supported by this hypervisor.";

    #[test]
    fn msr_0x10a_disables_arch_capabilities() {
        let c = explain("internal error: qemu unexpectedly closed the monitor", MSR);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].id, "cpu.msr");
        assert_eq!(
            c[0].adapt,
            Some(Adaptation::DisableCpuFeature("arch-capabilities".into()))
        );
        assert!(c[0].evidence.contains("0x10a"));
    }

    #[test]
    fn hyperv_msr_drops_the_enlightenment() {
        let c = explain(
            "",
            "qemu-system-x86_64: error: failed to set MSR 0x40000021 to 0x0",
        );
        assert_eq!(
            c[0].adapt,
            Some(Adaptation::DropTimer("hypervclock".into()))
        );
        let c = explain(
            "",
            "qemu-system-x86_64: error: failed to set MSR 0x400000b2 to 0x0",
        );
        assert_eq!(c[0].adapt, Some(Adaptation::DropHyperv("stimer".into())));
    }

    #[test]
    fn smm_turns_smm_off() {
        let c = explain(SMM, "");
        assert_eq!(c[0].id, "smm");
        assert_eq!(c[0].adapt, Some(Adaptation::SmmOff));
    }

    #[test]
    fn each_common_failure_has_its_cause() {
        let cases = [
            (
                "Requested operation is not valid: network 'default' is not active",
                "network.inactive",
            ),
            (
                "Network not found: no network with matching name 'lan'",
                "network.missing",
            ),
            (
                "operation failed: unable to find any master var store for loader: /usr/share/OVMF/OVMF_CODE.fd",
                "firmware.missing",
            ),
            (
                "Requested operation is not valid: PCI device 0000:01:00.0 is in use by driver QEMU, domain win10",
                "hostdev.in_use",
            ),
            (
                "vfio 0000:0a:00.0: group 15 is not viable\nPlease ensure all devices within the iommu_group are bound to their vfio bus driver.",
                "hostdev.group",
            ),
            (
                "Could not access KVM kernel module: Permission denied\nqemu-system-x86_64: failed to initialize kvm: Permission denied",
                "kvm.denied",
            ),
            (
                "vfio 0000:01:00.0: failed to open /dev/vfio/15: Permission denied",
                "vfio.denied",
            ),
            (
                "qemu-system-x86_64: os_mem_prealloc: Insufficient free host memory pages available to allocate guest RAM",
                "memory.hugepages",
            ),
            (
                "Could not open '/home/ana/Win11.iso': Permission denied",
                "file.denied",
            ),
            (
                "Cannot access storage file '/srv/virtio-win.iso': No such file or directory",
                "file.missing",
            ),
            (
                "vfio 0000:01:00.0: failed to open /dev/vfio/1: Device or resource busy",
                "hostdev.busy",
            ),
        ];
        for (text, id) in cases {
            let c = explain(text, "");
            assert!(c.iter().any(|c| c.id == id), "{text}: {c:?}");
        }
    }

    #[test]
    fn nested_uefi_emulation_failure_falls_back_to_bios() {
        let log = "KVM internal error. Suberror: 1\nextra data[0]: 0x0000000000000001\nemulation failure\nEAX=00000000";
        let c = explain("", log);
        assert_eq!(c[0].id, "kvm.internal");
        assert_eq!(c[0].adapt, Some(Adaptation::Bios));
    }

    #[test]
    fn unknown_text_has_no_cause() {
        assert!(explain("something else went wrong", "").is_empty());
    }

    #[test]
    fn last_start_takes_the_latest_run_only() {
        let log = "2026 starting up libvirt\nold failure\n2026 starting up libvirt\nnew\n";
        assert_eq!(last_start(log, 1000), "2026 starting up libvirt\nnew\n");
        assert_eq!(last_start("é".repeat(10).as_str(), 3).len(), 2);
    }
}
