//! libvirt work off the UI thread (a daemon can be slow to answer): validate,
//! define, fetch domain capabilities. One short-lived thread per job; the app
//! drains the result in `logic`.

use crate::checks::model::Finding;
use crate::checks::vm::{probe_vm, vm_findings};
use crate::cli::domain_virt::caps_of;
use crate::domain::tune::{TuneOptions, tune};
use crate::domain::validate::{SchemaResult, caps_problems, schema_check};
use crate::domain::xml::Document;
use crate::host::HostSnapshot;
use crate::libvirt::caps::DomainCaps;
use crate::libvirt::{Hypervisor, Libvirt};
use crate::monitor::idle_hold::{IdleHold, probe_compared};
use crate::monitor::latency::LatencyStats;
use crate::pinning::PinPlan;
use crate::sysroot::HostRoot;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Job {
    /// Domain capabilities of a URI (for the Hyper-V set).
    Caps(String),
    /// Schema + capabilities check of the XML against a URI.
    Validate {
        xml: String,
        uri: String,
    },
    Define {
        xml: String,
        uri: String,
    },
    /// The doctor's domain checks: libvirt, QMP and one second of live data.
    ProbeVm {
        domain: String,
        uri: String,
        root: HostRoot,
        snapshot: Arc<HostSnapshot>,
    },
    /// A file dialog (the desktop's, through xdg-desktop-portal) for a wizard field.
    PickFile(PickField),
    /// The timer latency probe on these CPUs for this long; with
    /// `compare_idle`, again with every CPU held out of deep idle states.
    Latency {
        cpus: Vec<u32>,
        seconds: u64,
        compare_idle: bool,
    },
    /// Read a card's ROM (root: enabled in sysfs for the read) and judge it.
    ReadRom {
        addr: String,
        card: crate::checks::rom::Card,
        /// Filled in by the app: the host being shown.
        root: Option<HostRoot>,
    },
    /// Tune a libvirt domain's pinning (and the CPU topology that goes with it).
    ApplyPinning {
        domain: String,
        /// Empty: the app's default.
        uri: String,
        plan: Box<PinPlan>,
    },
}

#[derive(Debug, Clone)]
pub enum JobResult {
    Caps(Result<DomainCaps, String>),
    /// Lines to show; `ok` when nothing is wrong.
    Validated {
        ok: bool,
        lines: Vec<String>,
    },
    Defined(Result<String, String>),
    Applied(Result<String, String>),
    /// As configured, and (when asked) held out of deep idle states.
    Latency(
        Result<Vec<LatencyStats>, String>,
        Option<Result<Vec<LatencyStats>, String>>,
    ),
    VmFindings(Result<Vec<Finding>, String>),
    /// A card's ROM, judged: (address, the `device.rom` finding).
    Rom(String, Finding),
    /// The chosen path, or None when the dialog was cancelled or could not open.
    Picked(PickField, Option<String>),
}

/// Which wizard field a file dialog fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickField {
    Disk,
    InstallIso,
    VirtioIso,
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
        }
    }
}

/// The files a domain's disks name that are not there (a local define only).
fn missing_files(doc: &Document) -> Vec<String> {
    doc.root
        .child("devices")
        .into_iter()
        .flat_map(|d| d.elements())
        .filter(|e| e.name == "disk")
        .filter_map(|d| {
            let s = d.child("source")?;
            s.attr("file").or_else(|| s.attr("dev")).map(str::to_string)
        })
        .filter(|p| !std::path::Path::new(p).exists())
        .collect()
}

fn validate(xml: &str, uri: &str) -> JobResult {
    let mut lines = Vec::new();
    let mut ok = true;
    // Disk paths are the libvirt host's: check them only for a local URI.
    let local = uri.contains(":///");
    if let Ok(doc) = Document::parse(xml)
        .map_err(|_| ())
        .and_then(|d| if local { Ok(d) } else { Err(()) })
    {
        for f in missing_files(&doc) {
            ok = false;
            lines.push(format!("Files: {f} does not exist on this machine: the VM will not start until it does (create a disk with `qemu-img create -f qcow2 FILE 128G`)."));
        }
    }
    match schema_check(xml) {
        SchemaResult::Valid => lines.push("Schema: valid for libvirt's domain schema.".into()),
        SchemaResult::Invalid(m) => {
            ok = false;
            lines.push(format!("Schema: not valid: {m}"));
        }
        SchemaResult::Unavailable(w) => lines.push(format!("Schema: not checked: {w}")),
    }
    match Libvirt::open(uri) {
        Ok(hv) => match (caps_of(&hv), Document::parse(xml)) {
            (Some(caps), Ok(doc)) => {
                let problems = caps_problems(&doc, &caps);
                if problems.is_empty() {
                    lines.push(format!(
                        "Host ({uri}): nothing in it that this QEMU/KVM cannot give."
                    ));
                }
                for p in problems {
                    ok = false;
                    lines.push(format!("Host ({uri}): {p}"));
                }
            }
            (None, _) => lines.push(format!(
                "Host: not checked: {uri} gives no domain capabilities."
            )),
            (_, Err(e)) => {
                ok = false;
                lines.push(format!("XML: {e}"));
            }
        },
        Err(e) => lines.push(format!("Host: not checked: {e}")),
    }
    JobResult::Validated { ok, lines }
}

/// Read the domain, tune only its pinning and CPU topology, define it again.
fn apply_pinning(domain: &str, uri: &str, plan: PinPlan) -> Result<String, String> {
    let hv = Libvirt::open(uri).map_err(|e| e.to_string())?;
    let xml = hv.domain_xml(domain).map_err(|e| e.to_string())?;
    let mut doc = Document::parse(&xml).map_err(|e| e.to_string())?;
    let opts = TuneOptions {
        plan: Some(plan),
        memballoon_off: false,
        cpu_host_passthrough: true,
        hyperv: false,
        hyperv_supported: None,
        timers: false,
        hide_kvm: false,
    };
    let edits = tune(&mut doc, &opts).map_err(|e| e.to_string())?;
    hv.define(&doc.serialize()).map_err(|e| e.to_string())?;
    let what: Vec<String> = edits.iter().map(|e| e.what.clone()).collect();
    Ok(format!(
        "Applied to '{domain}' on {uri}: {}. It takes effect at the next start.",
        what.join("; ")
    ))
}

fn run(job: Job) -> JobResult {
    match job {
        Job::Caps(uri) => JobResult::Caps(Libvirt::open(&uri).map_err(|e| e.to_string()).and_then(
            |hv| caps_of(&hv).ok_or_else(|| format!("{uri} gives no domain capabilities")),
        )),
        Job::Validate { xml, uri } => validate(&xml, &uri),
        Job::ProbeVm {
            domain,
            uri,
            root,
            snapshot,
        } => JobResult::VmFindings(Libvirt::open(&uri).map_err(|e| e.to_string()).map(|hv| {
            let live = probe_vm(&hv, &root, &domain, Duration::from_secs(1));
            vm_findings(&snapshot, &root, &live)
        })),
        Job::PickFile(field) => JobResult::Picked(
            field,
            field.dialog().pick_file().map(|p| p.display().to_string()),
        ),
        Job::Latency {
            cpus,
            seconds,
            compare_idle,
        } => {
            let (interval, duration) = (
                Duration::from_micros(1000),
                Duration::from_secs(seconds.clamp(1, 60)),
            );
            // Opened first: without root the second run is refused at once.
            let (hold, refused) = match compare_idle.then(|| IdleHold::open(&HostRoot::live())) {
                Some(Ok(h)) => (Some(h), None),
                Some(Err(e)) => (None, Some(Err(e))),
                None => (None, None),
            };
            let (configured, held) = match probe_compared(&cpus, interval, duration, 80, hold) {
                Ok((c, h)) => (Ok(c), h.or(refused)),
                Err(e) => (Err(e.to_string()), refused),
            };
            JobResult::Latency(configured, held)
        }
        Job::ReadRom { addr, card, root } => {
            let path = crate::host::rom::rom_path(&addr).to_string();
            let bytes = match &root {
                Some(r) => crate::host::rom::read_card_rom(r, &addr),
                None => Err("no host to read from".into()),
            };
            let f = crate::checks::rom::rom_finding(Some(&addr), Some(card), &path, &bytes);
            JobResult::Rom(addr, f)
        }
        Job::ApplyPinning { domain, uri, plan } => {
            JobResult::Applied(apply_pinning(&domain, &uri, *plan))
        }
        Job::Define { xml, uri } => JobResult::Defined(
            Libvirt::open(&uri)
                .and_then(|hv| {
                    hv.define(&xml)
                        .map(|name| format!("Defined '{name}' on {uri}."))
                })
                .map_err(|e| e.to_string()),
        ),
    }
}

/// Start a job; the receiver yields its one result, then `wake` is called.
pub fn spawn_job(job: Job, wake: impl FnOnce() + Send + 'static) -> Receiver<JobResult> {
    let (tx, rx) = channel();
    let spawned = std::thread::Builder::new()
        .name("libvirt".into())
        .spawn(move || {
            let _ = tx.send(run(job));
            wake();
        });
    if spawned.is_err() {
        let (tx2, rx2) = channel();
        let _ = tx2.send(JobResult::Defined(Err("could not start a thread".into())));
        return rx2;
    }
    rx
}
