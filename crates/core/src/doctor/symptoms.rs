//! The symptoms people arrive with, as data: which checks can explain each one,
//! what the host cannot show us, and what to look at next.

/// One symptom flow (`doctor --list --json` prints them as they are here).
#[derive(Debug, serde::Serialize)]
pub struct Symptom {
    /// What to type: `vfio-assistant doctor paused-at-start`.
    pub id: &'static str,
    pub title: &'static str,
    /// How people describe it.
    pub says: &'static str,
    /// Checks (ids) that can explain it.
    pub checks: &'static [&'static str],
    /// True when a device (the GPU) is part of the question.
    pub device_scoped: bool,
    /// What we cannot see from the host, said plainly.
    pub cannot_see: &'static str,
    /// What we still cannot see once the VM is named (`--domain`), where
    /// `cannot_see` asks for its name; `None` when the name changes nothing.
    #[serde(skip)]
    pub cannot_see_named: Option<&'static str>,
    /// What to look at next: the guest, the VM definition, live data.
    pub next_steps: &'static [&'static str],
}

pub const SYMPTOMS: &[Symptom] = &[
    Symptom {
        id: "paused-at-start",
        title: "The VM sits \"paused\" for minutes when it starts",
        says: "virt-manager shows the VM paused, the CPU spins, nothing on screen for minutes",
        checks: &[
            "mem.thp",
            "mem.hugepages",
            "mem.fragmentation",
            "mem.ksm",
            "vm.state",
        ],
        device_scoped: false,
        cannot_see: "A VM with a passed-through device pins all its memory before it runs; a slow start is the kernel finding and compacting that memory.",
        cannot_see_named: None,
        next_steps: &[
            "While it hangs, run `virsh domstate --reason NAME`: 'paused (starting up)' means QEMU is still allocating and pinning guest memory; 'running' means the wait is inside the guest.",
            "Watch `grep -E 'compact|thp' /proc/vmstat` during the start: rising compact_stall means compaction is the wait.",
            "Back the VM with reserved hugepages (<memoryBacking><hugepages/></memoryBacking>) so nothing has to be compacted at start.",
        ],
    },
    Symptom {
        id: "stutter",
        title: "Stutter, audio crackle, high DPC latency",
        says: "games hitch every few seconds, sound crackles, LatencyMon shows red",
        checks: &[
            "vm.pinning",
            "vm.irq_on_vm_cpus",
            "vm.intx",
            "vm.hyperv",
            "cpu.governor",
            "cpu.isolation",
            "cpu.irq_affinity",
            "irq.vfio_mode",
            "time.clocksource",
            "cpu.idle_states",
            "cpu.split_lock",
            "mem.thp",
            "mem.ksm",
            "mem.hugepages",
        ],
        device_scoped: false,
        cannot_see: "Much of it lives in the guest and in the VM's pinning: with the VM named (the VM field on the Troubleshoot page; or in a terminal: doctor --domain NAME) its pinning and the interrupts on its CPUs are read too.",
        cannot_see_named: Some(
            "Much of it lives in the guest: its drivers, its power plan and its DPC latency (LatencyMon in the guest names the driver that holds the CPU).",
        ),
        next_steps: &[
            "Pin every vCPU to its own host thread, keep SMT pairs together, stay inside one L3 group and NUMA node, and keep CPU 0 for the host. The CPU page plans it and writes it into the domain (in a terminal: `vfio-assistant pin --vcpus N`); naming the VM here checks the pinning it has.",
            "In Windows: put the GPU and its HDMI audio in MSI mode (MSI utility v3 or the MSISupported registry value).",
            "In Windows: turn off Virtual Machine Platform, Hyper-V and Core Isolation / Memory Integrity; they add a nested hypervisor.",
            "Run LatencyMon in the guest: the driver with the highest DPC time names the culprit.",
            "Watch it happen: the Monitor page, following the VM while it stutters, shows interrupts landing on the VM's CPUs, vCPUs running off their pins, clocks and governors, and KVM exits by kind (in a terminal: `vfio-assistant monitor --domain NAME`).",
            "Measure the host's share: the Monitor page's latency probe on the CPUs you pin to, before the VM starts, also with shallow idle states only (in a terminal: `sudo vfio-assistant latency --cpus LIST --compare-idle`; root makes the probe real-time, as a vCPU is). A p99 of hundreds of µs there reaches the guest too.",
        ],
    },
    Symptom {
        id: "high-cpu-exits",
        title: "High host CPU use / many VM exits",
        says: "an idle Windows VM burns a whole core on the host, kvm_stat shows huge exit counts",
        checks: &[
            "vm.exits",
            "vm.hyperv",
            "kvm.device",
            "kvm.ignore_msrs",
            "cpu.split_lock",
        ],
        device_scoped: false,
        cannot_see: "Exit rates need a running VM: name it (the VM field in the app, --domain NAME in a terminal), or watch them live on the Monitor page.",
        cannot_see_named: Some(
            "What makes the guest exit (its timers, its power plan, a driver that polls) shows only inside the guest; exit rates are read only while the VM runs.",
        ),
        next_steps: &[
            "Look at the exits by kind: `sudo perf kvm stat live` or `virsh domstats --vcpu NAME`; heavy MMIO/IO exits mean emulated devices: install the virtio drivers in the guest and switch disks and network to virtio.",
            "Enable the Hyper-V enlightenments in the domain (relaxed, vapic, spinlocks, vpindex, synic, stimer, frequencies): without them Windows polls timers and spins.",
            "Give the VM fewer vCPUs if it does not use them: idle vCPUs still cost wake-ups.",
        ],
    },
    Symptom {
        id: "vtx-disabled",
        title: "\"VT-x is disabled\" / KVM is not available",
        says: "virt-manager says KVM is not available, VMware says VT-x is disabled",
        checks: &["cpu.virtualization", "kvm.device"],
        device_scoped: false,
        cannot_see: "The firmware setting itself is only visible from the firmware setup screen.",
        cannot_see_named: None,
        next_steps: &[
            "After enabling the setting in the firmware, power the machine off completely (not just reboot): some boards only apply it then.",
            "If Windows is installed on the same machine with Hyper-V on, it does not affect Linux; but a BIOS update can reset the setting.",
        ],
    },
    Symptom {
        id: "wont-stop-start",
        title: "A VM that will not stop or start / \"cannot acquire state change lock\"",
        says: "virsh shutdown does nothing, start fails with a lock error",
        checks: &[
            "vm.state",
            "vm.last_start",
            "libvirt.running",
            "libvirt.connect",
            "libvirt.hooks",
        ],
        device_scoped: false,
        cannot_see: "The domain's state and QEMU's own run state need its name (the VM field in the app, --domain NAME in a terminal).",
        cannot_see_named: Some(
            "Whether the guest ignores a shutdown request (no ACPI handler, a Windows update in progress) shows only inside the guest.",
        ),
        next_steps: &[
            "`virsh domstate --reason NAME` says what libvirt thinks; `ps -ef | grep qemu` whether QEMU still runs.",
            "`virsh destroy NAME` is a hard power-off: safe for the host, like pulling the VM's plug.",
            "\"cannot acquire state change lock\": a hook script or a hung device reset holds libvirt; after destroy, restart libvirtd (`systemctl restart libvirtd`), and check hook scripts end quickly.",
        ],
    },
    Symptom {
        id: "code43",
        title: "Code 43 or a black screen in the guest",
        says: "Device Manager shows error 43 on the GPU, or the monitor stays black",
        checks: &[
            "vm.code43",
            "device.rom",
            "device.boot_vga",
            "device.rebar",
            "device.laptop_gpu",
            "device.bound",
            "device.viable",
        ],
        device_scoped: true,
        cannot_see: "The VM definition matters most here (vendor_id, kvm hidden, ROM, the card's functions at one slot): name the VM (the VM field in the app, --domain NAME in a terminal) to have it read.",
        cannot_see_named: Some(
            "What the guest's driver saw shows only in the guest: Device Manager's error code and the driver's version.",
        ),
        next_steps: &[
            "NVIDIA drivers before 465 refuse to run in a VM: set <hyperv><vendor_id state='on' value='randomid'/></hyperv> and <kvm><hidden state='on'/></kvm> — before installing the driver.",
            "Give the card a UEFI (GOP) ROM: OVMF needs it to show anything before Windows loads. 'Check its ROM' on the card's Devices details reads the card's own ROM and says whether it has GOP; in a terminal, `sudo vfio-assistant rom ADDRESS --save FILE` also saves it for <rom file='...'/>, and `vfio-assistant rom --file FILE` checks a downloaded one (a header in front is cut off with --save).",
            "Turn on \"Above 4G decoding\" in the firmware; with Resizable BAR on, try turning it off.",
            "A laptop dGPU without outputs needs a VBIOS file and often a fake battery (SSDT) in the guest.",
        ],
    },
    Symptom {
        id: "group-not-viable",
        title: "\"Group N is not viable\" / the device cannot be passed through",
        says: "libvirt says the IOMMU group is not viable, please ensure all devices within the group are bound to their vfio bus driver",
        checks: &[
            "device.viable",
            "device.bound",
            "device.host_driver_first",
            "boot.initramfs_vfio",
            "iommu.acs_override",
            "iommu.enabled",
        ],
        device_scoped: true,
        cannot_see: "Which slot the card could move to depends on the board's wiring; the manual's block diagram shows which slots hang off the CPU.",
        cannot_see_named: None,
        next_steps: &[
            "Every endpoint in the group must be bound to vfio-pci or to no driver; bridges can stay.",
            "Move the card to a CPU-attached slot (usually the first x16) where it gets a group of its own.",
            "The ACS override splits groups by pretending: the devices can still reach each other. Use it only knowing that.",
        ],
    },
    Symptom {
        id: "reset-bug",
        title: "The VM hangs on its second start (reset bug)",
        says: "first boot works, after a VM reboot or restart the screen stays black until the host reboots",
        checks: &["device.reset", "device.host_display", "device.boot_vga"],
        device_scoped: true,
        cannot_see: "Whether the card actually recovers shows only when a VM stops and starts again.",
        cannot_see_named: None,
        next_steps: &[
            "AMD Polaris/Vega/Navi 10-14: install vendor-reset and set reset_method=device_specific before each start.",
            "Shut the guest down cleanly instead of forcing it off: some cards survive a clean driver unload.",
            "Do not let the host use the card between VM runs (no host driver, not the boot GPU).",
        ],
    },
];

impl Symptom {
    /// What the host cannot show for this symptom, once the VM is named or
    /// not: a flow that was given `--domain` never asks for it again.
    pub fn cannot_see_for(&self, domain_named: bool) -> &'static str {
        match self.cannot_see_named {
            Some(named) if domain_named => named,
            _ => self.cannot_see,
        }
    }
}
