//! `vfio-assistant domain new --name NAME --gpu ADDRESS --vcpus N --memory SIZE
//! [--disk PATH] [--iso PATH] [--virtio-iso PATH] [--hugepages 2M|1G|none]
//! [--windows 10|11] [--network nat|bridge:BR|macvtap:DEV|none] [--connect URI]
//! [--unattended --user NAME --password-file FILE|- [--edition NAME]
//! [--lg-installer FILE] [--answer-media PATH]]`:
//! the domain XML on stdout, each choice and its why on stderr. With a
//! reachable libvirt, the Hyper-V set follows the host's domain capabilities,
//! and the preflight (`report::preflight`) adapts the domain to what this
//! host accepts (a trial start on a live QEMU) and checks files, memory and
//! network: exit 1 when something would still stop the start, 2 (and no
//! XML) for a domain with no disk.

use super::domain_virt::{ConnectArgs, caps_of};
use super::out::{errln, out};
use crate::checks::model::Status;
use crate::domain::from_host::{Choices, prepare};
use crate::domain::playable::{ClientSetup, Playable, UsbId, parse_usb_id};
use crate::domain::template::{DiskBus, Hugepages, Network, Windows, new_windows};
use crate::domain::xml::Document;
use crate::host::scan;
use crate::install::for_domain::add_install;
use crate::libvirt::Hypervisor;
use crate::parse::values::parse_memory_mib;
use crate::report::preflight::{PreflightRequest, preflight};
use crate::sysroot::HostRoot;
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum WindowsArg {
    #[value(name = "10")]
    Ten,
    #[value(name = "11")]
    Eleven,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum HugepagesArg {
    #[value(name = "2M")]
    TwoM,
    #[value(name = "1G")]
    OneG,
    None,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BusArg {
    Virtio,
    Scsi,
    Sata,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    #[arg(long)]
    pub name: String,
    /// The GPU to pass through (its whole passthrough set goes with it).
    #[arg(long, value_name = "ADDRESS")]
    pub gpu: Option<String>,
    /// More devices to pass through (a USB controller for keyboard and mouse, a
    /// sound card); each brings its own passthrough set. Repeat for several.
    #[arg(long = "device", value_name = "ADDRESS")]
    pub devices: Vec<String>,
    /// A ROM file for the GPU (only when its own ROM is unusable).
    #[arg(long, value_name = "FILE")]
    pub rom: Option<String>,
    #[arg(long)]
    pub vcpus: usize,
    /// Guest memory, e.g. 16G or 12288M (at most 64T).
    #[arg(long, value_parser = parse_memory_arg)]
    pub memory: u64,
    /// Disk image file or block device (/dev/…).
    #[arg(long, value_name = "PATH")]
    pub disk: Option<String>,
    /// Disk bus: virtio (virtio-blk), scsi (virtio-scsi) or sata (default: virtio
    /// with --virtio-iso, SATA without).
    #[arg(long, value_enum)]
    pub disk_bus: Option<BusArg>,
    /// The Windows installer ISO.
    #[arg(long, value_name = "PATH")]
    pub iso: Option<String>,
    /// The virtio-win driver ISO.
    #[arg(long, value_name = "PATH")]
    pub virtio_iso: Option<String>,
    /// Hugepage size (default: one the host has reserved enough of, else none).
    #[arg(long, value_enum)]
    pub hugepages: Option<HugepagesArg>,
    #[arg(long, value_enum, default_value = "11")]
    pub windows: WindowsArg,
    /// nat (libvirt's default network), bridge:BR, macvtap:DEV, vf:ADDRESS (an
    /// SR-IOV virtual function) or none.
    #[arg(long, default_value = "nat", value_parser = parse_network)]
    pub network: Network,
    /// No SPICE display (once the GPU drives a monitor). With --looking-glass
    /// SPICE stays, on 127.0.0.1: the client's keyboard, mouse, clipboard and
    /// sound go through it.
    #[arg(long)]
    pub no_spice: bool,
    /// Leave vCPUs unpinned.
    #[arg(long)]
    pub no_pin: bool,
    /// Hide KVM from the guest (kvm hidden + Hyper-V vendor_id): only NVIDIA
    /// drivers before 465 need it (Code 43).
    #[arg(long)]
    pub hide_kvm: bool,
    /// Disk I/O through io_uring instead of native AIO.
    #[arg(long)]
    pub io_uring: bool,
    /// Do not try a stripped copy of the domain on this host's QEMU (the trial
    /// finds CPU features, SMM and firmware this host cannot run).
    #[arg(long)]
    pub no_trial: bool,
    #[command(flatten)]
    pub play: PlayArgs,
    #[command(flatten)]
    pub install: super::domain_install::InstallArgs,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// The most `--memory` takes: 64 TiB, more than any one host holds, and far
/// from where MiB -> bytes conversions overflow.
const MAX_MEMORY_MIB: u64 = 64 * 1024 * 1024;

/// How the user sees, types and hears (`domain new` and `domain tune`).
#[derive(Debug, Args, Default, Clone)]
pub struct PlayArgs {
    /// The keyboard to give the VM by evdev: its /dev/input/by-id/…-event-kbd
    /// (`vfio-assistant input list` shows them, `input watch` finds the one
    /// you press).
    #[arg(long, value_name = "PATH")]
    pub evdev_keyboard: Option<String>,
    /// The mouse by evdev: its /dev/input/by-id/…-event-mouse.
    #[arg(long, value_name = "PATH")]
    pub evdev_mouse: Option<String>,
    /// The keys that switch keyboard and mouse between host and VM:
    /// ctrl-ctrl, alt-alt, shift-shift, meta-meta, scrolllock, ctrl-scrolllock.
    #[arg(long, value_name = "KEYS")]
    pub grab_toggle: Option<String>,
    /// A USB device by its IDs, VENDOR:PRODUCT as lsusb shows them (starts
    /// without it when unplugged). Repeatable.
    #[arg(long = "usb", value_name = "VID:PID", value_parser = parse_usb_id)]
    pub usb: Vec<UsbId>,
    /// Looking Glass (the VM's screen in a window, no second monitor) at
    /// this resolution, e.g. 2560x1440: the shared memory, and SPICE on
    /// 127.0.0.1 for the client (the command to start it is printed).
    #[arg(long, value_name = "WxH", value_parser = parse_resolution)]
    pub looking_glass: Option<(u32, u32)>,
    /// HDR frames for Looking Glass (twice the shared memory).
    #[arg(long, requires = "looking_glass")]
    pub hdr: bool,
    /// Looking Glass through the kvmfr module's /dev/kvmfr0 (`tune apply
    /// --looking-glass WxH` sets it up) instead of /dev/shm.
    #[arg(long, requires = "looking_glass")]
    pub kvmfr: bool,
    /// An emulated sound card played through your desktop's sound server:
    /// auto (PipeWire where this QEMU and libvirt have it, else PulseAudio),
    /// pipewire, pulseaudio, or none (the GPU's HDMI audio only).
    #[arg(long, value_enum, default_value = "none")]
    pub sound: SoundArg,
}

#[derive(Debug, Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
pub enum SoundArg {
    #[default]
    None,
    Auto,
    Pipewire,
    Pulseaudio,
    /// Into SPICE, for the Looking Glass client to play (the default with
    /// --looking-glass).
    Spice,
}

pub fn parse_resolution(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("{s:?}: give WIDTHxHEIGHT, e.g. 2560x1440"))?;
    let n = |x: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|_| format!("{s:?}: {x:?} is not a number of pixels"))
    };
    Ok((n(w)?, n(h)?))
}

impl PlayArgs {
    /// The choices, with the sound backend from `versions` (QEMU's and
    /// libvirt's, when a connection could say).
    pub fn playable(&self, versions: Option<(u64, u64)>) -> Playable {
        use crate::domain::playable::{
            AudioBackend, LookingGlass, Sound, audio_backend, session_runtime_dir,
        };
        let backend = match self.sound {
            SoundArg::None => None,
            SoundArg::Auto => Some(audio_backend(
                versions.map(|v| v.0),
                versions.map(|v| v.1),
                self.looking_glass.is_some(),
            )),
            SoundArg::Spice => Some(AudioBackend::Spice),
            SoundArg::Pipewire => Some(AudioBackend::Pipewire),
            SoundArg::Pulseaudio => Some(AudioBackend::Pulseaudio),
        };
        Playable {
            evdev_keyboard: self.evdev_keyboard.clone(),
            evdev_mouse: self.evdev_mouse.clone(),
            grab_toggle: self.grab_toggle.clone(),
            looking_glass: self.looking_glass.map(|(width, height)| LookingGlass {
                width,
                height,
                hdr: self.hdr,
                kvmfr: self.kvmfr,
            }),
            sound: backend.map(|backend| Sound {
                backend,
                runtime_dir: session_runtime_dir(),
            }),
            usb: self.usb.clone(),
        }
    }
}

fn parse_memory_arg(s: &str) -> Result<u64, String> {
    let mib = parse_memory_mib(s).map_err(|e| e.0)?;
    if mib > MAX_MEMORY_MIB {
        return Err(format!(
            "{s} is more than {} TiB",
            MAX_MEMORY_MIB / (1024 * 1024)
        ));
    }
    Ok(mib)
}

fn parse_network(s: &str) -> Result<Network, String> {
    match s.split_once(':') {
        None if s == "nat" => Ok(Network::Nat),
        None if s == "none" => Ok(Network::None),
        Some(("bridge", br)) if !br.is_empty() => Ok(Network::Bridge(br.into())),
        Some(("macvtap", dev)) if !dev.is_empty() => Ok(Network::Macvtap(dev.into())),
        Some(("vf", addr)) if crate::domain::hostdev::PciAddr::parse(addr.trim()).is_some() => {
            Ok(Network::Vf(addr.into()))
        }
        _ => Err(format!(
            "{s:?}: use nat, none, bridge:BRIDGE, macvtap:INTERFACE or vf:PCI-ADDRESS"
        )),
    }
}

pub fn run(root: &HostRoot, args: &NewArgs, demo: bool) -> anyhow::Result<i32> {
    let snap = scan(root)?;
    // The capabilities describe the libvirt asked; for another host's snapshot
    // (--root) only an explicit --connect says which one that is, and without
    // it no connection is opened at all.
    let ask = root.is_live() || demo || args.connect.connect.is_some();
    let hv = if ask {
        match args.connect.open(demo) {
            Ok(hv) => Some(hv),
            Err(e) => {
                errln!(
                    "note: not checked against libvirt ({e:#}); using the usual Hyper-V set — `domain validate` on the target host checks it"
                );
                None
            }
        }
    } else {
        None
    };
    let caps = hv.as_ref().and_then(|h| caps_of(h));
    let versions = hv.as_ref().and_then(|h| h.versions().ok());
    let mut choices = choices_of(args);
    choices.playable = args.play.playable(versions);
    if let Err(e) = crate::domain::playable::validate(&choices.playable) {
        return Err(anyhow::anyhow!("{e}"));
    }
    let mut prepared = prepare(&snap, &choices, caps).map_err(anyhow::Error::msg)?;
    if let Some(ic) = args
        .install
        .choices(args.iso.as_deref(), args.virtio_iso.as_deref())?
    {
        let u = add_install(root, &snap, &mut prepared, &ic)?;
        errln!(
            "note: answer media {} for {} (build {}): it holds the account's password until `vfio-assistant domain install-done {}`",
            u.media.display(),
            u.edition.name,
            u.edition.build,
            args.name
        );
    }
    let built = new_windows(&prepared.spec)?;
    let cwd = std::env::current_dir().ok();
    let req = PreflightRequest {
        base_dir: cwd.as_deref(),
        trial: !args.no_trial,
    };
    let pre = preflight(
        root,
        &snap,
        hv.as_ref().map(|h| h as &dyn Hypervisor),
        &built.xml,
        &req,
    )?;
    if let Some(f) = pre
        .findings
        .iter()
        .find(|f| f.id == "preflight.disk" && f.status == Status::Fail)
    {
        errln!(
            "error: {}: {} {}",
            f.title,
            f.why,
            f.fix.as_deref().unwrap_or("")
        );
        return Ok(2);
    }
    out!("{}", pre.xml)?;
    for e in built.edits.iter().chain(&pre.adapted) {
        errln!("{}: {}\n  why: {}", e.path, e.what, e.why);
    }
    for n in &prepared.notes {
        errln!("note: {n}");
    }
    // How to start the client, from the domain as written (the preflight's
    // adaptations included), so the command matches the XML.
    if let Some(c) = Document::parse(&pre.xml)
        .ok()
        .as_ref()
        .and_then(ClientSetup::from_domain)
    {
        errln!("note: {}", c.explain(&args.name));
    }
    for f in pre.findings.iter().filter(|f| f.status != Status::Pass) {
        errln!("preflight {}: {}", f.status.word(), f.title);
        if let Some(fix) = f.fix_text() {
            errln!("  fix: {fix}");
        }
    }
    Ok(if pre.passes() { 0 } else { 1 })
}

fn choices_of(args: &NewArgs) -> Choices {
    Choices {
        name: args.name.clone(),
        windows: match args.windows {
            WindowsArg::Ten => Windows::Ten,
            WindowsArg::Eleven => Windows::Eleven,
        },
        gpu: args.gpu.clone(),
        devices: args.devices.clone(),
        gpu_rom: args.rom.clone(),
        vcpus: args.vcpus,
        memory_mib: args.memory,
        hugepages: args.hugepages.map(|h| match h {
            HugepagesArg::TwoM => Hugepages::TwoMiB,
            HugepagesArg::OneG => Hugepages::OneGiB,
            HugepagesArg::None => Hugepages::None,
        }),
        disk: args.disk.clone(),
        disk_bus: args.disk_bus.map(|b| match b {
            BusArg::Virtio => DiskBus::Virtio,
            BusArg::Scsi => DiskBus::Scsi,
            BusArg::Sata => DiskBus::Sata,
        }),
        install_iso: args.iso.clone(),
        virtio_iso: args.virtio_iso.clone(),
        answer_iso: None,
        network: args.network.clone(),
        spice: !args.no_spice,
        pin: !args.no_pin,
        hide_kvm: args.hide_kvm,
        io_uring: args.io_uring,
        playable: Playable::default(),
    }
}
