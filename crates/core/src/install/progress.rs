//! An unattended install seen from the host, start to end:
//! * the start presses Enter through the Windows installer's "Press any
//!   key to boot from CD or DVD" (its UEFI loader waits a few seconds for
//!   a key and then gives up, which stalls an install nobody watches);
//! * the Monitor asks the guest agent how far it is (`status`);
//! * `finish` takes the installer, the drivers' disc and the answer media
//!   out of the domain and deletes the answer media, which holds the
//!   account's password.
//!
//! The domain carries the install in its metadata
//! (`<vfioa:install answer="…"/>`, domain/template.rs), so every face finds
//! it from libvirt alone.

use super::first_logon::DONE_FILE;
use crate::domain::template::INSTALL_NS;
use crate::domain::xml::{Document, Element};
use crate::guest::agent::{Agent, AgentError};
use crate::hypervisor::{Hypervisor, VirtError};
use std::time::Duration;

/// How long, and how often, the start presses Enter.
pub const PRESS_FOR: Duration = Duration::from_secs(20);
const PRESS_EVERY: Duration = Duration::from_millis(700);

/// The answer media's path when the domain is an unattended install.
pub fn answer_of(domain_xml: &str) -> Option<String> {
    let doc = Document::parse(domain_xml).ok()?;
    let meta = doc.root.child("metadata")?;
    meta.elements()
        .find(|e| is_ours(e))
        .and_then(|e| e.attr("answer").map(str::to_string))
}

fn is_ours(e: &Element) -> bool {
    e.attrs
        .iter()
        .any(|a| a.name.starts_with("xmlns") && a.value == INSTALL_NS)
}

/// Press Enter in the guest for `PRESS_FOR` through QEMU's `send-key`.
/// Returns how many presses went through; an error only when none did.
pub fn press_through_cd_prompt(
    hv: &dyn Hypervisor,
    name: &str,
    sleep: &dyn Fn(Duration),
) -> Result<u32, VirtError> {
    let key = r#"{"execute":"send-key","arguments":{"keys":[{"type":"qcode","data":"ret"}]}}"#;
    let mut sent = 0u32;
    let mut last = None;
    let rounds = (PRESS_FOR.as_millis() / PRESS_EVERY.as_millis()).max(1);
    for _ in 0..rounds {
        match hv.qmp(name, key) {
            Ok(_) => sent += 1,
            Err(e) => last = Some(e),
        }
        sleep(PRESS_EVERY);
    }
    match (sent, last) {
        (0, Some(e)) => Err(e),
        _ => Ok(sent),
    }
}

/// How far an install is, as the host can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// Not running: nothing to ask.
    Off,
    /// Windows Setup, or Windows before the guest tools: no agent yet.
    Setup,
    /// The agent answers, the first logon's work is not over.
    FirstLogon,
    /// The first logon's work is over: the media can come out.
    Done,
}

impl Stage {
    pub fn words(&self) -> &'static str {
        match self {
            Stage::Off => "The VM is off: start it to go on with the install.",
            Stage::Setup => {
                "Windows Setup is running (the guest agent answers once Windows has installed the guest tools at the first logon)."
            }
            Stage::FirstLogon => {
                "Windows is installed; the first logon is installing the guest tools, Looking Glass and MSI mode."
            }
            Stage::Done => {
                "The install is done. Remove the install media: the answer media holds the account's password."
            }
        }
    }
}

/// Ask the agent for the first logon's done file.
pub fn stage(agent: &Agent<'_>, running: bool) -> Stage {
    if !running {
        return Stage::Off;
    }
    let check = format!("if exist \"{DONE_FILE}\" (echo done) else (echo running)");
    match agent.exec("cmd.exe", &["/c", &check], Duration::from_secs(10)) {
        Ok(out) if out.stdout.trim() == "done" => Stage::Done,
        Ok(_) => Stage::FirstLogon,
        Err(AgentError::Absent(_) | AgentError::NoAnswer { .. } | AgentError::NotRunning(_)) => {
            Stage::Setup
        }
        Err(_) => Stage::FirstLogon,
    }
}

/// What `finish` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub cds_removed: usize,
    pub answer_deleted: Option<String>,
}

/// The domain's persistent definition without the install's CDs and its
/// marker (the running VM keeps them until it stops).
pub fn without_install(domain_xml: &str) -> Option<(String, String, usize)> {
    let answer = answer_of(domain_xml)?;
    let mut doc = Document::parse(domain_xml).ok()?;
    let mut removed = 0usize;
    if let Some(devices) = doc.root.child_mut("devices") {
        let before = devices.elements().count();
        devices.remove_children_where(|e| e.name == "disk" && e.attr("device") == Some("cdrom"));
        removed = before - devices.elements().count();
    }
    if let Some(meta) = doc.root.child_mut("metadata") {
        meta.remove_children_where(is_ours);
    }
    Some((doc.serialize(), answer, removed))
}

/// Take the install's CDs out of the definition and delete the answer
/// media. `delete` removes a file (the caller's view of the host).
pub fn finish(
    hv: &dyn Hypervisor,
    name: &str,
    delete: &dyn Fn(&str) -> std::io::Result<()>,
) -> Result<Option<Finished>, VirtError> {
    let xml = hv.domain_xml(name)?;
    let Some((new, answer, cds)) = without_install(&xml) else {
        return Ok(None);
    };
    hv.define(&new)?;
    let deleted = match delete(&answer) {
        Ok(()) => Some(answer),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(answer),
        Err(_) => None,
    };
    Ok(Some(Finished {
        cds_removed: cds,
        answer_deleted: deleted,
    }))
}
