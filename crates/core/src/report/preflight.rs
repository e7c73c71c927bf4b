//! The domain preflight, composed once for every face: `domain new`,
//! `domain validate`, `domain start`, the wizard's Validate step and the test
//! guest. It gathers what the pure `domain::preflight` needs — libvirt's
//! capabilities and networks, the files the domain names, the host's
//! interfaces — and, on a live QEMU connection, tries a stripped copy of the
//! domain: each failure that has a known remedy (a CPU feature this KVM
//! cannot set, no SMM, UEFI that cannot run here) is applied to the domain
//! and tried again. What passes here starts.

use crate::checks::model::Finding;
use crate::domain::preflight::{
    FileFact, FileState, PreflightFacts, Trial, absolute_paths, adapt, blocks_start, check,
    known_from_host, referenced_files, trial_domain,
};
use crate::domain::start_failure::{StartCause, explain, last_start};
use crate::domain::tune::Edit;
use crate::domain::validate::schema_check;
use crate::domain::xml::{Document, XmlError};
use crate::host::HostSnapshot;
use crate::hypervisor::Hypervisor;
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// How many times a trial start is adapted and tried again.
const MAX_TRIAL_ROUNDS: usize = 5;
/// How long a started trial is watched for KVM stopping it.
const TRIAL_WATCH: Duration = Duration::from_millis(1500);
/// How much of a QEMU log is read.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

#[derive(Debug, Clone, Default)]
pub struct PreflightRequest<'a> {
    /// The folder relative disk/ISO paths were given in (the CLI's working
    /// directory); `None` leaves relative paths to be reported.
    pub base_dir: Option<&'a Path>,
    /// Try a stripped copy on the connection (only QEMU connections on the
    /// live host do).
    pub trial: bool,
}

/// What the preflight found and the domain adapted to this host.
#[derive(Debug, Clone, Serialize)]
pub struct Preflight {
    /// The domain with this host's adaptations: define this one.
    pub xml: String,
    /// What was changed so that it starts here, and why.
    pub adapted: Vec<Edit>,
    pub findings: Vec<Finding>,
    /// The causes the trial starts found (with the adaptation each got).
    pub learnt: Vec<StartCause>,
}

impl Preflight {
    /// Nothing stops the start.
    pub fn passes(&self) -> bool {
        !blocks_start(&self.findings)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("the domain is not well-formed XML: {0}")]
    Xml(#[from] XmlError),
    #[error("the root element is <{0}>, not <domain>")]
    NotADomain(String),
}

pub use crate::hypervisor::caps::caps_of;

/// Whether the qemu user can reach `path`: it exists, is a file or block
/// device, and every folder above it lets others in (libvirt hands QEMU the
/// file itself, not the folders).
pub fn file_state(root: &HostRoot, path: &str) -> FileState {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let Some(hp) = HostPath::from_absolute(path) else {
        return FileState::Unknown("not an absolute path".into());
    };
    let meta = match root.metadata(&hp) {
        Ok(m) => m,
        Err(e) if e.is_not_found() => return FileState::Missing,
        Err(e) => return FileState::Unknown(e.to_string()),
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        return FileState::NotAFile("a folder".into());
    }
    if ft.is_fifo() {
        return FileState::NotAFile("a FIFO".into());
    }
    if !(ft.is_file() || ft.is_block_device()) {
        return FileState::NotAFile("not a regular file".into());
    }
    let mut dir = Path::new(path).parent();
    while let Some(d) = dir {
        if d == Path::new("/") {
            break;
        }
        if let Some(hd) = HostPath::from_absolute(&d.display().to_string())
            && let Ok(m) = root.metadata(&hd)
            && m.permissions().mode() & 0o001 == 0
        {
            return FileState::FolderClosed(d.display().to_string());
        }
        dir = d.parent();
    }
    FileState::Ok
}

fn gather_files(root: &HostRoot, doc: &Document) -> Vec<FileFact> {
    referenced_files(doc)
        .into_iter()
        .filter(|(p, _)| Path::new(p).is_absolute())
        .map(|(path, role)| FileFact {
            state: file_state(root, &path),
            path,
            role,
        })
        .collect()
}

/// A trial domain that is removed (with its NVRAM) however the trial ends.
struct TrialGuard<'a> {
    hv: &'a dyn Hypervisor,
    name: String,
}

impl Drop for TrialGuard<'_> {
    fn drop(&mut self) {
        let _ = self.hv.destroy(&self.name);
        let _ = self.hv.undefine(&self.name);
    }
}

/// Where libvirt keeps the QEMU log of domain `name`.
pub fn qemu_log_path(name: &str) -> HostPath {
    HostPath::var(&format!("log/libvirt/qemu/{name}.log"))
}

/// The QEMU log of the domain's last start, when this user may read it.
pub fn qemu_log(root: &HostRoot, name: &str) -> Option<String> {
    let text = root.read_tail(&qemu_log_path(name), LOG_TAIL_BYTES).ok()?;
    Some(last_start(&text, LOG_TAIL_BYTES as usize).to_string())
}

/// One trial: `Ok(())` when it started and kept running, else the causes
/// found in libvirt's error and the log (or a cause-less failure text).
fn try_once(
    hv: &dyn Hypervisor,
    root: &HostRoot,
    name: &str,
    xml: &str,
) -> Result<(), (String, Vec<StartCause>)> {
    let _ = hv.destroy(name);
    let _ = hv.undefine(name);
    hv.define(xml).map_err(|e| (e.to_string(), Vec::new()))?;
    let guard = TrialGuard {
        hv,
        name: name.to_string(),
    };
    let failure = match hv.start(name) {
        Err(e) => Some(e.message.clone()),
        Ok(()) => super::lifecycle::watch_start(hv, name, TRIAL_WATCH),
    };
    let _ = hv.destroy(name);
    let log = qemu_log(root, name).unwrap_or_default();
    drop(guard);
    match failure {
        None => Ok(()),
        Some(msg) => Err((msg.clone(), explain(&msg, &log))),
    }
}

/// Trial starts with adaptations, until one runs or nothing more can be adapted.
fn trial_loop(
    hv: &dyn Hypervisor,
    root: &HostRoot,
    doc: &mut Document,
    edits: &mut Vec<Edit>,
    learnt: &mut Vec<StartCause>,
) -> Trial {
    // One name per trial in this process: several may run at once (the app's
    // jobs, a test binary's threads).
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("vfio-assistant-preflight-{}-{n}", std::process::id());
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    for round in 1..=MAX_TRIAL_ROUNDS {
        let xml = trial_domain(doc, &name, online).serialize();
        match try_once(hv, root, &name, &xml) {
            Ok(()) => return Trial::Started { rounds: round },
            Err((msg, causes)) => {
                let mut fixed = false;
                for c in &causes {
                    let new = adapt(doc, std::slice::from_ref(c));
                    if !new.is_empty() {
                        edits.extend(new);
                        learnt.push(c.clone());
                        fixed = true;
                        break;
                    }
                }
                if !fixed {
                    if causes.is_empty() {
                        return Trial::Failed(vec![StartCause {
                            id: "unknown",
                            title: "the start failed for a reason not recognised".into(),
                            evidence: msg,
                            why: "libvirt or QEMU refused the start.".into(),
                            fix: "Read libvirt's message above and the QEMU log (/var/log/libvirt/qemu/NAME.log).".into(),
                            adapt: None,
                        }]);
                    }
                    return Trial::Failed(causes);
                }
            }
        }
    }
    Trial::Failed(Vec::new())
}

/// Why no trial runs here, or `None` when one can.
fn no_trial_reason(root: &HostRoot, hv: Option<&dyn Hypervisor>, want: bool) -> Option<String> {
    let hv = match hv {
        None => return Some("no libvirt connection".into()),
        Some(hv) => hv,
    };
    if !want {
        return Some("not asked for".into());
    }
    if !root.is_live() {
        return Some("a captured host, not this one".into());
    }
    if !hv.uri().starts_with("qemu") {
        return Some(format!("{} runs no QEMU", hv.uri()));
    }
    None
}

/// The preflight of `xml` on this host: adapt, try, check.
pub fn preflight(
    root: &HostRoot,
    snap: &HostSnapshot,
    hv: Option<&dyn Hypervisor>,
    xml: &str,
    req: &PreflightRequest,
) -> Result<Preflight, PreflightError> {
    let mut doc = Document::parse(xml)?;
    if doc.root.name != "domain" {
        return Err(PreflightError::NotADomain(doc.root.name.clone()));
    }
    let mut edits = Vec::new();
    if let Some(base) = req.base_dir {
        edits.extend(absolute_paths(&mut doc, base));
    }
    let mut learnt = known_from_host(&doc, snap, root.is_live());
    edits.extend(adapt(&mut doc, &learnt));
    let trial = match (no_trial_reason(root, hv, req.trial), hv) {
        (None, Some(hv)) => trial_loop(hv, root, &mut doc, &mut edits, &mut learnt),
        (why, _) => Trial::NotRun(why.unwrap_or_else(|| "no libvirt connection".into())),
    };
    doc.indent_new_elements();
    let out = doc.serialize();
    let facts = PreflightFacts {
        snap,
        caps: hv.and_then(caps_of),
        networks: hv.and_then(|h| h.networks().ok()),
        interfaces: root.list_dir(&HostPath::sys("class/net")).ok(),
        // A captured host's disks and ISOs are on that host, not in the capture.
        files: if root.is_live() {
            gather_files(root, &doc)
        } else {
            Vec::new()
        },
        learnt: learnt.clone(),
        trial,
        schema: Some(schema_check(&out)),
    };
    let findings = check(&doc, &facts);
    Ok(Preflight {
        xml: out,
        adapted: edits,
        findings,
        learnt,
    })
}
