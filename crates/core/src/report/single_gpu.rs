//! Before single-GPU passthrough: what breaks the common hooks, checked on
//! this host (shared/research/playable-vm.md, "What breaks"), each a
//! finding with its evidence, why and fix:
//! * `single_gpu.display` — whether the host shows its screen on this GPU
//!   at all (if another GPU does, no hook is needed);
//! * `single_gpu.holders` — who holds the card's `/dev/dri` nodes (and
//!   `/dev/nvidia*`): the desktop's processes go with the display manager,
//!   a system service (a CUDA or AI service, nvidia-persistenced) keeps the
//!   card and libvirt's detach then hangs or fails;
//! * `single_gpu.sysfb` — the boot framebuffer (simpledrm, efifb, `BOOTFB`
//!   in /proc/iomem) left on the card's memory, which QEMU then cannot map
//!   ("BAR 0: can't reserve"): `initcall_blacklist=sysfb_init`;
//! * `single_gpu.vfio` — vfio-pci built in or a module (hooks that run
//!   `modprobe -r vfio…` fail on a built-in one and leave a black screen;
//!   ours lets libvirt bind the card and never unloads anything);
//! * `single_gpu.ssh` — a way back in while the host has no screen.

use crate::finding::{Finding, Status};
use crate::host::HostSnapshot;
use crate::sysroot::{HostPath, HostRoot};

/// At most this many processes and open files a process are looked at.
const MAX_PROCESSES: usize = 65_536;
const MAX_FDS: usize = 8_192;

/// Display managers: their service stops the desktop with them.
const DISPLAY_MANAGERS: &[&str] = &[
    "display-manager.service",
    "gdm.service",
    "gdm3.service",
    "sddm.service",
    "lightdm.service",
    "lxdm.service",
    "xdm.service",
    "greetd.service",
    "ly.service",
];

/// A process that has one of the card's nodes open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub name: String,
    /// Its systemd unit or scope (`ollama.service`, `session-2.scope`).
    pub unit: Option<String>,
    /// It ends with the desktop (a user session, the display manager).
    pub with_desktop: bool,
    pub node: String,
}

/// The device nodes through which programs use the card.
pub fn card_nodes(root: &HostRoot, snap: &HostSnapshot, gpu: &str) -> Vec<String> {
    let mut nodes: Vec<String> = root
        .list_dir(&HostPath::sys(&format!("bus/pci/devices/{gpu}/drm")))
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with("card") || n.starts_with("renderD"))
        .map(|n| format!("/dev/dri/{n}"))
        .collect();
    let nvidia = snap
        .device(gpu)
        .and_then(|e| e.device.driver.as_deref())
        .is_some_and(|d| d == "nvidia");
    if nvidia {
        nodes.extend(
            root.list_dir(&HostPath::dev(""))
                .unwrap_or_default()
                .into_iter()
                .filter(|n| n.starts_with("nvidia") && !n.contains('-') || n == "nvidia-modeset")
                .map(|n| format!("/dev/{n}")),
        );
    }
    nodes.sort();
    nodes.dedup();
    nodes
}

/// Who has any of `nodes` open, from /proc/PID/fd; and how many processes
/// could not be looked into (another user's, when not root).
pub fn holders(root: &HostRoot, nodes: &[String]) -> (Vec<Holder>, usize) {
    let mut out = Vec::new();
    let mut unreadable = 0;
    if nodes.is_empty() {
        return (out, 0);
    }
    let pids = root.list_dir(&HostPath::proc("")).unwrap_or_default();
    for pid in pids
        .iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .take(MAX_PROCESSES)
    {
        let fd_dir = HostPath::proc(&format!("{pid}/fd"));
        let fds = match root.list_dir(&fd_dir) {
            Ok(f) => f,
            Err(_) => {
                unreadable += 1;
                continue;
            }
        };
        let held = fds.iter().take(MAX_FDS).find_map(|fd| {
            let target = root.read_link(&fd_dir.join(fd)).ok()?;
            let t = target.to_string_lossy().into_owned();
            nodes.iter().find(|n| **n == t).cloned()
        });
        let Some(node) = held else { continue };
        let name = root
            .read_attr(&HostPath::proc(&format!("{pid}/comm")))
            .unwrap_or_else(|_| "?".into());
        let cgroup = root
            .read_text(&HostPath::proc(&format!("{pid}/cgroup")))
            .unwrap_or_default();
        let path = cgroup
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .or_else(|| cgroup.lines().last().and_then(|l| l.rsplit(':').next()))
            .unwrap_or("")
            .trim()
            .to_string();
        let unit = path
            .rsplit('/')
            .find(|c| c.ends_with(".service") || c.ends_with(".scope"))
            .map(str::to_string);
        let with_desktop = path.starts_with("/user.slice")
            || unit
                .as_deref()
                .is_some_and(|u| DISPLAY_MANAGERS.contains(&u));
        out.push(Holder {
            pid,
            name,
            unit,
            with_desktop,
            node,
        });
    }
    (out, unreadable)
}

fn holder_line(h: &Holder) -> String {
    match &h.unit {
        Some(u) => format!("{} (pid {}, {}) has {}", h.name, h.pid, u, h.node),
        None => format!("{} (pid {}) has {}", h.name, h.pid, h.node),
    }
}

/// Listening TCP ports, from /proc/net/tcp and tcp6 (state 0A).
fn listening_ports(root: &HostRoot) -> Vec<u16> {
    let mut ports = Vec::new();
    for f in ["net/tcp", "net/tcp6"] {
        let text = root.read_text(&HostPath::proc(f)).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.get(3) != Some(&"0A") {
                continue;
            }
            if let Some(p) = cols
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|h| u16::from_str_radix(h, 16).ok())
            {
                ports.push(p);
            }
        }
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

fn display(snap: &HostSnapshot, gpu: &str) -> Finding {
    let others: Vec<String> = snap
        .gpus()
        .filter(|e| e.device.address != gpu)
        .filter(|e| snap.host_display_reason(&e.device.address).is_some())
        .map(|e| e.device.address.clone())
        .collect();
    match snap.host_display_reason(gpu) {
        Some(why) if others.is_empty() => Finding::new(
            "single_gpu.display",
            format!("{gpu} is the host's screen: single-GPU passthrough"),
            Status::Info,
        )
        .evidence(gpu, why)
        .why("While the VM runs the host has no screen: its desktop stops at the VM's start and comes back when the VM stops."),
        Some(why) => Finding::new(
            "single_gpu.display",
            format!("{gpu} is one of the host's screens; {} is another", others.join(", ")),
            Status::Warn,
        )
        .evidence(gpu, why)
        .why("The host has another GPU for its desktop: pass this one without stopping the desktop (bind it to vfio-pci at boot), and keep the host usable while the VM runs.")
        .fix("Leave single-GPU out; tune with --gpu for this card instead."),
        None => Finding::new(
            "single_gpu.display",
            if others.is_empty() {
                format!("The host does not show its screen on {gpu}")
            } else {
                format!(
                    "The host does not show its screen on {gpu} (it does on {})",
                    others.join(", ")
                )
            },
            Status::Warn,
        )
        .why("No boot screen, no display connected, not the CPU's graphics: the desktop is not on this card, so nothing needs to be stopped for the VM.")
        .fix("Leave single-GPU out; tune with --gpu for this card instead."),
    }
}

fn holders_finding(root: &HostRoot, snap: &HostSnapshot, gpu: &str) -> Finding {
    let nodes = card_nodes(root, snap, gpu);
    if nodes.is_empty() {
        return Finding::new(
            "single_gpu.holders",
            "No program can hold the card: it has no /dev/dri node",
            Status::Pass,
        )
        .evidence(format!("/sys/bus/pci/devices/{gpu}/drm"), "absent")
        .why("No graphics driver draws on it, so nothing has to let go of it before libvirt detaches it.");
    }
    let (mut found, unreadable) = holders(root, &nodes);
    // A desktop session goes only with a display manager: one started from
    // a TTY (startx, a compositor) has none for the hook to stop, and the
    // hook refuses the start while it holds the card. NVIDIA's persistence
    // daemon the hook stops itself (and starts again).
    let dm = root.exists(&HostPath::etc("systemd/system/display-manager.service"));
    for h in &mut found {
        if !dm {
            h.with_desktop = false;
        }
        if h.unit.as_deref() == Some("nvidia-persistenced.service") {
            h.with_desktop = true;
        }
    }
    let keep: Vec<&Holder> = found.iter().filter(|h| !h.with_desktop).collect();
    let mut f = if !keep.is_empty() {
        Finding::new(
            "single_gpu.holders",
            format!(
                "{} keep{} the card open outside the desktop",
                keep.iter().map(|h| h.name.as_str()).collect::<Vec<_>>().join(", "),
                if keep.len() == 1 { "s" } else { "" }
            ),
            Status::Warn,
        )
        .why(if dm {
            "Stopping the display manager ends the desktop's programs, not system services: one that keeps the card's device open (a CUDA or AI service, a container) would stop the driver letting go. The hook refuses the VM's start while it holds the card (the start fails with its name in the log and the desktop stays), so stop it first."
        } else {
            "No display manager is set up (display-manager.service): a desktop started from a TTY (startx, a compositor) has nothing the hook can stop. The hook refuses the VM's start while it holds the card (the start fails with its name in the log), so log out of it first, or use a display manager."
        })
        .fix(format!(
            "Stop {} before the VM starts (or add them to the hook's prepare step), and start them after.",
            keep.iter()
                .map(|h| h.unit.clone().unwrap_or_else(|| h.name.clone()))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else if unreadable > 0 && found.is_empty() {
        Finding::new(
            "single_gpu.holders",
            "Who holds the card could not be seen",
            Status::Unknown,
        )
        .why("Other users' and the system's processes can be looked into only as root.")
        .fix("Check again as root (sudo vfio-assistant tune --single-gpu VM --dry-run), or with: sudo fuser -v /dev/dri/* /dev/nvidia*")
    } else {
        Finding::new(
            "single_gpu.holders",
            "Only the desktop holds the card: it lets go when the display manager stops",
            Status::Pass,
        )
        .why("Every program with the card's device open is part of a desktop session or the display manager, which the hook stops.")
    };
    f = f.evidence("card's device nodes", nodes.join(" "));
    for h in &found {
        f = f.evidence(
            if h.with_desktop {
                "with the desktop"
            } else {
                "outside the desktop"
            },
            holder_line(h),
        );
    }
    if unreadable > 0 {
        f = f.evidence("not readable", format!("{unreadable} processes (not root)"));
    }
    f
}

fn sysfb_finding(root: &HostRoot, snap: &HostSnapshot) -> Finding {
    let blacklisted = snap.kernel.cmdline.as_ref().is_some_and(|c| {
        c.value("initcall_blacklist")
            .is_some_and(|v| v.split(',').any(|x| x == "sysfb_init"))
    });
    let mut seen = Vec::new();
    for dev in [
        "simple-framebuffer.0",
        "efi-framebuffer.0",
        "vesa-framebuffer.0",
    ] {
        let p = HostPath::sys(&format!("bus/platform/devices/{dev}"));
        if root.exists(&p) {
            let driver = root
                .link_name(&p.join("driver"))
                .ok()
                .flatten()
                .unwrap_or_else(|| "no driver".into());
            seen.push((format!("/sys/bus/platform/devices/{dev}"), driver));
        }
    }
    let iomem = root.read_text(&HostPath::proc("iomem")).unwrap_or_default();
    let bootfb: Vec<String> = iomem
        .lines()
        .filter(|l| l.contains("BOOTFB") || l.contains("simpledrm") || l.contains("efifb"))
        .map(|l| l.trim().to_string())
        .collect();
    let mut f = if blacklisted {
        Finding::new(
            "single_gpu.sysfb",
            "The boot framebuffer is kept off the card (initcall_blacklist=sysfb_init)",
            Status::Pass,
        )
        .why("The kernel does not set up simpledrm/sysfb on the firmware's framebuffer, so nothing is left on the card's memory when the VM takes it.")
    } else if seen.is_empty() && bootfb.is_empty() {
        Finding::new(
            "single_gpu.sysfb",
            "No boot framebuffer holds the card's memory",
            Status::Pass,
        )
        .why("Neither simpledrm nor efifb/vesafb is left on the firmware's framebuffer (the GPU's driver replaced it).")
    } else {
        Finding::new(
            "single_gpu.sysfb",
            "The boot framebuffer (simpledrm/efifb) may keep the card's memory",
            Status::Warn,
        )
        .why("The firmware's framebuffer lies in the GPU's memory (its BAR). While simpledrm, efifb or the BOOTFB reservation holds it, QEMU cannot map that memory: the VM's start fails with 'BAR 0: can't reserve' in dmesg, or the guest's screen stays black. The hook unbinds the framebuffer, but the reservation can stay until the next boot.")
        .fix("Add initcall_blacklist=sysfb_init to the kernel command line (the boot console then stays on the GPU's own driver). Tuning's kernel command line takes it: --cmdline-extra initcall_blacklist=sysfb_init.")
    };
    for (dev, driver) in seen {
        f = f.evidence(dev, format!("bound to {driver}"));
    }
    for l in bootfb.iter().take(4) {
        f = f.evidence("/proc/iomem", l.clone());
    }
    f
}

fn vfio_finding(root: &HostRoot, snap: &HostSnapshot) -> Finding {
    let release = snap.kernel.release.clone().unwrap_or_default();
    if crate::host::initramfs::vfio_pci_builtin(root, &release) {
        Finding::new(
            "single_gpu.vfio",
            "vfio-pci is built into this kernel",
            Status::Info,
        )
        .evidence(format!("/lib/modules/{release}/modules.builtin"), "kernel/drivers/vfio/pci/vfio-pci.ko")
        .why("Nothing to load or unload: libvirt binds the card to vfio-pci itself (managed='yes'), and our hook never runs modprobe. The guides' hooks that run `modprobe -r vfio_pci` fail on such a kernel and leave a black screen.")
    } else {
        Finding::new("single_gpu.vfio", "vfio-pci is a module", Status::Pass)
            .why("libvirt loads it and binds the card at the VM's start (managed='yes'); when the VM stops it gives the card back to its own driver.")
    }
}

fn ssh_finding(root: &HostRoot) -> Finding {
    let ports = listening_ports(root);
    if ports.contains(&22) {
        Finding::new(
            "single_gpu.ssh",
            "SSH answers on port 22: a way back in while the host has no screen",
            Status::Pass,
        )
        .evidence("/proc/net/tcp", "port 22 listening")
        .why("If the VM does not start or the screen does not come back, log in from a phone or another computer and run `virsh destroy VM` (the hook then gives the host its screen back) or look at /var/log/vfio-assistant-single-gpu.log.")
    } else {
        Finding::new(
            "single_gpu.ssh",
            "Nothing answers SSH: no way in while the host has no screen",
            Status::Warn,
        )
        .evidence("/proc/net/tcp", if ports.is_empty() { "no listening port".to_string() } else { format!("listening: {}", ports.iter().map(u16::to_string).collect::<Vec<_>>().join(" ")) })
        .why("While the VM has the only GPU the host shows nothing. If the start goes wrong, the power button is the only way back — with a half-applied state on the next boot.")
        .fix("Install and start an SSH server (Debian/Ubuntu: apt install openssh-server; Fedora: systemctl enable --now sshd) and test the first start from another computer.")
    }
}

/// The checks before single-GPU passthrough of `gpu`, the display first.
pub fn single_gpu_findings(root: &HostRoot, snap: &HostSnapshot, gpu: &str) -> Vec<Finding> {
    // As the user typed it (`01:00.0`) or in sysfs form: compared with the
    // snapshot's addresses and put into sysfs paths in the sysfs form.
    let gpu = &crate::host::pci::full_address(gpu.trim());
    vec![
        display(snap, gpu),
        holders_finding(root, snap, gpu),
        sysfb_finding(root, snap),
        vfio_finding(root, snap),
        ssh_finding(root),
    ]
}

/// The checks for `gpu`, or, when none is chosen, for the GPU the host
/// shows its screen on (the one single-GPU passthrough is about).
pub fn for_gpus(root: &HostRoot, snap: &HostSnapshot, gpu: Option<&str>) -> Vec<Finding> {
    let gpu = gpu.map(str::to_string).or_else(|| {
        snap.gpus_host_screen_last()
            .last()
            .map(|e| e.device.address.clone())
    });
    match gpu {
        Some(g) => single_gpu_findings(root, snap, &g),
        None => vec![Finding::new(
            "single_gpu.display",
            "This host has no GPU to pass",
            Status::Fail,
        )
        .why("Single-GPU passthrough hands the host's GPU to the VM; no display controller was found.")],
    }
}
