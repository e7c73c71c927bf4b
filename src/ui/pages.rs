//! One runtime per page: its own job slots and their typed answers, so a
//! page's job never lands in another page's result and one page's work does
//! not block another's buttons. Views read these; the app fills them.

use super::jobs::{LatencyPair, VmDone};
use super::runtime::Slot;
use crate::checks::model::Finding;
use crate::libvirt::DomainState;
use crate::libvirt::caps::DomainCaps;
use crate::report::lifecycle::DefinePlan;
use crate::report::preflight::Preflight;
use crate::report::storage::DiskPlace;
use std::collections::BTreeMap;
use std::time::Instant;

/// Start / Shut down / Force off for one domain, with its state kept live
/// (read again every few seconds while the page shows).
pub struct VmControl {
    /// The domain the buttons act on.
    pub name: Option<String>,
    pub state: Option<Result<DomainState, String>>,
    pub state_job: Slot<Result<DomainState, String>>,
    pub state_read_at: Option<Instant>,
    pub action: Slot<Result<VmDone, String>>,
    pub done: Option<Result<VmDone, String>>,
}

impl VmControl {
    pub fn new() -> Self {
        VmControl {
            name: None,
            state: None,
            state_job: Slot::new("reading the VM's state"),
            state_read_at: None,
            action: Slot::new("starting or stopping the VM"),
            done: None,
        }
    }
    /// Follow another domain (its state is read afresh).
    pub fn follow(&mut self, name: &str) {
        if self.name.as_deref() != Some(name) {
            self.name = Some(name.to_string());
            self.state = None;
            self.state_read_at = None;
            self.done = None;
        }
    }
}

impl Default for VmControl {
    fn default() -> Self {
        Self::new()
    }
}

/// The New VM wizard's libvirt answers.
pub struct WizardRuntime {
    /// The URI used when the user leaves it empty.
    pub default_uri: String,
    pub caps: Option<DomainCaps>,
    /// The connection's (QEMU, libvirt) versions, with the caps.
    pub versions: Option<(u64, u64)>,
    pub caps_job: Slot<Result<super::jobs::CapsAndVersions, String>>,
    /// The URI whose capabilities were asked for.
    pub caps_asked: Option<String>,
    pub validate_job: Slot<Result<Preflight, String>>,
    /// The last preflight, with the XML it was run on.
    pub preflight: Option<(String, Result<Preflight, String>)>,
    pub define_job: Slot<Result<DefinePlan, String>>,
    pub defined: Option<Result<DefinePlan, String>>,
    pub saved: Option<Result<String, String>>,
    pub pick_job: Slot<(super::jobs::PickField, Option<String>)>,
    /// "Press a key": the input devices watched for a few seconds.
    pub input_job: Slot<Result<Vec<crate::host::input::Reaction>, String>>,
    pub input_result: Option<Result<Vec<crate::host::input::Reaction>, String>>,
    /// Said when a file dialog gave nothing.
    pub pick_note: Option<String>,
    pub disk_job: Slot<Result<String, String>>,
    pub disk_made: Option<Result<String, String>>,
    pub place_job: Slot<(String, DiskPlace)>,
    /// Where a new disk would go and the space there, for the VM name asked.
    pub place: Option<(String, DiskPlace)>,
    /// The VM name a place was last asked for (asked once per name).
    pub place_asked: Option<String>,
    /// What the Windows installer ISO holds (install::unattended::describe_iso),
    /// for the path it was read from.
    pub iso_job: Slot<(String, Result<String, String>)>,
    pub iso_seen: Option<(String, Result<String, String>)>,
    /// The virtio-win disc fetched on the user's click.
    pub virtio_fetch: super::virtio_fetch::VirtioFetch,
    pub vm: VmControl,
}

impl WizardRuntime {
    pub fn new(default_uri: &str) -> Self {
        WizardRuntime {
            default_uri: default_uri.to_string(),
            caps: None,
            versions: None,
            caps_job: Slot::new("reading the domain capabilities"),
            caps_asked: None,
            validate_job: Slot::new("checking the domain on this host"),
            preflight: None,
            define_job: Slot::new("defining the domain"),
            defined: None,
            saved: None,
            pick_job: Slot::new("showing the file dialog"),
            input_job: Slot::new("watching the keyboards and mice"),
            input_result: None,
            pick_note: None,
            disk_job: Slot::new("creating the disk image"),
            disk_made: None,
            place_job: Slot::new("looking for room for the disk"),
            place: None,
            place_asked: None,
            iso_job: Slot::new("reading the Windows installer ISO"),
            iso_seen: None,
            virtio_fetch: super::virtio_fetch::VirtioFetch::new(),
            vm: VmControl::new(),
        }
    }
}

/// The Troubleshoot page: the domain's findings and its buttons.
pub struct TroubleshootRuntime {
    pub probe_job: Slot<Result<Vec<Finding>, String>>,
    pub vm_findings: Option<Result<Vec<Finding>, String>>,
    pub vm: VmControl,
}

impl Default for TroubleshootRuntime {
    fn default() -> Self {
        TroubleshootRuntime {
            probe_job: Slot::new("reading the VM"),
            vm_findings: None,
            vm: VmControl::new(),
        }
    }
}

/// The Devices page: ROM reads.
pub struct DevicesRuntime {
    pub rom_job: Slot<(String, Finding)>,
    /// Address -> the `device.rom` finding of its last read.
    pub rom_findings: BTreeMap<String, Finding>,
}

impl Default for DevicesRuntime {
    fn default() -> Self {
        DevicesRuntime {
            rom_job: Slot::new("reading the ROM"),
            rom_findings: BTreeMap::new(),
        }
    }
}

/// The CPU page: applying the board to a domain.
pub struct CpuRuntime {
    pub apply_job: Slot<Result<String, String>>,
    pub applied: Option<Result<String, String>>,
    pub saved: Option<Result<String, String>>,
    /// Domains whose pinning was changed here while they ran: the
    /// Troubleshoot page says "applied, takes effect at the next start".
    pub pending_restart: Vec<String>,
}

impl Default for CpuRuntime {
    fn default() -> Self {
        CpuRuntime {
            apply_job: Slot::new("applying the pinning"),
            applied: None,
            saved: None,
            pending_restart: Vec::new(),
        }
    }
}

/// The Monitor page's probe (its sampler lives in the app).
pub struct MonitorRuntime {
    pub latency_job: Slot<LatencyPair>,
}

impl Default for MonitorRuntime {
    fn default() -> Self {
        MonitorRuntime {
            latency_job: Slot::new("measuring latency"),
        }
    }
}

/// The Tuning page: the host's tuning facts, the helper's run and the journal.
pub struct TuningRuntime {
    pub facts_job: Slot<crate::tuning::facts::TuneFacts>,
    pub facts: Option<crate::tuning::facts::TuneFacts>,
    /// The checks before single-GPU passthrough (`report::single_gpu`),
    /// read once when it is asked for.
    pub single_gpu_job: Slot<Vec<crate::finding::Finding>>,
    pub single_gpu: Option<Vec<crate::finding::Finding>>,
    pub status_job: Slot<Vec<crate::tuning::status::EntryStatus>>,
    pub status: Vec<crate::tuning::status::EntryStatus>,
    /// A transaction still running (its app was closed while its helper
    /// went on): the journal read again, apart from the page's jobs.
    pub watch_job: Slot<Vec<crate::tuning::status::EntryStatus>>,
    /// The journal was read since the last change.
    pub status_asked: bool,
    /// The helper's lines while it runs.
    pub run: Option<std::sync::mpsc::Receiver<super::jobs::HelperMsg>>,
    /// What the last run said, in order.
    pub lines: Vec<crate::helper::client::Heard>,
    /// How many steps the run has (for the progress bar).
    pub steps: usize,
    /// The last run's end: its exit code and words for it.
    pub ended: Option<(Option<i32>, Option<String>)>,
    /// The last run's request as a command for a terminal (said when
    /// pkexec could not run it).
    pub terminal: String,
    /// Changes to select when the page opens from a Fix button.
    pub focus: Vec<String>,
    /// Tests: the helper to run on a captured root instead of the installed
    /// one (`VFIO_ASSISTANT_HELPER` names it for a whole process).
    pub helper: Option<super::jobs::HelperProgram>,
    /// The page's plan and the request it was made for: drawn every frame,
    /// planned again only when the choices change (or the host's facts or
    /// snapshot, `forget_plan`).
    plan_memo: std::cell::RefCell<Option<PlanMemo>>,
    /// How many plans the page has made (tests count them).
    pub plans_made: std::cell::Cell<usize>,
}

/// A plan the Tuning page made, for the request and mode it was made for.
struct PlanMemo {
    request: crate::tuning::model::Request,
    live: bool,
    plan: std::rc::Rc<Result<crate::tuning::model::Plan, crate::tuning::plan::PlanError>>,
}

impl Default for TuningRuntime {
    fn default() -> Self {
        TuningRuntime {
            facts_job: Slot::new("reading the host's tuning"),
            facts: None,
            single_gpu_job: Slot::new("checking single-GPU passthrough"),
            single_gpu: None,
            status_job: Slot::new("reading the journal"),
            status: Vec::new(),
            watch_job: Slot::new("following a tuning that still runs"),
            status_asked: false,
            run: None,
            lines: Vec::new(),
            steps: 0,
            ended: None,
            terminal: String::new(),
            focus: Vec::new(),
            helper: None,
            plan_memo: Default::default(),
            plans_made: Default::default(),
        }
    }
}

impl TuningRuntime {
    pub fn is_running(&self) -> bool {
        self.run.is_some()
    }

    /// The plan for `request` on `snap` with `facts` (commands listed, not
    /// run, unless `live`): the one made before for the same request, else
    /// made now and kept. (Pure: no I/O, as a view needs.)
    pub fn plan_for(
        &self,
        snap: &crate::host::HostSnapshot,
        facts: &crate::tuning::facts::TuneFacts,
        request: &crate::tuning::model::Request,
        live: bool,
    ) -> std::rc::Rc<Result<crate::tuning::model::Plan, crate::tuning::plan::PlanError>> {
        let mut memo = self.plan_memo.borrow_mut();
        if let Some(m) = memo
            .as_ref()
            .filter(|m| m.request == *request && m.live == live)
        {
            return m.plan.clone();
        }
        // A captured host's changes are written into its tree; commands
        // are listed, not run (as `tune --root`).
        let planned = crate::tuning::prepare::plan_to_run(snap, facts, request, live);
        self.plans_made.set(self.plans_made.get() + 1);
        let plan = std::rc::Rc::new(planned);
        *memo = Some(PlanMemo {
            request: request.clone(),
            live,
            plan: plan.clone(),
        });
        plan
    }

    /// The host's facts or snapshot changed: the next frame plans again.
    pub fn forget_plan(&self) {
        self.plan_memo.replace(None);
    }
}
