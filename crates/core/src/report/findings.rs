//! "The findings for this host (and this domain)", composed once: the
//! prerequisite checks, each GPU's own ROM when asked, whether this user
//! reaches libvirt (where there is one to reach), and a domain's findings
//! from one live probe. `check`, `doctor` and the app's pages call these.

use super::preflight::{qemu_log, qemu_log_path};
use crate::checks::model::{Finding, Status};
use crate::checks::run_checks;
use crate::checks::vm::vm_findings;
use crate::domain::start_failure::explain;
use crate::host::HostSnapshot;
use crate::hypervisor::{DomainState, Hypervisor};
use crate::monitor::probe::{VmLive, probe_vm};
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
    pub libvirt: Option<super::libvirt::LibvirtAt<'a>>,
    /// Do not connect where the user is outside libvirt's groups (the app:
    /// a connection would pop up polkit's password dialog at every scan).
    pub quiet: bool,
}

/// The host's findings, failures first.
pub fn host_findings(root: &HostRoot, snap: &HostSnapshot, req: &FindingsRequest) -> Vec<Finding> {
    let mut findings = run_checks(snap, req.device);
    if req.device.is_none() {
        findings.extend(super::tuning::tuning_findings(root));
    }
    if req.read_rom {
        for e in crate::checks::devices::targets(snap, req.device) {
            let addr = e.device.address.as_str();
            let card = crate::checks::rom::Card::of(&e.device);
            findings.push(super::rom::card_rom(root, addr, Some(card)).finding);
        }
    }
    if let Some(at) = req.libvirt {
        findings.extend(if req.quiet {
            super::libvirt::check_libvirt_quietly(root, at)
        } else {
            super::libvirt::check_libvirt(root, at)
        });
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
    let mut out = vm_findings(snap, root, &live);
    out.extend(last_start_findings(root, &live));
    if matches!(live.state, Ok(DomainState::Running)) {
        let link = crate::guest::agent::DomainAgent {
            hypervisor: hv,
            domain: name,
        };
        // Looking Glass's shared memory (ivshmem, or the kvmfr device) in
        // the running definition: its host service should run in Windows.
        let lg = hv
            .domain_xml_live(name)
            .is_ok_and(|x| x.contains("looking-glass") || x.contains("/dev/kvmfr"));
        out.extend(super::guest::guest_findings(
            &link,
            &passed_functions(snap, &live),
            lg,
        ));
    }
    out
}

/// The running VM's passed-through PCI functions, with the IDs the guest
/// sees them by (from the host's scan).
fn passed_functions(snap: &HostSnapshot, live: &VmLive) -> Vec<super::guest::PassedFunction> {
    let Some(doc) = live.live_xml.as_ref().or(live.xml.as_ref()) else {
        return Vec::new();
    };
    crate::domain::inspect::pci_hostdevs(doc)
        .into_iter()
        .filter_map(|h| {
            let d = &snap.device(&h.host)?.device;
            Some(super::guest::PassedFunction {
                address: h.host.clone(),
                vendor_id: d.vendor_id.0,
                device_id: d.device_id.0,
                name: d.device_name.clone().unwrap_or_else(|| h.host.clone()),
            })
        })
        .collect()
}

/// Why the domain's last start failed, read from its QEMU log as `domain
/// start` reads it: one failing finding per cause with its fix, a pass when
/// the log of its last start names no failure, nothing while it runs (it
/// started) or when libvirt could not be asked about it, and "unknown"
/// when the log cannot be read.
pub fn last_start_findings(root: &HostRoot, live: &VmLive) -> Vec<Finding> {
    let running = matches!(
        live.state,
        Ok(DomainState::Running | DomainState::Blocked | DomainState::Paused)
    );
    // Running: it started. Unknown to libvirt: vm.state says so already.
    if running || live.state.is_err() {
        return Vec::new();
    }
    let path = qemu_log_path(&live.name).to_string();
    let why = "libvirt's error on a failed start is often one line; QEMU says what it could not do in the domain's log, and that line names the cause.";
    let Some(log) = qemu_log(root, &live.name) else {
        return vec![
            Finding::new(
                "vm.last_start",
                format!("Could not read the QEMU log of '{}'", live.name),
                Status::Unknown,
            )
            .evidence(&path, "absent (never started) or readable by root only")
            .why(why),
        ];
    };
    let causes = explain("", &log);
    if causes.is_empty() {
        return vec![
            Finding::new(
                "vm.last_start",
                format!(
                    "The QEMU log of the last start of '{}' names no failure",
                    live.name
                ),
                Status::Pass,
            )
            .evidence(&path, last_line(&log))
            .why(why),
        ];
    }
    causes
        .into_iter()
        .map(|c| {
            Finding::new(
                "vm.last_start",
                format!("Its last start failed: {}", c.title),
                Status::Fail,
            )
            .evidence(&path, c.evidence)
            .why(c.why)
            .fix(c.fix)
        })
        .collect()
}

/// The log's last non-empty line, for evidence.
fn last_line(log: &str) -> String {
    log.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(empty)")
        .chars()
        .take(200)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    fn shut_off(name: &str) -> VmLive {
        VmLive {
            name: name.into(),
            uri: "qemu:///system".into(),
            state: Ok(DomainState::Shutoff),
            qmp_status: None,
            xml: None,
            live_xml: None,
            hyperv_offered: None,
            rates: None,
            rates_problem: None,
            interrupts: None,
        }
    }

    // The QEMU log of a failed start on this project's CI machine (AMD EPYC,
    // nested KVM, Debian 12's libvirt 9.0 and QEMU 7.2), the command line cut.
    const FAILED: &str = "2026-12-01 20:23:01.982+0000: starting up libvirt version: 9.0.0, package: 9.0.0-4+deb12u2 (Debian), qemu version: 7.2.19Debian 1:7.2+dfsg-7+deb12u18, kernel: 6.1.0-41-cloud-amd64, hostname: ci\nLC_ALL=C \\\n/usr/bin/qemu-system-x86_64 \\\n-name guest=vfio-assistant-test,debug-threads=on \\\n2026-12-01T20:23:02.199362Z qemu-system-x86_64: error: failed to set MSR 0x10a to 0x400000000c000069\nqemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.\n2026-12-01 20:23:02.455+0000: shutting down, reason=failed\n";

    fn root_with_log(name: &str, log: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("var/log/libvirt/qemu");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join(format!("{name}.log")), log).unwrap();
        dir
    }

    #[test]
    fn a_failed_last_start_is_a_cause_with_its_fix() {
        let dir = root_with_log("win11", FAILED);
        let f = last_start_findings(&HostRoot::at(dir.path()), &shut_off("win11"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].status, Status::Fail);
        assert!(f[0].evidence[0].value.contains("0x10a"), "{f:?}");
        assert!(
            f[0].fix.as_deref().unwrap().contains("arch-capabilities"),
            "{f:?}"
        );
    }

    #[test]
    fn a_later_good_start_clears_an_old_failure() {
        let good = format!(
            "{FAILED}2026-12-01 20:30:00.000+0000: starting up libvirt version: 9.0.0\n2026-12-01 20:40:00.000+0000: shutting down, reason=shutdown\n"
        );
        let dir = root_with_log("win11", &good);
        let root = HostRoot::at(dir.path());
        let f = last_start_findings(&root, &shut_off("win11"));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].status, Status::Pass, "{f:?}");
        // No log: the start was never tried, or only root may read it.
        let f = last_start_findings(&root, &shut_off("other"));
        assert_eq!(f[0].status, Status::Unknown);
        // Running: it started, nothing to explain.
        let mut running = shut_off("win11");
        running.state = Ok(DomainState::Running);
        assert!(last_start_findings(&root, &running).is_empty());
        // Not a domain libvirt knows: vm.state says so; no log is looked for.
        let mut unknown = shut_off("other");
        unknown.state = Err(crate::hypervisor::VirtError::new(
            "asking about the domain",
            crate::hypervisor::VirtErrorKind::NoDomain,
            "Domain not found",
        ));
        assert!(last_start_findings(&root, &unknown).is_empty());
    }
}
