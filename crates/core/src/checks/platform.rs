//! Firmware and kernel prerequisites: VT-x/AMD-V, KVM, the IOMMU (firmware
//! table, kernel, command line, interrupt remapping, ACS override, RMRR), the
//! vfio modules, and whether the configured boot line differs from the running one.

use super::model::{Finding, Status};
use crate::host::HostSnapshot;
use crate::sysroot::HostPath;

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "platform",
    ids: &[
        super::CheckId("cpu.virtualization"),
        super::CheckId("kvm.device"),
        super::CheckId("iommu.firmware"),
        super::CheckId("iommu.enabled"),
        super::CheckId("iommu.passthrough_mode"),
        super::CheckId("iommu.interrupt_remapping"),
        super::CheckId("iommu.acs_override"),
        super::CheckId("iommu.rmrr"),
        super::CheckId("vfio.modules"),
        super::CheckId("boot.reboot_pending"),
    ],
    run: Some(|s, _, out| check(s, out)),
};

/// Firmware setting names differ per vendor; say the ones on the user's board.
pub struct Vendor {
    pub intel: bool,
    pub amd: bool,
}

impl Vendor {
    pub fn of(s: &HostSnapshot) -> Self {
        let v = s.cpu.vendor.as_deref().unwrap_or("");
        Vendor {
            intel: v == "GenuineIntel",
            amd: v == "AuthenticAMD",
        }
    }
    fn cpu_virt_setting(&self) -> &'static str {
        match (self.intel, self.amd) {
            (true, _) => {
                "\"Intel Virtualization Technology\" / \"VT-x\" (often under Advanced > CPU Configuration)"
            }
            (_, true) => {
                "\"SVM Mode\" (AMD-V, often under Advanced > CPU Configuration or OC > Advanced CPU)"
            }
            _ => "the CPU virtualization setting (VT-x on Intel, SVM on AMD)",
        }
    }
    fn iommu_setting(&self) -> &'static str {
        match (self.intel, self.amd) {
            (true, _) => "\"VT-d\" (Intel Virtualization Technology for Directed I/O)",
            (_, true) => "\"IOMMU\" / \"AMD-Vi\" (often under Advanced > AMD CBS > NBIO)",
            _ => "VT-d (Intel) or AMD-Vi/IOMMU (AMD)",
        }
    }
}

/// What a VM needs for an IOMMU of its own.
const VIOMMU: &str = "GPU passthrough needs the real machine: run VFIO Assistant on the bare-metal host. To practise inside a VM, give it a virtual IOMMU with interrupt remapping (QEMU: -machine q35,kernel-irqchip=split -device intel-iommu,intremap=on; libvirt: <iommu model='intel'><driver intremap='on'/></iommu> and <ioapic driver='qemu'/> under <features>).";

pub fn check(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let vendor = Vendor::of(s);
    let cpuinfo = HostPath::proc("cpuinfo").to_string();
    let flags = format!(
        "vmx={} svm={} hypervisor={}",
        s.cpu.vmx, s.cpu.svm, s.cpu.hypervisor
    );
    let disabled_line = s
        .system
        .kernel_log
        .find("disabled by bios")
        .map(str::to_string);

    // CPU virtualization.
    let virt = Finding::new("cpu.virtualization", "CPU hardware virtualization (VT-x / AMD-V)", Status::Pass)
        .evidence(&cpuinfo, &flags)
        .why("KVM needs the CPU's virtualization extensions; without them a VM runs emulated, far too slow for games.");
    out.push(match (s.cpu.virtualization(), s.cpu.hypervisor, s.firmware.dev_kvm, &disabled_line) {
        (Some(v), _, _, None) => Finding { title: format!("{v} available"), ..virt },
        (Some(v), _, _, Some(line)) => Finding {
            title: format!("{v} present but disabled in the firmware"),
            status: Status::Fail,
            ..virt
        }
        .evidence(HostPath::dev("kmsg").to_string(), line.clone())
        .fix(format!("Reboot into the firmware setup and enable {}; save and power-cycle.", vendor.cpu_virt_setting())),
        (None, true, true, _) => Finding {
            title: "Nested virtualization: the CPU flag is hidden but /dev/kvm works".into(),
            status: Status::Warn,
            ..virt
        }
        .fix("This host is itself a VM. GPU passthrough needs the real machine: run VFIO Assistant on the bare-metal host."),
        (None, true, false, _) => Finding {
            title: "This is a VM without nested virtualization".into(),
            status: Status::Fail,
            ..virt
        }
        .fix("Run on the bare-metal host, or enable nested virtualization in the outer hypervisor."),
        (None, false, _, _) => Finding {
            title: "No VT-x / AMD-V flag: switched off in the firmware or not supported".into(),
            status: Status::Fail,
            ..virt
        }
        .fix(format!("Enable {} in the firmware setup. (\"This host supports Intel VT-x, but VT-x is disabled\" from VMware means the same.)", vendor.cpu_virt_setting())),
    });

    // /dev/kvm.
    let kvm_dev = HostPath::dev("kvm").to_string();
    let mut kvm = Finding::new("kvm.device", "KVM is available (/dev/kvm)", Status::Pass)
        .evidence(
            &kvm_dev,
            if s.firmware.dev_kvm {
                "present"
            } else {
                "missing"
            },
        )
        .why("libvirt/QEMU use /dev/kvm to run VMs with hardware acceleration.");
    if let Some(m) = &s.system.kvm_vendor_module {
        kvm = kvm.evidence(HostPath::sys(&format!("module/{m}")).to_string(), "loaded");
    }
    if !s.firmware.dev_kvm && !s.system.has_dev && disabled_line.is_none() {
        kvm.status = Status::Unknown;
        kvm.title = "KVM: /dev is not in this capture".into();
    } else if !s.firmware.dev_kvm {
        kvm.status = Status::Fail;
        kvm.title = "KVM is not available (/dev/kvm missing)".into();
        kvm = match &disabled_line {
            Some(line) => kvm
                .evidence(HostPath::dev("kmsg").to_string(), line.clone())
                .fix(format!("The kernel says virtualization is disabled by the BIOS: enable {} and power-cycle.", vendor.cpu_virt_setting())),
            None => kvm.fix(if vendor.amd { "Load the module: sudo modprobe kvm_amd (and check dmesg for errors)." } else { "Load the module: sudo modprobe kvm_intel (and check dmesg for errors)." }),
        };
    }
    out.push(kvm);

    iommu_checks(s, &vendor, out);
    boot_checks(s, out);
}

fn iommu_checks(s: &HostSnapshot, vendor: &Vendor, out: &mut Vec<Finding>) {
    let tables = HostPath::sys("firmware/acpi/tables");
    let table_value = format!(
        "DMAR {}, IVRS {}",
        if s.firmware.acpi_dmar {
            "present"
        } else {
            "absent"
        },
        if s.firmware.acpi_ivrs {
            "present"
        } else {
            "absent"
        }
    );
    let fw = Finding::new("iommu.firmware", "The firmware announces an IOMMU (ACPI DMAR / IVRS)", Status::Pass)
        .evidence(tables.to_string(), &table_value)
        .why("The firmware describes the IOMMU to the kernel in the ACPI DMAR (Intel) or IVRS (AMD) table; with the setting off there is no table and no passthrough.");
    out.push(if s.firmware.acpi_dmar || s.firmware.acpi_ivrs {
        fw
    } else if s.iommu.active {
        Finding { status: Status::Pass, title: "The IOMMU is on (groups exist), the ACPI table was not in what we read".into(), ..fw }
    } else if !s.firmware.acpi_tables_visible {
        let read = format!("Run as root to read {tables}.");
        let fix = if s.cpu.hypervisor {
            format!("{read} This host is itself a VM: {VIOMMU}")
        } else {
            read
        };
        Finding { status: Status::Unknown, title: "Could not read the ACPI tables".into(), ..fw }.fix(fix)
    } else if s.cpu.hypervisor {
        // A VM's "firmware" is its hypervisor: no setup screen to visit.
        Finding { status: Status::Fail, title: "No IOMMU table: this host is itself a VM without a virtual IOMMU".into(), ..fw }
            .evidence(HostPath::proc("cpuinfo").to_string(), "hypervisor flag set")
            .fix(VIOMMU)
    } else {
        Finding { status: Status::Fail, title: "No IOMMU table: the IOMMU is off in the firmware".into(), ..fw }
            .fix(format!("Enable {} in the firmware setup. On some boards it only appears after enabling the CPU virtualization setting first.", vendor.iommu_setting()))
    });

    let groups = HostPath::sys("kernel/iommu_groups").to_string();
    let cmdline = super::cmdline::path();
    let cl = s.kernel.cmdline.as_ref();
    let intel_iommu = cl.and_then(|c| c.value("intel_iommu")).unwrap_or("");
    let amd_iommu = cl.and_then(|c| c.value("amd_iommu")).unwrap_or("");
    let mut en = Finding::new(
        "iommu.enabled",
        "The kernel uses the IOMMU (IOMMU groups exist)",
        Status::Pass,
    )
    .evidence(&groups, format!("{} groups", s.iommu.groups))
    .evidence(&cmdline, super::cmdline::seen(s))
    .why(
        "VFIO hands a whole IOMMU group to the VM; without groups no device can be passed through.",
    );
    if !s.iommu.active {
        en.status = Status::Fail;
        en.title = "The kernel is not using the IOMMU (no IOMMU groups)".into();
        let turned_off =
            intel_iommu.split(',').any(|v| v == "off") || amd_iommu.split(',').any(|v| v == "off");
        let no_table =
            s.firmware.acpi_tables_visible && !s.firmware.acpi_dmar && !s.firmware.acpi_ivrs;
        let remove =
            "Remove intel_iommu=off / amd_iommu=off from the kernel command line and reboot.";
        en = if no_table {
            // No kernel parameter can turn on what the firmware does not
            // announce: the firmware finding says what to do first.
            let mut first = if s.cpu.hypervisor {
                "First give this VM a virtual IOMMU (see iommu.firmware): without the DMAR/IVRS table no kernel parameter can turn one on.".to_string()
            } else {
                format!(
                    "First turn on {} in the firmware setup (see iommu.firmware): without the DMAR/IVRS table no kernel parameter can turn the IOMMU on.",
                    vendor.iommu_setting()
                )
            };
            if vendor.intel && !turned_off {
                first.push_str(" Once the table is there, Intel kernels may still need intel_iommu=on on the kernel command line.");
            }
            if turned_off {
                first.push_str(" Then: ");
                first.push_str(remove);
            }
            en.fix(first)
        } else if turned_off {
            en.fix(remove)
        } else if vendor.intel {
            en.fix("Add intel_iommu=on (and iommu=pt) to the kernel command line (e.g. GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub), and reboot. Many kernels do not turn the Intel IOMMU on by default.")
        } else {
            en.fix("Enable the IOMMU in the firmware; AMD kernels turn it on by default when the firmware table exists. Add iommu=pt to the kernel command line.")
        };
    }
    out.push(en);

    if s.iommu.active {
        let pt =
            cl.map(|c| c.value("iommu") == Some("pt") || c.value("iommu.passthrough") == Some("1"));
        let why = "iommu=pt lets devices that stay with the host skip address translation: less overhead on the host, no change for the VM's devices.";
        out.push(match pt {
            Some(pt) => Finding::new(
                "iommu.passthrough_mode",
                if pt {
                    "Host devices use IOMMU passthrough mode (iommu=pt)"
                } else {
                    "iommu=pt is not set"
                },
                if pt { Status::Pass } else { Status::Info },
            )
            .evidence(&cmdline, super::cmdline::seen(s))
            .why(why)
            .fix_if(!pt, "Optionally add iommu=pt to the kernel command line."),
            None => Finding::new(
                "iommu.passthrough_mode",
                "Cannot tell whether iommu=pt is set: the kernel command line was not read",
                Status::Unknown,
            )
            .evidence(&cmdline, super::cmdline::seen(s))
            .why(why)
            .fix(super::cmdline::read_it())
            .terminal(super::cmdline::SNAPSHOT),
        });
        // Interrupt remapping.
        let log = &s.system.kernel_log;
        let ir_line = log
            .find("Enabled IRQ remapping")
            .or_else(|| log.find("Interrupt remapping enabled"));
        let mut ir = Finding::new("iommu.interrupt_remapping", "Interrupt remapping", Status::Pass)
            .why("Interrupt remapping lets the IOMMU check interrupts a device sends; without it VFIO refuses devices unless you allow unsafe interrupts, which a malicious guest could abuse.");
        match (log.readable, ir_line) {
            (_, Some(line)) => {
                ir.title = "Interrupt remapping is enabled".into();
                ir = ir.evidence(HostPath::dev("kmsg").to_string(), line);
            }
            (true, None) => {
                ir.status = Status::Warn;
                ir.title = "No sign of interrupt remapping in the kernel log".into();
                ir = ir
                    .evidence(HostPath::dev("kmsg").to_string(), "no \"IRQ remapping\" message")
                    .fix("Check the firmware for an \"Interrupt remapping\" / x2APIC option; only as a last resort set vfio_iommu_type1.allow_unsafe_interrupts=1.");
            }
            (false, None) => {
                ir.status = Status::Unknown;
                ir.title = "Could not read the kernel log to check interrupt remapping".into();
                ir = ir
                    .evidence(
                        HostPath::dev("kmsg").to_string(),
                        log.reason.clone().unwrap_or_default(),
                    )
                    .fix("Run as root (the kernel log is restricted).");
            }
        }
        if s.system.vfio_allow_unsafe_interrupts == Some(true) {
            ir.status = ir.status.min(Status::Warn);
            ir = ir.evidence(
                HostPath::sys("module/vfio_iommu_type1/parameters/allow_unsafe_interrupts")
                    .to_string(),
                "Y",
            );
        }
        out.push(ir);
    }

    if let Some(v) = cl.and_then(|c| c.params.iter().find(|p| p.key == "pcie_acs_override")) {
        out.push(
            Finding::new("iommu.acs_override", "The ACS override patch is in use", Status::Warn)
                .evidence(&cmdline, format!("pcie_acs_override={}", v.value.as_deref().unwrap_or("")))
                .why("The ACS override makes the kernel pretend devices are isolated when the hardware does not promise it: devices in a split group can still reach each other's memory. It trades isolation for convenience.")
                .fix("Prefer a slot whose root port isolates the card (a CPU-attached x16 slot); use the override only knowing the guest could reach host devices."),
        );
    }
    if let Some(line) = s.system.kernel_log.find("RMRR")
        && line.contains("ineligible")
    {
        out.push(
                Finding::new("iommu.rmrr", "A device is locked to the firmware by an RMRR", Status::Fail)
                    .evidence(HostPath::dev("kmsg").to_string(), line)
                    .why("Intel RMRR regions reserve memory for the firmware's use of a device (often on HP/Dell servers); the kernel refuses to give such a device to a VM.")
                    .fix("Move the card to another slot, disable the firmware feature using it (e.g. HP \"Shared Memory\"), or use a kernel with the RMRR relaxation patch."),
            );
    }
    out.push(vfio_module(s));
}

/// Is vfio-pci there to hold a device? Any one sign is enough: the module in
/// `/proc/modules`, the driver registered in sysfs (built in or loaded), a
/// device bound to it, or `/dev/vfio/vfio`. A kernel built with vfio-pci
/// inside, or one without loadable modules at all, lists nothing in
/// `/proc/modules`, so the driver directory decides when that file is silent.
fn vfio_module(s: &HostSnapshot) -> Finding {
    let why = "vfio-pci is the driver that holds a device for the VM.";
    let modules = HostPath::proc("modules").to_string();
    let drivers = HostPath::sys("bus/pci/drivers/vfio-pci").to_string();
    let listed = s.kernel.has_module("vfio_pci");
    let bound: Vec<&str> = s
        .pci_devices
        .iter()
        .filter(|d| d.device.driver.as_deref() == Some("vfio-pci"))
        .map(|d| d.device.address.as_str())
        .collect();
    let modules_seen = match listed {
        Some(true) => "vfio_pci loaded".to_string(),
        Some(false) => "no vfio_pci (a built-in driver is not listed here)".to_string(),
        None => s
            .warnings
            .iter()
            .find(|w| w.path == modules)
            .map_or("unreadable".to_string(), |w| w.message.clone()),
    };
    let mut f = if listed == Some(true)
        || s.system.vfio_pci_driver == Some(true)
        || s.system.dev_vfio
        || !bound.is_empty()
    {
        Finding::new(
            "vfio.modules",
            "The vfio-pci driver is available",
            Status::Pass,
        )
        .why(why)
    } else if listed == Some(false) || s.system.vfio_pci_driver == Some(false) {
        Finding::new("vfio.modules", "vfio-pci is not loaded", Status::Info)
            .why("libvirt loads vfio-pci by itself when a VM with managed='yes' devices starts; binding at boot needs it in the initramfs.")
            .fix("Nothing to do for managed devices; to bind at boot add vfio-pci to the initramfs modules. If `sudo modprobe vfio-pci` says the module is not found, this kernel was built without it (CONFIG_VFIO_PCI): boot your distribution's standard kernel.")
    } else {
        Finding::new(
            "vfio.modules",
            "Could not tell whether vfio-pci is loaded",
            Status::Unknown,
        )
        .why(why)
    };
    f = f.evidence(modules, modules_seen);
    if let Some(registered) = s.system.vfio_pci_driver {
        f = f.evidence(
            drivers,
            if registered {
                "present (built in or loaded)"
            } else {
                "absent"
            },
        );
    }
    if let Some(first) = bound.first() {
        let more = match bound.len() - 1 {
            0 => String::new(),
            n => format!(" (and {n} more device(s): {})", bound[1..].join(" ")),
        };
        f = f.evidence(
            HostPath::sys(&format!("bus/pci/devices/{first}/driver")).to_string(),
            format!("vfio-pci{more}"),
        );
    }
    f.evidence(
        HostPath::dev("vfio/vfio").to_string(),
        if s.system.dev_vfio {
            "present"
        } else {
            "absent"
        },
    )
}

/// Parameters whose change needs a reboot to take effect.
const BOOT_KEYS: &[&str] = &[
    "intel_iommu",
    "amd_iommu",
    "iommu",
    "iommu.passthrough",
    "vfio_pci.ids",
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "irqaffinity",
    "hugepages",
    "hugepagesz",
    "default_hugepagesz",
    "video",
    "pcie_acs_override",
    "transparent_hugepage",
    "initcall_blacklist",
    "kvm.ignore_msrs",
];

fn boot_checks(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let Some(running) = &s.kernel.cmdline else {
        return;
    };
    if s.system.boot_cmdlines.is_empty() {
        return;
    }
    let mut diffs = Vec::new();
    for conf in &s.system.boot_cmdlines {
        for key in BOOT_KEYS {
            let want = conf
                .cmdline
                .value(key)
                .map(str::to_string)
                .or_else(|| conf.cmdline.has(key).then(String::new));
            let have = running
                .value(key)
                .map(str::to_string)
                .or_else(|| running.has(key).then(String::new));
            if want.is_some() && want != have {
                diffs.push(format!(
                    "{key}={} in {} but {} now",
                    want.unwrap_or_default(),
                    conf.source,
                    have.map(|h| format!("{key}={h}"))
                        .unwrap_or_else(|| "absent".into())
                ));
            }
        }
    }
    let mut f = Finding::new("boot.reboot_pending", "The running kernel command line matches the bootloader configuration", Status::Pass)
        .evidence(super::cmdline::path(), super::cmdline::seen(s))
        .why("Changes to the bootloader configuration only apply after the bootloader files are regenerated and the machine reboots.");
    for conf in &s.system.boot_cmdlines {
        f = f.evidence(conf.source.clone(), conf.cmdline.raw.clone());
    }
    if !diffs.is_empty() {
        f.status = Status::Warn;
        f.title =
            "A reboot is pending: the configured command line differs from the running one".into();
        f = f.fix(format!(
            "Regenerate the boot files (update-grub / grub2-mkconfig -o /boot/grub2/grub.cfg / kernelstub or bootctl) and reboot. Differences: {}",
            diffs.join("; ")
        ));
    }
    out.push(f);
}
