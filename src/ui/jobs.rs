//! The work the app's pages start off the UI thread, as plain functions
//! over the library's use cases (`report::*`, `checks`, `monitor`): each page
//! runtime (`pages.rs`) runs them in its own `Slot` and keeps the typed
//! answer. Nothing here draws, and nothing here is composed twice: the CLI
//! calls the same `report` functions.

use crate::checks::model::Finding;
use crate::domain::tune::{TuneOptions, tune};
use crate::domain::xml::Document;
use crate::host::HostSnapshot;
use crate::libvirt::caps::DomainCaps;
use crate::libvirt::{DomainState, Hypervisor, connect};

type Libvirt = Box<dyn Hypervisor + Send>;
use crate::monitor::idle_hold::{IdleHold, probe_compared};
use crate::monitor::latency::LatencyStats;
use crate::pinning::PinPlan;
use crate::report::lifecycle::{DefinePlan, StartOutcome, commit_define, plan_define, start_on};
use crate::report::preflight::{Preflight, PreflightRequest, caps_of, preflight};
use crate::sysroot::HostRoot;
use std::sync::Arc;
use std::time::Duration;

fn open(uri: &str) -> Result<Libvirt, String> {
    connect(uri).map_err(|e| e.to_string())
}

/// A connection's domain capabilities and its (QEMU, libvirt) versions.
pub type CapsAndVersions = (DomainCaps, Option<(u64, u64)>);

/// Domain capabilities of a URI (for the Hyper-V set and the loaders), and
/// its QEMU's and libvirt's versions (for the sound backend).
pub fn caps(uri: &str) -> Result<CapsAndVersions, String> {
    let hv = open(uri)?;
    let caps = caps_of(&hv).ok_or_else(|| format!("{uri} gives no domain capabilities"))?;
    Ok((caps, hv.versions().ok()))
}

/// The one preflight (the CLI's `domain validate`), with a trial start on
/// a live QEMU connection. Without libvirt it still checks what it can.
pub fn validate(
    root: &HostRoot,
    snap: &HostSnapshot,
    uri: &str,
    xml: &str,
) -> Result<Preflight, String> {
    let hv = connect(uri).ok();
    let req = PreflightRequest {
        base_dir: None,
        trial: true,
    };
    preflight(
        root,
        snap,
        hv.as_ref().map(|h| h as &dyn Hypervisor),
        xml,
        &req,
    )
    .map_err(|e| e.to_string())
}

/// Define (or update) the domain: the preflight's adapted XML, keeping what
/// an existing domain of that name has (the CLI's `domain define --yes`).
pub fn define(
    root: &HostRoot,
    snap: &HostSnapshot,
    uri: &str,
    xml: &str,
) -> Result<DefinePlan, String> {
    let hv = open(uri)?;
    let req = PreflightRequest {
        base_dir: None,
        trial: true,
    };
    let plan = plan_define(root, snap, &hv, xml, &req).map_err(|e| e.to_string())?;
    if !plan.preflight.passes() {
        let why: Vec<String> = plan
            .preflight
            .findings
            .iter()
            .filter(|f| f.status == crate::checks::model::Status::Fail)
            .map(|f| f.title.clone())
            .collect();
        return Err(format!(
            "Not defined: it would not start here: {}",
            why.join("; ")
        ));
    }
    commit_define(&hv, &plan).map_err(|e| e.to_string())?;
    Ok(plan)
}

/// What a VM button asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmAction {
    Start,
    /// ACPI shutdown (the guest decides).
    Shutdown,
    /// Pull the plug.
    ForceOff,
    /// An unattended install: how far is it (install::progress::stage)?
    InstallStatus,
    /// An unattended install: take its CDs out, delete the answer media.
    InstallDone,
}

/// The answer to a VM button.
#[derive(Debug, Clone)]
pub enum VmDone {
    Started(StartOutcome),
    Stopped(String),
    /// What an unattended install's buttons found or did.
    Install(String),
}

/// A VM button; `remote` when the domain is another machine's (its failed
/// start explained from its QEMU log, read there).
pub fn vm_action(
    root: &HostRoot,
    uri: &str,
    name: &str,
    action: VmAction,
    remote: Option<&crate::remote::SshTarget>,
) -> Result<VmDone, String> {
    let hv = open(uri)?;
    match action {
        VmAction::Start => {
            let log_there = |name: &str| remote.and_then(|t| t.qemu_log(name));
            let log_there = remote.map(|_| &log_there as crate::report::lifecycle::LogThere);
            Ok(VmDone::Started(start_on(&hv, root, name, log_there)))
        }
        VmAction::Shutdown => hv
            .shutdown(name)
            .map(|_| {
                VmDone::Stopped(format!(
                    "Asked '{name}' to shut down (the guest decides when)."
                ))
            })
            .map_err(|e| e.to_string()),
        VmAction::ForceOff => hv
            .destroy(name)
            .map(|_| VmDone::Stopped(format!("'{name}' is off (forced).")))
            .map_err(|e| e.to_string()),
        VmAction::InstallStatus => {
            crate::ui::install_jobs::install_status(uri, name).map(VmDone::Install)
        }
        VmAction::InstallDone => {
            crate::ui::install_jobs::install_done(uri, name).map(VmDone::Install)
        }
    }
}

/// The domain's state, for the live state next to the buttons.
pub fn vm_state(uri: &str, name: &str) -> Result<DomainState, String> {
    open(uri)?.state(name).map_err(|e| e.to_string())
}

/// The doctor's domain checks: libvirt, QMP and one second of live data.
pub fn probe(
    root: &HostRoot,
    snap: &Arc<HostSnapshot>,
    uri: &str,
    name: &str,
) -> Result<Vec<Finding>, String> {
    let hv = open(uri)?;
    Ok(crate::report::findings::domain_findings(
        root, snap, &hv, name,
    ))
}

/// The timer latency probe on `cpus` for `seconds`; with `compare_idle`,
/// again with every CPU held out of deep idle states.
pub type LatencyPair = (
    Result<Vec<LatencyStats>, String>,
    Option<Result<Vec<LatencyStats>, String>>,
);

pub fn latency(cpus: &[u32], seconds: u64, compare_idle: bool) -> LatencyPair {
    let (interval, duration) = (
        Duration::from_micros(1000),
        Duration::from_secs(seconds.clamp(1, 60)),
    );
    // Opened first: without root the second run is refused at once.
    let (hold, refused) = match compare_idle.then(|| IdleHold::open(&HostRoot::live())) {
        Some(Ok(h)) => (Some(h), None),
        Some(Err(e)) => (None, Some(Err(e.to_string()))),
        None => (None, None),
    };
    match probe_compared(cpus, interval, duration, 80, hold) {
        Ok((c, h)) => (Ok(c), h.map(|r| r.map_err(|e| e.to_string())).or(refused)),
        Err(e) => (Err(e.to_string()), refused),
    }
}

/// Read a card's ROM (root: enabled in sysfs for the read) and judge it.
pub fn read_rom(root: &HostRoot, addr: &str, card: crate::checks::rom::Card) -> Finding {
    crate::report::rom::card_rom(root, addr, Some(card)).finding
}

/// Read the domain, tune only its pinning and CPU topology, define it again.
/// Write the board's pinning into `domain`; with `tune_rest` also the
/// Hyper-V enlightenments this host's KVM offers and the timers, as
/// `domain tune --domain NAME --vcpus N` does.
pub fn apply_pinning(
    domain: &str,
    uri: &str,
    plan: PinPlan,
    tune_rest: bool,
) -> Result<String, String> {
    let hv = open(uri)?;
    let xml = hv.domain_xml(domain).map_err(|e| e.to_string())?;
    let mut doc = Document::parse(&xml).map_err(|e| e.to_string())?;
    let opts = TuneOptions {
        plan: Some(plan),
        memballoon_off: false,
        cpu_host_passthrough: true,
        hyperv: tune_rest,
        hyperv_supported: tune_rest
            .then(|| caps_of(&hv).and_then(|c| c.hyperv))
            .flatten(),
        timers: tune_rest,
        hide_kvm: false,
        guest_agent: tune_rest,
    };
    let edits = tune(&mut doc, &opts).map_err(|e| e.to_string())?;
    if edits.is_empty() {
        return Ok(format!(
            "'{domain}' on {uri} already has this pinning: nothing to change."
        ));
    }
    hv.define(&doc.serialize()).map_err(|e| e.to_string())?;
    let what: Vec<String> = edits.iter().map(|e| e.what.clone()).collect();
    let running = hv.state(domain).is_ok_and(|s| s.is_active());
    Ok(format!(
        "Applied to '{domain}' on {uri}: {}. {}",
        what.join("; "),
        if running {
            "It runs now with its old pinning: the new one takes effect at its next start."
        } else {
            "It takes effect at its next start."
        }
    ))
}

/// Which wizard field a file dialog fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickField {
    Disk,
    InstallIso,
    VirtioIso,
    LgInstaller,
}

impl PickField {
    fn dialog(self) -> rfd::FileDialog {
        let d = rfd::FileDialog::new();
        match self {
            PickField::Disk => d
                .set_title("The VM's disk image")
                .add_filter("Disk images", &["qcow2", "raw", "img"])
                .set_directory("/var/lib/libvirt/images"),
            PickField::InstallIso => d
                .set_title("The Windows installer ISO")
                .add_filter("ISO images", &["iso"]),
            PickField::VirtioIso => d
                .set_title("The virtio-win driver ISO")
                .add_filter("ISO images", &["iso"]),
            PickField::LgInstaller => d
                .set_title("The Looking Glass host installer")
                .add_filter("Windows programs", &["exe"]),
        }
    }
}

/// A file dialog (the desktop's, through xdg-desktop-portal); `None` when
/// cancelled or no dialog could open.
/// "Press a key": which of `devices` react in five seconds.
pub fn watch_input(
    root: &HostRoot,
    devices: &[String],
) -> Result<Vec<crate::host::input::Reaction>, String> {
    crate::host::input::watch(root, devices, std::time::Duration::from_secs(5), &|| false)
        .map_err(|e| e.to_string())
}

pub fn pick_file(field: PickField) -> (PickField, Option<String>) {
    (
        field,
        field.dialog().pick_file().map(|p| p.display().to_string()),
    )
}

/// Create a qcow2 image for the wizard (in libvirt's pool when the path is
/// in it); its path.
pub fn create_disk(uri: &str, path: &str, size_gib: u64) -> Result<String, String> {
    let hv = connect(uri).ok();
    crate::report::storage::create_qcow2(hv.as_ref().map(|h| h as &dyn Hypervisor), path, size_gib)
        .map_err(|e| e.to_string())
}

/// Where the wizard's new disk would go by default, and the space there.
pub fn disk_place(uri: &str, vm_name: &str) -> crate::report::storage::DiskPlace {
    let hv = connect(uri).ok();
    crate::report::storage::default_place(hv.as_ref().map(|h| h as &dyn Hypervisor), vm_name)
}

/// What the helper said, line by line, then how it ended.
#[derive(Debug, Clone)]
pub enum HelperMsg {
    /// One line (a step's progress, the result, an error).
    Line(crate::helper::client::Heard),
    /// It ended: the exit code and what it printed on stderr.
    Exit(Option<i32>, String),
    /// It could not be started at all.
    NotStarted(String),
}

pub use crate::helper::helper_path;

/// Run the helper with `request`: through pkexec on the live host, directly
/// with `--root` on a captured or test host (it writes only inside it).
/// Each line arrives on `tx` as it is printed; `wake` repaints.
/// The helper program a test names instead of the installed one (with
/// extra arguments such as `--fail-at N`): only ever run directly, on a
/// captured or test root, never through pkexec.
#[derive(Debug, Clone, Default)]
pub struct HelperProgram {
    pub path: std::path::PathBuf,
    pub args: Vec<String>,
}

///
/// With `remote`, the helper is that machine's, run over SSH
/// (`SshTarget::helper_command`); `root` is then the snapshot, unused.
pub fn run_helper(
    root: &HostRoot,
    request: &crate::helper::HelperRequest,
    program: Option<&HelperProgram>,
    remote: Option<&crate::remote::SshTarget>,
    tx: std::sync::mpsc::Sender<HelperMsg>,
    wake: impl Fn() + Send + 'static,
) {
    use crate::helper::client::{self, Heard};
    // A test's program runs only on a captured root, never through pkexec.
    let (helper, args) = match program {
        Some(p) if !root.is_live() => (p.path.clone(), p.args.clone()),
        _ => (helper_path(), Vec::new()),
    };
    let mut heard = |h: Heard| {
        let _ = tx.send(HelperMsg::Line(h));
        wake();
    };
    // A captured or test root is written as this user, by the same code
    // the helper runs, in this process: the installed helper takes no
    // arguments, so it cannot be pointed at a tree.
    if remote.is_none() && !root.is_live() && program.is_none() {
        let env = crate::helper::HelperEnv {
            root: root.clone(),
            journal: None,
            fail_at: None,
            pause_at: None,
            asking_uid: None,
            through_sudo: false,
        };
        let code = crate::helper::serve(&env, request, &mut |r| heard(Heard::Reply(r)));
        let _ = tx.send(HelperMsg::Exit(Some(code), String::new()));
        wake();
        return;
    }
    let cmd = if let Some(t) = remote {
        match t.helper_command() {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(HelperMsg::NotStarted(e.to_string()));
                wake();
                return;
            }
        }
    } else if root.is_live() {
        // pkexec from the system's folders (it is setuid root there), never
        // one first on this session's PATH.
        let mut c = std::process::Command::new(crate::syspath::program("pkexec"));
        c.arg(&helper);
        c
    } else {
        let mut c = std::process::Command::new(&helper);
        c.args(&args).arg("--root").arg(root.base());
        c
    };
    let ended = match client::run(cmd, request, &mut heard) {
        Ok(e) => e,
        Err(e) => {
            let what = if root.is_live() {
                "pkexec"
            } else {
                "the helper"
            };
            let _ = tx.send(HelperMsg::NotStarted(format!(
                "{what} ({}) could not start: {e}",
                helper.display()
            )));
            wake();
            return;
        }
    };
    if let Some(words) = remote.and_then(|t| t.helper_words(ended.code, &ended.stderr)) {
        let _ = tx.send(HelperMsg::NotStarted(words));
        wake();
        return;
    }
    let _ = tx.send(HelperMsg::Exit(ended.code, ended.stderr));
    wake();
}

/// What the Tuning page plans from: the host's tuning facts.
pub fn tuning_facts(root: &HostRoot) -> crate::tuning::facts::TuneFacts {
    crate::tuning::facts::gather(root)
}

/// The journal's transactions and where each stands.
pub fn tuning_status(root: &HostRoot) -> Vec<crate::tuning::status::EntryStatus> {
    let env = crate::tuning::apply::Env::new(root.clone(), None, false);
    crate::tuning::status::status(&env)
}

/// The words for how the helper ended (pkexec's refusals too), for the page.
pub use super::pkexec_words::helper_exit_words;
