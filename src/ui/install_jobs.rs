//! The window's jobs for "Install Windows for me": define with the answer
//! media (built first, removed again when the define fails), ask how far
//! the install is, and take the install media out. The use cases are the
//! library's (install::for_domain, install::progress); these run them on a
//! worker thread and turn their errors into the sentence the page shows.

use crate::domain::from_host::{Choices, prepare};
use crate::domain::template::new_windows;
use crate::host::HostSnapshot;
use crate::install::for_domain::{InstallChoices, add_install};
use crate::install::progress::{answer_of, finish, stage};
use crate::libvirt::caps::DomainCaps;
use crate::libvirt::{Hypervisor, connect};
use crate::report::lifecycle::DefinePlan;
use crate::sysroot::HostRoot;

/// What the Define button sends for an unattended install: the XML the
/// page shows is rebuilt here with the answer media in it.
#[derive(Debug, Clone)]
pub struct UnattendedDefine {
    pub choices: Choices,
    pub install: InstallChoices,
    pub caps: Option<DomainCaps>,
}

/// Build the answer media, then define the domain that boots from it.
pub fn define_unattended(
    root: &HostRoot,
    snap: &HostSnapshot,
    uri: &str,
    u: &UnattendedDefine,
) -> Result<DefinePlan, String> {
    let mut p = prepare(snap, &u.choices, u.caps.clone()).map_err(|e| e.to_string())?;
    let made = add_install(root, snap, &mut p, &u.install).map_err(|e| e.to_string())?;
    let defined = new_windows(&p.spec)
        .map_err(|e| e.to_string())
        .and_then(|d| crate::ui::jobs::define(root, snap, uri, &d.xml));
    if defined.is_err() {
        // Nothing half-made: the media (with the password) goes again.
        let _ = std::fs::remove_file(&made.media);
    }
    defined
}

/// How far the install is, in words.
pub fn install_status(uri: &str, name: &str) -> Result<String, String> {
    let hv = connect(uri).map_err(|e| e.to_string())?;
    let xml = hv.domain_xml(name).map_err(|e| e.to_string())?;
    if answer_of(&xml).is_none() {
        return Ok(format!(
            "'{name}' has no unattended install in its definition (done, or never started)."
        ));
    }
    let running = hv.state(name).map(|s| s.is_active()).unwrap_or(false);
    let link = crate::guest::agent::DomainAgent {
        hypervisor: &hv,
        domain: name,
    };
    let agent = crate::guest::agent::Agent::new(&link, 10);
    Ok(stage(&agent, running).words().to_string())
}

/// Take the install's CDs out of the definition and delete the answer media.
pub fn install_done(uri: &str, name: &str) -> Result<String, String> {
    let hv = connect(uri).map_err(|e| e.to_string())?;
    let delete = |p: &str| std::fs::remove_file(p);
    match finish(&hv, name, &delete).map_err(|e| e.to_string())? {
        None => Ok(format!("'{name}' has no install media to take out.")),
        Some(f) => Ok(match f.answer_deleted {
            Some(p) => format!(
                "Took {} install CDs out (a running VM keeps them until it stops) and deleted {p}, which held the account's password.",
                f.cds_removed
            ),
            None => format!(
                "Took {} install CDs out; the answer media could not be deleted: delete it yourself, it holds the account's password.",
                f.cds_removed
            ),
        }),
    }
}
