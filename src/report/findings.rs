//! "The findings for this host (and this domain)", composed once: the
//! prerequisite checks, each GPU's own ROM when asked, whether this user
//! reaches libvirt (where there is one to reach), and a domain's findings
//! from one live probe. `check`, `doctor` and the app's pages call these.

use crate::checks::model::Finding;
use crate::checks::run_checks;
use crate::checks::vm::vm_findings;
use crate::host::HostSnapshot;
use crate::libvirt::Hypervisor;
use crate::monitor::probe::probe_vm;
use crate::sysroot::HostRoot;
use std::time::Duration;

/// What to look at besides the snapshot.
#[derive(Debug, Clone, Default)]
pub struct FindingsRequest<'a> {
    /// One device only (`--device`).
    pub device: Option<&'a str>,
    /// Read each GPU's ROM (root: the kernel enables it for the read).
    pub read_rom: bool,
    /// The libvirt this host's VMs are on: its access is checked. `None`
    /// for a capture, which has no daemon.
    pub libvirt: Option<&'a str>,
}

/// The host's findings, failures first.
pub fn host_findings(root: &HostRoot, snap: &HostSnapshot, req: &FindingsRequest) -> Vec<Finding> {
    let mut findings = run_checks(snap, req.device);
    if req.read_rom {
        for e in crate::checks::devices::targets(snap, req.device) {
            let addr = e.device.address.as_str();
            findings.push(crate::checks::rom::rom_finding(
                Some(addr),
                Some(crate::checks::rom::Card::of(&e.device)),
                &crate::host::rom::rom_path(addr).to_string(),
                &crate::host::rom::read_card_rom(root, addr),
            ));
        }
    }
    if let Some(uri) = req.libvirt {
        findings.extend(super::libvirt::check_libvirt(root, uri));
    }
    findings.sort_by_key(|f| f.status);
    findings
}

/// A domain's findings from one second of live data while it runs.
pub fn domain_findings(
    root: &HostRoot,
    snap: &HostSnapshot,
    hv: &dyn Hypervisor,
    name: &str,
) -> Vec<Finding> {
    let live = probe_vm(hv, root, name, Duration::from_secs(1));
    vm_findings(snap, root, &live)
}
