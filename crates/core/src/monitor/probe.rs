//! The live VM probe for `doctor --domain`, `check --domain` and the
//! Troubleshoot page: libvirt's state, QEMU's run state (QMP), the running
//! and persistent XML, the host's Hyper-V offer, and one window of live data
//! (interrupts, vCPU threads, KVM counters). I/O and a sleep, so it lives
//! here with the samplers; `checks::vm` judges what it gathered, purely.

use crate::domain::xml::Document;
use crate::hypervisor::{DomainState, Hypervisor, VirtError};
use crate::monitor::rates::{Rates, rates};
use crate::monitor::sample::{read_host_after, read_threads};
use crate::monitor::vm::{find_vm, kvm_counters};
use crate::parse::qmp::{QmpError, parse_status};
use crate::sysroot::{HostPath, HostRoot};
use std::time::Duration;

/// Why QEMU's run state is not known: libvirt did not pass the question
/// on, or QEMU's answer was not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QmpAsked {
    #[error("{0}")]
    Libvirt(VirtError),
    #[error("{0}")]
    Reply(QmpError),
}

/// What we could learn about the domain.
#[derive(Debug, Clone)]
pub struct VmLive {
    pub name: String,
    pub uri: String,
    pub state: Result<DomainState, VirtError>,
    /// QEMU's own run state, when it runs.
    pub qmp_status: Option<Result<String, QmpAsked>>,
    pub xml: Option<Document>,
    /// What the running QEMU was started with (None when it is off).
    pub live_xml: Option<Document>,
    /// The Hyper-V enlightenments this host's KVM offers (domain
    /// capabilities); `None` when not known.
    pub hyperv_offered: Option<Vec<String>>,
    /// One window of live rates (interrupts, vCPUs, KVM), when it runs.
    pub rates: Option<Rates>,
    /// Why there are no live rates.
    pub rates_problem: Option<String>,
    /// /proc/interrupts now (for the VFIO modes).
    pub interrupts: Option<String>,
}

/// Ask libvirt and the host about `name`; sample live data for `window`.
pub fn probe_vm(hv: &dyn Hypervisor, root: &HostRoot, name: &str, window: Duration) -> VmLive {
    let state = hv.state(name);
    let xml = hv
        .domain_xml(name)
        .ok()
        .and_then(|x| Document::parse(&x).ok());
    let active = matches!(state, Ok(s) if s.is_active());
    let live_xml = active
        .then(|| hv.domain_xml_live(name).ok())
        .flatten()
        .and_then(|x| Document::parse(&x).ok());
    let hyperv_offered = crate::hypervisor::caps::caps_of(hv).and_then(|c| c.hyperv);
    let qmp_status = active.then(|| {
        hv.qmp(name, r#"{"execute":"query-status"}"#)
            .map_err(QmpAsked::Libvirt)
            .and_then(|r| parse_status(&r).map_err(QmpAsked::Reply))
    });
    let (rates, rates_problem) = if active {
        match find_vm(hv, root, name) {
            Ok(vm) => {
                let sample = |root: &HostRoot, prev: Option<&crate::monitor::sample::Sample>| {
                    let mut s = read_host_after(root, prev);
                    read_threads(root, &vm, &mut s);
                    let prefer = prev.and_then(|p| p.kvm_source);
                    match kvm_counters(hv, root, &vm, prefer) {
                        Ok((source, k)) => {
                            s.kvm = k;
                            s.kvm_source = Some(source);
                        }
                        Err(e) => s.problems.push(format!("KVM counters: {e}")),
                    }
                    s
                };
                let a = sample(root, None);
                std::thread::sleep(window);
                let b = sample(root, Some(&a));
                (Some(rates(&a, &b, Some(&vm))), None)
            }
            Err(e) => (None, Some(e.to_string())),
        }
    } else {
        (None, Some("the VM is not running".into()))
    };
    VmLive {
        name: name.to_string(),
        uri: hv.uri().to_string(),
        state,
        qmp_status,
        xml,
        live_xml,
        hyperv_offered,
        rates,
        rates_problem,
        interrupts: root.read_text(&HostPath::proc("interrupts")).ok(),
    }
}
