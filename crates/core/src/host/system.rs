//! The rest of the host that the prerequisite checks need: the kernel log lines
//! about IOMMU/KVM/VFIO, framebuffers in `/proc/iomem`, modprobe and bootloader
//! configuration, memory fragmentation, KSM, KVM/VFIO module parameters, device
//! nodes, cgroup controllers, IRQ affinities, firmware images and libvirt's
//! socket and hooks. Everything optional: what cannot be read says why.

mod parse;

pub use parse::{
    BuddyZone, IomemRange, grub_cmdline, parse_buddyinfo, parse_iomem_framebuffers, parse_kmsg,
};

use super::cpuset::read_cpuset;
use super::initramfs::{InitramfsState, read_state};
use super::warnings::Warnings;
use crate::parse::cmdline::{Cmdline, parse_cmdline};
use crate::parse::interrupts::{VfioIrq, parse_interrupts, vfio_irqs};
use crate::sysroot::{HostPath, HostRoot, ReadError};
use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KernelLog {
    pub readable: bool,
    /// Why not, when not (e.g. not root with dmesg_restrict).
    pub reason: Option<String>,
    /// Messages about IOMMU, KVM, VFIO and framebuffers, oldest first.
    pub lines: Vec<String>,
}

impl KernelLog {
    pub fn find(&self, needle: &str) -> Option<&str> {
        self.lines
            .iter()
            .find(|l| l.contains(needle))
            .map(String::as_str)
    }
}

/// libvirt's hook scripts: `/etc/libvirt/hooks/DRIVER`, and since libvirt
/// 6.5 every script in `/etc/libvirt/hooks/DRIVER.d/` (where our hooks
/// are). A folder is walked, never judged as a script (a `qemu.d` folder is
/// not a hook that fails to run); at most 256 are looked at.
fn hook_files(root: &HostRoot) -> Vec<HookFile> {
    let dir = HostPath::etc("libvirt/hooks");
    let file = |p: HostPath| HookFile {
        executable: root.is_executable(&p),
        lends: if p.to_string().ends_with("/qemu.d/vfio-assistant-shared-gpu") {
            lent_functions(root, &p)
        } else {
            Vec::new()
        },
        path: p.to_string(),
    };
    let mut out = Vec::new();
    for n in root.list_dir(&dir).unwrap_or_default() {
        let p = dir.join(&n);
        if root.is_dir(&p) {
            if n.ends_with(".d") {
                let mut inner = root.list_dir(&p).unwrap_or_default();
                inner.sort();
                out.extend(inner.into_iter().map(|m| file(p.join(&m))).filter(|h| {
                    HostPath::from_absolute(&h.path).is_some_and(|q| !root.is_dir(&q))
                }));
            }
        } else {
            out.push(file(p));
        }
    }
    out.truncate(256);
    out
}

/// The functions our shared-GPU hook lends (`FUNCS='A B'`), PCI addresses
/// only.
fn lent_functions(root: &HostRoot, p: &HostPath) -> Vec<String> {
    let text = root.read_text(p).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("FUNCS='")?.strip_suffix('\''))
        .map(|f| {
            f.split_whitespace()
                .filter(|a| crate::host::pci::is_pci_address(a))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigLine {
    pub file: String,
    pub line: String,
}

/// A kernel command line the bootloader is configured to use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootCmdline {
    pub source: String,
    pub cmdline: Cmdline,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqAffinity {
    pub irq: u32,
    pub cpus: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookFile {
    pub path: String,
    pub executable: bool,
    /// For our shared-GPU hook: the functions it lends to the VM at its
    /// start (its `FUNCS` line).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lends: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SystemState {
    pub kernel_log: KernelLog,
    pub iomem_framebuffers: Vec<IomemRange>,
    /// vfio/kvm/blacklist/softdep lines from `/etc/modprobe.d`.
    pub modprobe: Vec<ConfigLine>,
    pub boot_cmdlines: Vec<BootCmdline>,
    pub buddyinfo: Vec<BuddyZone>,
    /// `sys/kernel/mm/ksm/run`: 1 = merging pages.
    pub ksm_run: Option<u8>,
    pub kvm_ignore_msrs: Option<bool>,
    pub vfio_allow_unsafe_interrupts: Option<bool>,
    pub split_lock_mitigate: Option<u8>,
    pub dev_vhost_net: bool,
    pub dev_net_tun: bool,
    pub dev_vfio: bool,
    /// `sys/bus/pci/drivers/vfio-pci` exists: the driver is registered, built
    /// in or loaded (a built-in one is never listed in `/proc/modules`). None
    /// when the root has no PCI driver directory to look in.
    pub vfio_pci_driver: Option<bool>,
    /// cgroup v2 controllers at the root, None on cgroup v1 or unreadable.
    pub cgroup_controllers: Option<Vec<String>>,
    pub irq_affinity: Vec<IrqAffinity>,
    pub ovmf_files: Vec<String>,
    pub swtpm: bool,
    pub libvirt_socket: Option<String>,
    pub libvirt_hooks: Vec<HookFile>,
    /// The running kernel's initramfs, read when /etc/modprobe.d binds
    /// devices to vfio-pci at boot (see initramfs.rs).
    pub initramfs: InitramfsState,
    /// A battery exists: this is a laptop.
    pub battery: bool,
    /// CPU idle states (filled by `scan`, which knows the online CPUs).
    /// Secure Boot, the kernel's lockdown, and whether the modules a
    /// passthrough desktop adds (kvmfr, vendor-reset, NVIDIA's) are signed.
    pub signing: super::signing::Signing,
    pub cpuidle: super::cpuidle::CpuIdle,
    /// `kvm_intel`/`kvm_amd` present as loaded or built-in module directories.
    pub kvm_vendor_module: Option<String>,
    /// Interrupts of devices handed to running VMs, from `/proc/interrupts`.
    pub vfio_irqs: Vec<VfioIrq>,
    /// Which top-level directories this root has at all: a partial capture
    /// without `dev/` says nothing about device nodes (unknown, not missing).
    pub has_dev: bool,
    pub has_usr: bool,
    pub has_run: bool,
    /// USB controllers with what is plugged into them (host/usb.rs).
    pub usb: Vec<super::usb::UsbController>,
    /// Keyboards and mice as evdev passthrough names them (host/input.rs).
    pub input: Vec<super::input::InputDevice>,
}

const OVMF_CANDIDATES: &[&str] = &[
    "share/OVMF/OVMF_CODE_4M.fd",
    "share/OVMF/OVMF_CODE_4M.secboot.fd",
    "share/OVMF/OVMF_CODE.fd",
    "share/OVMF/OVMF_CODE.secboot.fd",
    "share/edk2/ovmf/OVMF_CODE.fd",
    "share/edk2/ovmf/OVMF_CODE.secboot.fd",
    "share/edk2/x64/OVMF_CODE.4m.fd",
    "share/edk2/x64/OVMF_CODE.secboot.4m.fd",
    "share/edk2-ovmf/x64/OVMF_CODE.fd",
    "share/qemu/edk2-x86_64-code.fd",
    "share/qemu/edk2-x86_64-secure-code.fd",
];

fn files_in(root: &HostRoot, dir: &HostPath, suffix: &str) -> Vec<HostPath> {
    root.list_dir(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .map(|n| dir.join(n))
        .collect()
}

fn read_modprobe(root: &HostRoot, warnings: &mut Warnings) -> Vec<ConfigLine> {
    let mut out = Vec::new();
    for file in files_in(root, &HostPath::etc("modprobe.d"), ".conf") {
        let Some(text) = warnings.take(root.read_text(&file)) else {
            continue;
        };
        for line in text.lines().map(str::trim) {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if [
                "vfio",
                "softdep",
                "blacklist",
                "kvm",
                "nouveau",
                "amdgpu",
                "nvidia",
                "radeon",
            ]
            .iter()
            .any(|k| line.contains(k))
            {
                out.push(ConfigLine {
                    file: file.to_string(),
                    line: line.to_string(),
                });
            }
        }
    }
    out
}

fn read_boot_cmdlines(root: &HostRoot, warnings: &mut Warnings) -> Vec<BootCmdline> {
    let mut out = Vec::new();
    let grub = HostPath::etc("default/grub");
    if let Some(text) = warnings.take_opt(root.read_text(&grub).map(Some).or_else(absent))
        && let Some(line) = grub_cmdline(&text)
    {
        out.push(BootCmdline {
            source: grub.to_string(),
            cmdline: parse_cmdline(&line),
        });
    }
    let kernel_cmdline = HostPath::etc("kernel/cmdline");
    if let Some(text) = warnings.take_opt(root.read_text(&kernel_cmdline).map(Some).or_else(absent))
    {
        out.push(BootCmdline {
            source: kernel_cmdline.to_string(),
            cmdline: parse_cmdline(&text),
        });
    }
    for entry in files_in(root, &HostPath::boot("loader/entries"), ".conf") {
        let Some(text) = warnings.take(root.read_text(&entry)) else {
            continue;
        };
        let options: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("options"))
            .collect();
        if !options.is_empty() {
            out.push(BootCmdline {
                source: entry.to_string(),
                cmdline: parse_cmdline(&options.join(" ")),
            });
        }
    }
    out
}

fn absent<T>(e: ReadError) -> Result<Option<T>, ReadError> {
    if e.is_not_found() { Ok(None) } else { Err(e) }
}

fn read_flag(root: &HostRoot, path: &HostPath, warnings: &mut Warnings) -> Option<bool> {
    warnings
        .take_opt(root.read_attr_opt(path))
        .map(|v| matches!(v.as_str(), "Y" | "y" | "1"))
}

fn read_irq_affinity(root: &HostRoot, warnings: &mut Warnings) -> Vec<IrqAffinity> {
    let dir = HostPath::proc("irq");
    let mut out = Vec::new();
    for name in root.list_dir(&dir).unwrap_or_default() {
        let Ok(irq) = name.parse::<u32>() else {
            continue;
        };
        if let Some(cpus) = read_cpuset(root, &dir.join(&name), "smp_affinity_list", warnings) {
            out.push(IrqAffinity {
                irq,
                cpus: cpus.into_iter().collect(),
            });
        }
    }
    out.sort_by_key(|a| a.irq);
    out
}

pub fn read_system(root: &HostRoot, warnings: &mut Warnings) -> SystemState {
    let kernel_log = match root.read_kmsg(&HostPath::dev("kmsg")) {
        Ok(text) => KernelLog {
            readable: true,
            reason: None,
            lines: parse_kmsg(&text),
        },
        Err(e) => KernelLog {
            readable: false,
            reason: Some(match &e {
                ReadError::PermissionDenied { path } => {
                    format!("{path}: permission denied (run as root to read the kernel log)")
                }
                other => other.to_string(),
            }),
            lines: Vec::new(),
        },
    };
    let iomem_framebuffers = root
        .read_text(&HostPath::proc("iomem"))
        .map(|t| parse_iomem_framebuffers(&t))
        .unwrap_or_default();
    let buddyinfo = root
        .read_text(&HostPath::proc("buddyinfo"))
        .map(|t| parse_buddyinfo(&t))
        .unwrap_or_default();
    let cgroup_controllers = root
        .read_attr_opt(&HostPath::sys("fs/cgroup/cgroup.controllers"))
        .ok()
        .flatten()
        .map(|t| t.split_whitespace().map(str::to_string).collect());
    let ovmf_files = OVMF_CANDIDATES
        .iter()
        .map(|p| HostPath::usr(p))
        .filter(|p| root.exists(p))
        .map(|p| p.to_string())
        .collect();
    let libvirt_socket = ["libvirt/libvirt-sock", "libvirt/virtqemud-sock"]
        .iter()
        .map(|p| HostPath::run(p))
        .find(|p| root.exists(p))
        .map(|p| p.to_string());
    let libvirt_hooks = hook_files(root);
    let battery = root
        .list_dir(&HostPath::sys("class/power_supply"))
        .unwrap_or_default()
        .iter()
        .any(|n| n.starts_with("BAT"));
    let kvm_vendor_module = ["kvm_intel", "kvm_amd"]
        .into_iter()
        .find(|m| root.is_dir(&HostPath::sys(&format!("module/{m}"))))
        .map(str::to_string);
    let modprobe = read_modprobe(root, warnings);
    let release = root
        .read_attr_opt(&HostPath::proc("sys/kernel/osrelease"))
        .ok()
        .flatten();
    let pairs: Vec<(String, String)> = modprobe
        .iter()
        .map(|l| (l.file.clone(), l.line.clone()))
        .collect();
    let initramfs = read_state(root, release.as_deref(), &pairs);
    SystemState {
        signing: super::signing::Signing::default(),
        usb: super::usb::read_usb(root),
        input: super::input::read_input_devices(root),
        cpuidle: super::cpuidle::CpuIdle::default(),
        kernel_log,
        iomem_framebuffers,
        modprobe,
        initramfs,
        boot_cmdlines: read_boot_cmdlines(root, warnings),
        buddyinfo,
        ksm_run: root
            .read_attr_opt(&HostPath::sys("kernel/mm/ksm/run"))
            .ok()
            .flatten()
            .and_then(|v| v.parse().ok()),
        kvm_ignore_msrs: read_flag(
            root,
            &HostPath::sys("module/kvm/parameters/ignore_msrs"),
            warnings,
        ),
        vfio_allow_unsafe_interrupts: read_flag(
            root,
            &HostPath::sys("module/vfio_iommu_type1/parameters/allow_unsafe_interrupts"),
            warnings,
        ),
        split_lock_mitigate: root
            .read_attr_opt(&HostPath::proc("sys/kernel/split_lock_mitigate"))
            .ok()
            .flatten()
            .and_then(|v| v.parse().ok()),
        dev_vhost_net: root.exists(&HostPath::dev("vhost-net")),
        dev_net_tun: root.exists(&HostPath::dev("net/tun")),
        dev_vfio: root.exists(&HostPath::dev("vfio/vfio")),
        vfio_pci_driver: root
            .is_dir(&HostPath::sys("bus/pci/drivers"))
            .then(|| root.is_dir(&HostPath::sys("bus/pci/drivers/vfio-pci"))),
        cgroup_controllers,
        irq_affinity: read_irq_affinity(root, warnings),
        ovmf_files,
        swtpm: root.exists(&HostPath::usr("bin/swtpm")),
        libvirt_socket,
        libvirt_hooks,
        battery,
        kvm_vendor_module,
        vfio_irqs: root
            .read_text(&HostPath::proc("interrupts"))
            .map(|t| vfio_irqs(&parse_interrupts(&t)))
            .unwrap_or_default(),
        has_dev: root.is_dir(&HostPath::dev("")),
        has_usr: root.is_dir(&HostPath::usr("")),
        has_run: root.is_dir(&HostPath::run("")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmsg_keeps_topical_messages() {
        let text = "6,1,0,-;Linux version 6.1\n4,2,5,-;kvm: disabled by bios\n SUBSYSTEM=cpu\n6,3,9,-;DMAR-IR: Enabled IRQ remapping in x2apic mode\n";
        let lines = parse_kmsg(text);
        assert_eq!(
            lines,
            vec![
                "kvm: disabled by bios",
                "DMAR-IR: Enabled IRQ remapping in x2apic mode"
            ]
        );
        let dmesg = "[    0.497832] pci 0000:00:01.0: Adding to iommu group 0\n";
        assert_eq!(parse_kmsg(dmesg).len(), 1);
    }

    #[test]
    fn iomem_framebuffers() {
        let text = "00000000-00000fff : Reserved\n  e0000000-e02fffff : efifb\n  c0000000-c07fffff : BOOTFB\n";
        let fbs = parse_iomem_framebuffers(text);
        assert_eq!(fbs.len(), 2);
        assert_eq!(fbs[0].start, 0xe000_0000);
        assert_eq!(fbs[1].name, "BOOTFB");
    }

    #[test]
    fn buddyinfo_zones() {
        let z = parse_buddyinfo(
            "Node 0, zone   Normal  19658   6136   3392   1773    793    528    851   1128    692    235     67 \n",
        );
        assert_eq!(z[0].zone, "Normal");
        assert_eq!(z[0].free_blocks.len(), 11);
        assert_eq!(z[0].free_blocks[10], 67);
        assert!(parse_buddyinfo("garbage").is_empty());
    }

    #[test]
    fn grub_lines() {
        let t = "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\nGRUB_CMDLINE_LINUX=\"amd_iommu=on iommu=pt\"\n";
        assert_eq!(
            grub_cmdline(t).as_deref(),
            Some("quiet splash amd_iommu=on iommu=pt")
        );
        assert_eq!(grub_cmdline("nothing"), None);
    }
}
