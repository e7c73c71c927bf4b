//! What views ask for while drawing (`Command`): each carries only what
//! the view knows; the app adds the host, the URI and the snapshot
//! (commands.rs runs them).

use crate::checks::rom::Card;
use crate::pinning::PinPlan;
use crate::ui::jobs::{PickField, VmAction};
use crate::ui::state::Page;

/// Which page's VM buttons were pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmPage {
    Wizard,
    Troubleshoot,
}

#[must_use]
#[derive(Debug, Clone)]
pub enum Command {
    Rescan,
    /// Show another host (the top bar's picker).
    SwitchHost(crate::ui::Source),
    ShowPage(Page),
    /// Show this device on the Devices page.
    ShowDevice(String),
    /// The New VM page with this device to pass through (a GPU as the
    /// VM's GPU, anything else among its extra devices).
    NewVmWith(String),
    /// (Re)start the monitor's sampler.
    StartMonitor,
    /// Devices: read a card's ROM.
    ReadRom {
        addr: String,
        card: Card,
    },
    /// CPU: tune a domain's pinning (and the CPU topology that goes with it).
    ApplyPinning {
        domain: String,
        plan: Box<PinPlan>,
        /// Also the Hyper-V enlightenments and timers.
        tune_rest: bool,
    },
    /// The CPU page's Apply row, for a finding's fix: with the Hyper-V and
    /// timer tuning ticked when `tune_rest`, and the VM the Troubleshoot page
    /// reads as its domain when none is set.
    OpenCpuApply {
        tune_rest: bool,
    },
    /// CPU: write the board's XML fragment to a file.
    SaveBoardXml {
        xml: String,
        path: String,
    },
    /// Monitor: the timer latency probe.
    Latency {
        cpus: Vec<u32>,
        seconds: u64,
        compare_idle: bool,
    },
    /// Wizard: a file dialog for a field.
    PickFile(PickField),
    /// Wizard: watch these input devices (by-id paths) for a key press or
    /// a mouse move.
    WatchInput {
        devices: Vec<String>,
    },
    /// Wizard: the preflight of this XML.
    Validate {
        xml: String,
    },
    /// Wizard: define (or update) it; with `install`, the answer media of
    /// an unattended install is built first and the domain boots from it.
    Define {
        xml: String,
        install: Option<Box<crate::ui::install_jobs::UnattendedDefine>>,
    },
    /// Wizard: write the XML to a file.
    SaveXml {
        xml: String,
        path: String,
    },
    /// Wizard: a new qcow2 image.
    CreateDisk {
        path: String,
        size_gib: u64,
    },
    /// Wizard: where a new disk for this VM would go.
    DiskPlace {
        vm_name: String,
    },
    /// Wizard: what the Windows installer ISO at `path` holds.
    InspectIso {
        path: String,
    },
    /// Wizard: fetch the virtio-win disc to `to` (the user clicked), or stop.
    DownloadVirtio {
        to: String,
    },
    CancelVirtioDownload,
    /// Start / shut down / force off a domain, from a page's buttons.
    Vm {
        page: VmPage,
        name: String,
        action: VmAction,
    },
    /// Troubleshoot: read this domain (and follow its state).
    ProbeVm(String),
    /// Tuning: apply these changes through the helper (`steps` for the bar).
    TuningApply {
        request: crate::tuning::model::Request,
        steps: usize,
    },
    /// Tuning: undo a transaction through the helper.
    TuningUndo {
        id: String,
    },
    /// Open the Tuning page with these changes asked for (a Fix button),
    /// these devices for the VM, and (when given) hugepages reserved for
    /// its memory (this many GiB when it has none chosen yet).
    OpenTuning {
        focus: Vec<String>,
        gpus: Vec<String>,
        memory_gib: Option<u64>,
    },
    /// The Tuning page with this GPU shared: the desktop's while the VM
    /// (the New VM page's name) is off.
    OpenSharedTuning {
        gpu: String,
    },
    /// The Tuning page with single-GPU passthrough of this card for the
    /// New VM page's VM.
    OpenSingleGpuTuning {
        gpu: String,
    },
    /// The user picked this card as the VM's (the Overview's choice).
    ChooseVmGpu(String),
}
