//! Reaching libvirt as this user, for `check`, `doctor` and the app's scan:
//! one real connection attempt, turned into findings by the pure
//! `checks::access` (who may connect, why not, the default network).

use crate::checks::access::{Reached, connect_finding, network_finding, not_tried, this_user};
use crate::checks::model::Finding;
use crate::hypervisor::{Connect, VirtError};
use crate::sysroot::HostRoot;

/// A libvirt to check: its URI and how to open it.
#[derive(Debug, Clone, Copy)]
pub struct LibvirtAt<'a> {
    pub uri: &'a str,
    pub connect: Connect,
}

/// Try `uri` once: its version and how many domains this user can see.
pub fn reach(at: LibvirtAt) -> Result<Reached, VirtError> {
    let hv = (at.connect)(at.uri)?;
    let (a, b, c) = hv.lib_version()?;
    Ok(Reached {
        version: format!("{a}.{b}.{c}"),
        domains: hv.domains()?.len(),
        networks: hv.networks().ok(),
    })
}

/// libvirt access and its default network, for `check` and `doctor`.
pub fn check_libvirt(root: &HostRoot, at: LibvirtAt) -> Vec<Finding> {
    let uri = at.uri;
    let got = reach(at);
    let mut out = vec![connect_finding(uri, &this_user(root), &got)];
    if let Ok(r) = &got
        && let Some(f) = network_finding(uri, r.networks.as_deref())
    {
        out.push(f);
    }
    out
}

/// The same for the app's scans, without a connection (and a password
/// dialog) for a user outside the libvirt group.
pub fn check_libvirt_quietly(root: &HostRoot, at: LibvirtAt) -> Vec<Finding> {
    let (uri, user) = (at.uri, this_user(root));
    if let Some(f) = not_tried(uri, &user) {
        return vec![f];
    }
    let got = reach(at);
    let mut out = vec![connect_finding(uri, &user, &got)];
    if let Ok(r) = &got
        && let Some(f) = network_finding(uri, r.networks.as_deref())
    {
        out.push(f);
    }
    out
}
