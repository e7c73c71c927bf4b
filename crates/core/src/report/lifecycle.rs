//! A domain's life, composed once for the CLI (`domain define|start|stop|
//! destroy`) and the app (the wizard's last step, the Troubleshoot page):
//! define as an update that keeps the existing domain's identity and hand
//! edits (shown as a diff first), start with the networks it needs, and when
//! a start fails, the reason from libvirt's error and the QEMU log.

use super::preflight::{Preflight, PreflightError, PreflightRequest, preflight, qemu_log};
use crate::domain::merge::{MergeError, keep_from_existing};
use crate::domain::start_failure::{StartCause, explain};
use crate::domain::tune::{Edit, diff_labeled};
use crate::domain::xml::Document;
use crate::host::HostSnapshot;
use crate::hypervisor::{DomainState, Hypervisor, VirtError};
use crate::sysroot::HostRoot;
use serde::Serialize;
use std::time::{Duration, Instant};

/// What `define` would do, to show before doing it.
#[derive(Debug, Clone, Serialize)]
pub struct DefinePlan {
    pub name: String,
    /// The domain libvirt has under that name now (its persistent XML).
    pub existing: Option<String>,
    /// The document to define: the preflight's adapted XML with what is kept
    /// from the existing domain.
    pub xml: String,
    /// What was kept from the existing domain, and why.
    pub kept: Vec<Edit>,
    /// A unified diff from the existing domain (empty for a new one).
    pub diff: String,
    pub preflight: Preflight,
}

#[derive(Debug, thiserror::Error)]
pub enum DefineError {
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    #[error("the domain has no <name>")]
    NoName,
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error(transparent)]
    Virt(#[from] VirtError),
}

/// Plan a define of `xml`: preflight it, and when a domain of that name
/// exists, keep its identity and what was added by hand.
pub fn plan_define(
    root: &HostRoot,
    snap: &HostSnapshot,
    hv: &dyn Hypervisor,
    xml: &str,
    req: &PreflightRequest,
) -> Result<DefinePlan, DefineError> {
    let pre = preflight(root, snap, Some(hv), xml, req)?;
    let mut doc = Document::parse(&pre.xml).map_err(PreflightError::from)?;
    let name = doc
        .root
        .child("name")
        .map(|n| n.text().trim().to_string())
        .filter(|n| !n.is_empty())
        .ok_or(DefineError::NoName)?;
    let existing = match hv.domain_xml(&name) {
        Ok(x) => Some(x),
        Err(e) if e.kind == crate::hypervisor::error::VirtErrorKind::NoDomain => None,
        Err(e) => return Err(e.into()),
    };
    let mut kept = Vec::new();
    if let Some(old) = &existing {
        let old_doc = Document::parse(old).map_err(PreflightError::from)?;
        kept = keep_from_existing(&old_doc, &mut doc)?;
    }
    let out = doc.serialize();
    let d = match &existing {
        Some(old) => {
            // Compare like with like: the new document as libvirt will keep
            // it (addresses, controllers and units filled in), not as written.
            let new = normalized_by_libvirt(hv, &out, &name).unwrap_or_else(|| out.clone());
            if &new == old {
                String::new()
            } else {
                diff_labeled(
                    old,
                    &new,
                    &format!("{name} (in libvirt)"),
                    &format!("{name} (new)"),
                )
            }
        }
        None => String::new(),
    };
    Ok(DefinePlan {
        name,
        existing,
        xml: out,
        kept,
        diff: d,
        preflight: pre,
    })
}

/// `xml` as libvirt would store it: defined under a scratch name, read back
/// (`dumpxml --inactive`), removed, and given back its own name and UUID.
/// `None` when libvirt would not take it.
pub fn normalized_by_libvirt(hv: &dyn Hypervisor, xml: &str, name: &str) -> Option<String> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let scratch = format!("vfio-assistant-preview-{}-{n}", std::process::id());
    let mut doc = Document::parse(xml).ok()?;
    let uuid = doc.root.child("uuid").map(|u| u.text());
    doc.root.remove_children("uuid");
    doc.root.child_mut("name")?.set_text(&scratch);
    hv.define(&doc.serialize()).ok()?;
    let back = hv.domain_xml(&scratch);
    let _ = hv.undefine(&scratch);
    let mut back = Document::parse(&back.ok()?).ok()?;
    back.root.child_mut("name")?.set_text(name);
    if let (Some(u), Some(slot)) = (uuid, back.root.child_mut("uuid")) {
        slot.set_text(&u);
    }
    // libvirt names the NVRAM after the domain.
    let text = back.serialize();
    Some(text.replace(&format!("{scratch}_VARS"), &format!("{name}_VARS")))
}

/// Define what was planned; the domain's name.
pub fn commit_define(hv: &dyn Hypervisor, plan: &DefinePlan) -> Result<String, VirtError> {
    hv.define(&plan.xml)
}

/// How a start went.
#[derive(Debug, Clone, Serialize)]
pub struct StartOutcome {
    pub name: String,
    pub started: bool,
    /// Networks that were not running and were started for it.
    pub networks_started: Vec<String>,
    /// Networks it plugs into that were not running and could not be
    /// started: (name, libvirt's reason). Said, never swallowed: the
    /// start's own failure then names this reason, not only the network.
    pub networks_failed: Vec<(String, String)>,
    /// libvirt's message when it failed.
    pub message: Option<String>,
    /// Why, from the message and the QEMU log.
    pub causes: Vec<StartCause>,
    /// Whether the QEMU log could be read (root, or the log's group).
    pub log_read: bool,
    /// An unattended install's first boot: how many times Enter was
    /// pressed through the installer's "Press any key to boot from CD"
    /// (install::progress), or why no key went through.
    #[serde(serialize_with = "keys_json")]
    pub install_keys: Option<Result<u32, crate::hypervisor::VirtError>>,
}

/// `install_keys` in the JSON: `{"Ok": n}` or `{"Err": libvirt's message}`.
fn keys_json<S: serde::Serializer>(
    keys: &Option<Result<u32, crate::hypervisor::VirtError>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    keys.as_ref()
        .map(|r| r.as_ref().map_err(|e| e.message.as_str()))
        .serialize(s)
}

/// The networks a domain's interfaces plug into.
fn networks_of(xml: &str) -> Vec<String> {
    let Ok(doc) = Document::parse(xml) else {
        return Vec::new();
    };
    let Some(devices) = doc.root.child("devices") else {
        return Vec::new();
    };
    let mut out: Vec<String> = devices
        .elements()
        .filter(|e| e.name == "interface" && e.attr("type") == Some("network"))
        .filter_map(|e| e.child("source")?.attr("network").map(str::to_string))
        .collect();
    out.dedup();
    out
}

/// Watch a started domain for a moment: KVM stopping it (paused with QEMU
/// status internal-error, or gone) is a failure, with its words.
pub fn watch_start(hv: &dyn Hypervisor, name: &str, watch: Duration) -> Option<String> {
    let until = Instant::now() + watch;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(150));
        match hv.state(name) {
            Ok(DomainState::Running | DomainState::Blocked) => continue,
            Ok(DomainState::Paused) => {
                let status = hv
                    .qmp(name, r#"{"execute":"query-status"}"#)
                    .unwrap_or_default();
                if status.contains("internal-error") {
                    return Some(
                        "QEMU run state 'internal-error': KVM internal error (the guest was stopped)"
                            .into(),
                    );
                }
                if status.contains("guest-panicked") {
                    return Some("QEMU run state 'guest-panicked'".into());
                }
            }
            Ok(other) => {
                return Some(format!(
                    "the guest is {} right after its start",
                    other.label()
                ));
            }
            Err(e) => return Some(e.to_string()),
        }
    }
    None
}

/// Start `name`: its inactive networks first, then the domain; a failure
/// comes back explained.
pub fn start(hv: &dyn Hypervisor, root: &HostRoot, name: &str) -> StartOutcome {
    let mut out = StartOutcome {
        name: name.to_string(),
        started: false,
        networks_started: Vec::new(),
        networks_failed: Vec::new(),
        message: None,
        causes: Vec::new(),
        log_read: false,
        install_keys: None,
    };
    let xml = hv.domain_xml(name).ok();
    let wanted = xml.as_deref().map(networks_of).unwrap_or_default();
    if !wanted.is_empty()
        && let Ok(nets) = hv.networks()
    {
        for n in nets
            .iter()
            .filter(|n| !n.active && wanted.contains(&n.name))
        {
            match hv.start_network(&n.name) {
                Ok(()) => out.networks_started.push(n.name.clone()),
                Err(e) => out
                    .networks_failed
                    .push((n.name.clone(), e.message.clone())),
            }
        }
    }
    let failure = match hv.start(name) {
        Err(e) => Some(e.message.clone()),
        Ok(()) => watch_start(hv, name, Duration::from_millis(1500)),
    };
    match failure {
        None => {
            out.started = true;
            if xml
                .as_deref()
                .and_then(crate::install::progress::answer_of)
                .is_some()
            {
                out.install_keys = Some(crate::install::progress::press_through_cd_prompt(
                    hv,
                    name,
                    &std::thread::sleep,
                ));
            }
        }
        Some(msg) => {
            let log = qemu_log(root, name);
            out.log_read = log.is_some();
            out.causes = explain(&msg, log.as_deref().unwrap_or(""));
            for c in out.causes.iter_mut().filter(|c| c.id == "network.inactive") {
                if let Some((net, why)) = out
                    .networks_failed
                    .iter()
                    .find(|(n, _)| c.title.contains(&format!("'{n}'")))
                {
                    c.why = format!(
                        "{} This tool tried to start '{net}' just before the VM, and libvirt refused: {why}",
                        c.why
                    );
                    c.fix = network_fix(net, why);
                }
            }
            out.message = Some(msg);
        }
    }
    out
}

/// What to do about a network libvirt would not start, from its reason.
fn network_fix(net: &str, why: &str) -> String {
    let lower = why.to_ascii_lowercase();
    let first = if lower.contains("dnsmasq") {
        "Install dnsmasq, which libvirt's NAT network runs (Debian and Ubuntu: the dnsmasq-base package; Fedora and Arch: dnsmasq). "
    } else if lower.contains("address already in use") || lower.contains("in use by") {
        "Another network or program holds its address or bridge (`virsh net-dumpxml` shows the network's): change one of the two. "
    } else if lower.contains("firewall") || lower.contains("iptables") || lower.contains("nftables")
    {
        "libvirt could not set up its firewall rules: check that nftables (or iptables) is installed and firewalld, if used, runs. "
    } else {
        "Fix what libvirt's reason names. "
    };
    format!(
        "{first}Then `virsh net-start {net} && virsh net-autostart {net}`, and start the VM again."
    )
}

/// Reads a domain's QEMU log on the machine it runs on (over SSH), by name.
pub type LogThere<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Start `name`; when the domain is another machine's (`log_there`: `hv`
/// is its libvirt over qemu+ssh, and this reads a domain's QEMU log on that
/// machine), a failure is explained from the log read there, never from a
/// log on this side (a snapshot's is older than this start).
pub fn start_on(
    hv: &dyn Hypervisor,
    root: &HostRoot,
    name: &str,
    log_there: Option<LogThere>,
) -> StartOutcome {
    let mut o = start(hv, root, name);
    if let (false, Some(read)) = (o.started, log_there) {
        o.explain_again(read(name).as_deref());
    }
    o
}

impl StartOutcome {
    /// A failed start explained again from a QEMU log read elsewhere (the
    /// other machine's, over SSH, when the domain runs there); None when it
    /// could not be read (libvirt's message alone then).
    pub fn explain_again(&mut self, log: Option<&str>) {
        if let Some(msg) = &self.message {
            let text = log.unwrap_or("");
            let last = crate::domain::start_failure::last_start(text, text.len());
            self.causes = explain(msg, last);
            self.log_read = log.is_some();
        }
    }
}

/// Preflight, then define or update, for callers that need no diff step
/// (the test guest, scripts with `--yes`).
pub fn define_adapted(
    root: &HostRoot,
    snap: &HostSnapshot,
    hv: &dyn Hypervisor,
    xml: &str,
    req: &PreflightRequest,
) -> Result<DefinePlan, DefineError> {
    let plan = plan_define(root, snap, hv, xml, req)?;
    commit_define(hv, &plan)?;
    Ok(plan)
}
