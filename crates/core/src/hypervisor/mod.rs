//! libvirt as the core sees it: a small trait (`Hypervisor`), the values
//! it hands back and its errors, so that checks, reports and the monitor
//! can speak of domains without linking libvirt. The real connection
//! (the `virt` crate) lives in the `vfio-assistant-libvirt` crate, which
//! the app passes down as a `Connect` where a use case must open one:
//! `qemu:///system` on a real host, `test:///default` (libvirt's in-process
//! test driver, no daemon) for `--demo` and the tests.
//! `caps.rs` asks for domain capabilities (the model is `domain::caps`).

pub mod caps;
pub mod error;

pub use error::{VirtError, VirtErrorKind};
use serde::Serialize;

/// Opens a libvirt URI. The app passes `vfio_assistant_libvirt::connect`;
/// the core never names libvirt's library, so a use case that may connect
/// takes one of these (the helper and `scan` never load libvirt).
pub type Connect = fn(&str) -> Result<Box<dyn Hypervisor + Send>, VirtError>;

/// The URI people mean when they say "my VMs": the system QEMU driver.
pub const DEFAULT_URI: &str = "qemu:///system";
/// libvirt's in-process test driver: a fake host with one domain named `test`.
pub const TEST_URI: &str = "test:///default";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DomainState {
    Running,
    Blocked,
    Paused,
    ShuttingDown,
    Shutoff,
    Crashed,
    Suspended,
    Unknown,
}

impl DomainState {
    pub fn label(self) -> &'static str {
        match self {
            DomainState::Running => "running",
            DomainState::Blocked => "blocked",
            DomainState::Paused => "paused",
            DomainState::ShuttingDown => "shutting down",
            DomainState::Shutoff => "shut off",
            DomainState::Crashed => "crashed",
            DomainState::Suspended => "suspended (PM)",
            DomainState::Unknown => "unknown",
        }
    }
    pub fn is_active(self) -> bool {
        !matches!(self, DomainState::Shutoff | DomainState::Unknown)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainSummary {
    pub name: String,
    pub uuid: String,
    pub state: DomainState,
    /// Defined (kept when shut off), not just created for one run.
    pub persistent: bool,
}

/// A libvirt network (`virsh net-list --all`): name, running, started when
/// libvirtd starts. The same type the pure preflight takes.
pub use crate::domain::preflight::NetworkSummary;

/// A libvirt storage pool (`virsh pool-info`), for new disk images.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSummary {
    pub name: String,
    /// The folder its volumes live in (a `dir` pool's target path).
    pub path: Option<String>,
    pub active: bool,
    /// Free bytes, as libvirt reports them.
    pub available: u64,
}

/// What the app needs from libvirt. Every call names the domain; errors carry
/// the libvirt message and what to try.
pub trait Hypervisor {
    fn uri(&self) -> &str;
    /// libvirt's version as (major, minor, micro).
    fn lib_version(&self) -> Result<(u32, u32, u32), VirtError>;
    fn domains(&self) -> Result<Vec<DomainSummary>, VirtError>;
    /// The domain's persistent definition (what `virsh dumpxml --inactive` gives).
    fn domain_xml(&self, name: &str) -> Result<String, VirtError>;
    /// The running domain's XML (what QEMU was started with); for a domain
    /// that is off, the same as `domain_xml`.
    fn domain_xml_live(&self, name: &str) -> Result<String, VirtError>;
    /// Define (or redefine) a domain; returns its name.
    fn define(&self, xml: &str) -> Result<String, VirtError>;
    fn start(&self, name: &str) -> Result<(), VirtError>;
    /// Ask the guest to shut down (ACPI).
    fn shutdown(&self, name: &str) -> Result<(), VirtError>;
    /// Pull the plug.
    fn destroy(&self, name: &str) -> Result<(), VirtError>;
    /// Forget the definition (and its NVRAM file).
    fn undefine(&self, name: &str) -> Result<(), VirtError>;
    fn state(&self, name: &str) -> Result<DomainState, VirtError>;
    /// Host capabilities XML.
    fn capabilities(&self) -> Result<String, VirtError>;
    /// (the hypervisor's version, libvirt's), each as major × 1 000 000 +
    /// minor × 1000 + micro: what QEMU and libvirt here can do (PipeWire
    /// audio needs QEMU 8.1 and libvirt 9.10).
    fn versions(&self) -> Result<(u64, u64), VirtError>;
    /// Domain capabilities XML for a machine type (e.g. `q35`) and virt type (`kvm`).
    fn domain_capabilities(
        &self,
        machine: Option<&str>,
        virttype: Option<&str>,
    ) -> Result<String, VirtError>;
    /// A QMP command (JSON) to a running QEMU domain; the JSON reply.
    fn qmp(&self, name: &str, command: &str) -> Result<String, VirtError>;
    /// A command (JSON) to the guest agent of a running domain
    /// (`virDomainQemuAgentCommand`), waiting at most `timeout_s`; the
    /// agent's reply (JSON). The `guest` module makes sense of both.
    fn agent(&self, name: &str, command: &str, timeout_s: u32) -> Result<String, VirtError>;
    /// The libvirt networks (NAT `default` and friends), sorted by name.
    fn networks(&self) -> Result<Vec<NetworkSummary>, VirtError>;
    /// Start a defined network.
    fn start_network(&self, name: &str) -> Result<(), VirtError>;
    /// A storage pool by name (`default` is where virt-manager keeps images).
    fn pool(&self, name: &str) -> Result<PoolSummary, VirtError>;
    /// Define libvirt's `default` pool (a folder, `path`), build it, start
    /// it and mark it autostarted, as virt-manager does on its first use:
    /// a fresh libvirt has none, and an ordinary user cannot write its
    /// folder, where libvirt (root) can.
    fn create_default_pool(&self, path: &str) -> Result<(), VirtError>;
    /// Create a qcow2 volume of `capacity_bytes` in a pool (metadata
    /// preallocated); its path.
    fn create_volume(
        &self,
        pool: &str,
        name: &str,
        capacity_bytes: u64,
    ) -> Result<String, VirtError>;
    /// libvirt's VCPU statistics of a running domain as (field, value):
    /// `vcpu.0.time`, `vcpu.0.exits.sum`… (see `stats.rs`).
    fn vcpu_stats(&self, name: &str) -> Result<Vec<(String, u64)>, VirtError>;
}

/// A boxed connection is one too (what `Connect` gives).
impl<T: Hypervisor + ?Sized> Hypervisor for Box<T> {
    fn uri(&self) -> &str {
        (**self).uri()
    }
    fn lib_version(&self) -> Result<(u32, u32, u32), VirtError> {
        (**self).lib_version()
    }
    fn domains(&self) -> Result<Vec<DomainSummary>, VirtError> {
        (**self).domains()
    }
    fn domain_xml(&self, name: &str) -> Result<String, VirtError> {
        (**self).domain_xml(name)
    }
    fn domain_xml_live(&self, name: &str) -> Result<String, VirtError> {
        (**self).domain_xml_live(name)
    }
    fn define(&self, xml: &str) -> Result<String, VirtError> {
        (**self).define(xml)
    }
    fn start(&self, name: &str) -> Result<(), VirtError> {
        (**self).start(name)
    }
    fn shutdown(&self, name: &str) -> Result<(), VirtError> {
        (**self).shutdown(name)
    }
    fn destroy(&self, name: &str) -> Result<(), VirtError> {
        (**self).destroy(name)
    }
    fn undefine(&self, name: &str) -> Result<(), VirtError> {
        (**self).undefine(name)
    }
    fn state(&self, name: &str) -> Result<DomainState, VirtError> {
        (**self).state(name)
    }
    fn capabilities(&self) -> Result<String, VirtError> {
        (**self).capabilities()
    }
    fn versions(&self) -> Result<(u64, u64), VirtError> {
        (**self).versions()
    }
    fn domain_capabilities(
        &self,
        machine: Option<&str>,
        virttype: Option<&str>,
    ) -> Result<String, VirtError> {
        (**self).domain_capabilities(machine, virttype)
    }
    fn qmp(&self, name: &str, command: &str) -> Result<String, VirtError> {
        (**self).qmp(name, command)
    }
    fn agent(&self, name: &str, command: &str, timeout_s: u32) -> Result<String, VirtError> {
        (**self).agent(name, command, timeout_s)
    }
    fn networks(&self) -> Result<Vec<NetworkSummary>, VirtError> {
        (**self).networks()
    }
    fn start_network(&self, name: &str) -> Result<(), VirtError> {
        (**self).start_network(name)
    }
    fn pool(&self, name: &str) -> Result<PoolSummary, VirtError> {
        (**self).pool(name)
    }
    fn create_default_pool(&self, path: &str) -> Result<(), VirtError> {
        (**self).create_default_pool(path)
    }
    fn create_volume(
        &self,
        pool: &str,
        name: &str,
        capacity_bytes: u64,
    ) -> Result<String, VirtError> {
        (**self).create_volume(pool, name, capacity_bytes)
    }
    fn vcpu_stats(&self, name: &str) -> Result<Vec<(String, u64)>, VirtError> {
        (**self).vcpu_stats(name)
    }
}
