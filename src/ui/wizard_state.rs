//! What the New VM wizard remembers between runs (data only): the user's
//! choices, turned into `domain::from_host::Choices` when the domain is built.

use crate::domain::from_host::Choices;
use crate::domain::template::{DiskBus, Hugepages, Network, Windows};
use crate::ui::vm_model::VmModel;
use serde::{Deserialize, Serialize};

/// Declares `Step` in the wizard's order, with `Step::ALL`. Each step's
/// `StepSpec` sits in `views::wizard::STEPS` at its variant's place, which
/// the compiler checks there (a step without its line, or a line out of
/// place, does not compile).
macro_rules! steps {
    ($($(#[$m:meta])* $variant:ident,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
        pub enum Step {
            $($(#[$m])* $variant,)*
        }

        impl Step {
            /// Every step, in the wizard's order.
            pub const ALL: &[Step] = &[$(Step::$variant,)*];
        }
    };
}

steps! {
    #[default]
    Gpu,
    Cpu,
    Memory,
    Storage,
    Network,
    /// How the user sees, types and hears: evdev, USB, Looking Glass, sound.
    UseIt,
    Features,
    Review,
}

impl Step {
    fn index(self) -> usize {
        self as usize
    }
    fn at(i: usize) -> Option<Step> {
        Step::ALL.get(i).copied()
    }
    pub fn next(self) -> Step {
        Step::at(self.index() + 1).unwrap_or(self)
    }
    pub fn prev(self) -> Step {
        self.index()
            .checked_sub(1)
            .and_then(Step::at)
            .unwrap_or(self)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum HugeChoice {
    /// What the host has reserved enough of, else none.
    #[default]
    Auto,
    TwoMiB,
    OneGiB,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum NetChoice {
    #[default]
    Nat,
    Bridge,
    Macvtap,
    /// An SR-IOV virtual function (`net_device` holds its PCI address).
    Vf,
    Off,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WizardState {
    pub step: Step,
    // The VM itself (name, GPU, devices, memory, hugepages, media) is
    // `State::vm`, its vCPUs the board's: held once for every page.
    pub windows11: bool,
    /// The user said this VM has no GPU of its own (no passthrough): the
    /// Review does not ask for one.
    pub no_passthrough: bool,
    pub pin: bool,
    pub disk: String,
    /// Make a new qcow2 image at `disk` (of `disk_size_gib`) instead of
    /// naming an existing one.
    pub create_disk: bool,
    pub disk_size_gib: u64,
    /// `None`: virtio with the virtio-win ISO, SATA without.
    pub disk_bus: Option<DiskBus>,
    pub network: NetChoice,
    /// The bridge or host interface for Bridge / Macvtap.
    pub net_device: String,
    pub spice: bool,
    /// Code 43 workaround for NVIDIA drivers before 465.
    pub hide_kvm: bool,
    pub io_uring: bool,
    /// Keyboard and mouse by evdev (`/dev/input/by-id/…`), empty: none.
    pub evdev_keyboard: String,
    pub evdev_mouse: String,
    pub grab_toggle: String,
    /// USB devices by ID (`046d:c52b`).
    pub usb: Vec<String>,
    /// Looking Glass at this resolution.
    pub looking_glass: bool,
    pub lg_width: u32,
    pub lg_height: u32,
    pub lg_hdr: bool,
    /// Through the kvmfr module (the tuning's `kvmfr` change sets it up).
    pub lg_kvmfr: bool,
    /// An emulated sound card on the desktop's sound server.
    pub sound: bool,
    /// (QEMU's, libvirt's) versions from the wizard's connection: which
    /// sound backend they offer. Read each time, not saved.
    #[serde(skip)]
    pub versions: Option<(u64, u64)>,
    /// Where "Define in libvirt" goes; empty = the default for the source.
    pub uri: String,
    /// Where "Save" writes.
    pub save_path: String,
}

impl Default for WizardState {
    fn default() -> Self {
        WizardState {
            step: Step::Gpu,
            windows11: true,
            no_passthrough: false,
            pin: true,
            disk: String::new(),
            create_disk: true,
            disk_size_gib: 128,
            disk_bus: None,
            network: NetChoice::Nat,
            net_device: String::new(),
            spice: true,
            hide_kvm: false,
            io_uring: false,
            evdev_keyboard: String::new(),
            evdev_mouse: String::new(),
            grab_toggle: "ctrl-ctrl".into(),
            usb: Vec::new(),
            looking_glass: false,
            lg_width: 1920,
            lg_height: 1080,
            lg_hdr: false,
            lg_kvmfr: false,
            sound: false,
            versions: None,
            uri: String::new(),
            save_path: String::new(),
        }
    }
}

fn non_empty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// A guest memory default for a host with `total_kib`: half of it in whole
/// GiB, at least 2 and at most 16 (8 when unknown). The old fixed 16 GiB did
/// not fit a host with 7 GiB.
pub fn default_memory_gib(total_kib: Option<u64>) -> u64 {
    match total_kib {
        Some(kib) => (kib / (2 * 1024 * 1024)).clamp(2, 16),
        None => 8,
    }
}

impl WizardState {
    /// The "Use it" choices for the domain (the sound backend from what
    /// this host's QEMU and libvirt offer, `versions`).
    pub fn playable(&self) -> crate::domain::playable::Playable {
        use crate::domain::playable::{LookingGlass, Playable, Sound, UsbId, audio_backend};
        Playable {
            evdev_keyboard: non_empty(&self.evdev_keyboard),
            evdev_mouse: non_empty(&self.evdev_mouse),
            grab_toggle: non_empty(&self.grab_toggle),
            looking_glass: self.looking_glass.then_some(LookingGlass {
                width: self.lg_width,
                height: self.lg_height,
                hdr: self.lg_hdr,
                kvmfr: self.lg_kvmfr,
            }),
            sound: self.sound.then(|| Sound {
                backend: audio_backend(
                    self.versions.map(|v| v.0),
                    self.versions.map(|v| v.1),
                    self.looking_glass,
                ),
                runtime_dir: crate::domain::playable::session_runtime_dir(),
            }),
            usb: self
                .usb
                .iter()
                .filter_map(|u| crate::domain::playable::parse_usb_id(u).ok())
                .collect::<Vec<UsbId>>(),
        }
    }

    /// Whether the storage step is done: a disk named (to create or existing).
    pub fn has_disk(&self) -> bool {
        !self.disk.trim().is_empty()
    }

    /// What the VM lacks to install and pass through (the Review's
    /// blockers besides the disk): `domain::install_needs`.
    pub fn needs(&self, vm: &VmModel, vcpus: u32) -> Vec<crate::domain::install_needs::Need> {
        let c = self.choices(vm, vcpus, None);
        let mut needs =
            crate::domain::install_needs::missing(&c, self.create_disk, self.no_passthrough);
        if vm.unattended {
            needs.extend(crate::domain::install_needs::unattended_missing(
                &c,
                &vm.win_user,
            ));
        }
        needs
    }

    /// The unattended install's choices, when the VM has one.
    pub fn install_choices(
        &self,
        vm: &VmModel,
    ) -> Option<crate::install::for_domain::InstallChoices> {
        if !vm.unattended {
            return None;
        }
        Some(crate::install::for_domain::InstallChoices {
            windows_iso: vm.install_iso.trim().into(),
            virtio_iso: vm.virtio_iso.trim().into(),
            user: vm.win_user.trim().to_string(),
            password: vm.win_password.clone(),
            edition: None,
            looking_glass_installer: non_empty(&vm.lg_installer).map(Into::into),
            out: None,
        })
    }

    /// The choices for the domain: the shared VM's with `vcpus` (the
    /// board's, or the suggestion while it has none) and the wizard's own.
    pub fn choices(&self, vm: &VmModel, vcpus: u32, total_kib: Option<u64>) -> Choices {
        Choices {
            playable: self.playable(),
            name: vm.name.clone(),
            windows: if self.windows11 {
                Windows::Eleven
            } else {
                Windows::Ten
            },
            gpu: vm.gpu.clone(),
            devices: vm.devices.clone(),
            gpu_rom: None,
            vcpus: (vcpus as usize).max(1),
            memory_mib: vm.memory_for(total_kib).max(1).saturating_mul(1024),
            hugepages: match vm.hugepages {
                HugeChoice::Auto => None,
                HugeChoice::TwoMiB => Some(Hugepages::TwoMiB),
                HugeChoice::OneGiB => Some(Hugepages::OneGiB),
                HugeChoice::Off => Some(Hugepages::None),
            },
            disk: non_empty(&self.disk),
            disk_bus: self.disk_bus,
            install_iso: non_empty(&vm.install_iso),
            virtio_iso: non_empty(&vm.virtio_iso),
            answer_iso: None,
            network: match self.network {
                NetChoice::Nat => Network::Nat,
                NetChoice::Bridge => Network::Bridge(self.net_device.trim().to_string()),
                NetChoice::Macvtap => Network::Macvtap(self.net_device.trim().to_string()),
                NetChoice::Vf => Network::Vf(self.net_device.trim().to_string()),
                NetChoice::Off => Network::None,
            },
            spice: self.spice,
            pin: self.pin,
            hide_kvm: self.hide_kvm,
            io_uring: self.io_uring,
        }
    }
}
