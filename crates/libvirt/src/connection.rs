//! The `Hypervisor` trait over a real libvirt connection (the `virt` crate).

use vfio_assistant_core::hypervisor::{
    DomainState, DomainSummary, Hypervisor, NetworkSummary, PoolSummary, VirtError, VirtErrorKind,
};
use virt::connect::Connect;
use virt::domain::Domain;
use virt::enumutil::Enum;
use virt::error::ErrorNumber;

// libvirt flag values (virt does not re-export its -sys constants).
/// VIR_DOMAIN_XML_INACTIVE: the persistent definition, not the live one.
const XML_INACTIVE: u32 = 2;
/// VIR_DOMAIN_UNDEFINE_NVRAM: remove the UEFI variable store with the domain.
const UNDEFINE_NVRAM: u32 = 4;
/// VIR_STORAGE_VOL_CREATE_PREALLOC_METADATA: qcow2 metadata allocated up front.
const VOL_PREALLOC_METADATA: u32 = 1;
/// VIR_STORAGE_POOL_RUNNING.
const POOL_RUNNING: u32 = 2;
/// VIR_DOMAIN_QEMU_MONITOR_COMMAND_DEFAULT: the command is QMP JSON.
const QMP_JSON: u32 = 0;

/// An open libvirt connection.
pub struct Libvirt {
    conn: Connect,
    uri: String,
}

fn kind_of(e: &virt::error::Error) -> VirtErrorKind {
    let msg = e.message().to_ascii_lowercase();
    match e.code() {
        Enum::Known(code) => match code {
            ErrorNumber::NoConnect | ErrorNumber::InvalidConn => VirtErrorKind::NoConnection,
            ErrorNumber::AuthFailed | ErrorNumber::OperationDenied => VirtErrorKind::Denied,
            ErrorNumber::NoDomain => VirtErrorKind::NoDomain,
            ErrorNumber::OperationInvalid => VirtErrorKind::WrongState,
            ErrorNumber::XmlError | ErrorNumber::XmlDetail | ErrorNumber::ConfigUnsupported => {
                VirtErrorKind::BadXml
            }
            ErrorNumber::NoSupport => VirtErrorKind::Unsupported,
            ErrorNumber::AgentUnresponsive | ErrorNumber::AgentUnsynced => {
                VirtErrorKind::AgentAbsent
            }
            ErrorNumber::AgentCommandTimeout => VirtErrorKind::AgentTimeout,
            ErrorNumber::AgentCommandFailed => VirtErrorKind::AgentFailed,
            // A domain without the channel: "argument unsupported: QEMU guest
            // agent is not configured".
            _ if msg.contains("guest agent is not configured") => VirtErrorKind::AgentAbsent,
            // Older libvirt says an agent's error as an internal one.
            _ if msg.contains("unable to execute qemu agent command") => VirtErrorKind::AgentFailed,
            // The test driver says this with an internal error.
            _ if msg.contains("already running") || msg.contains("not running") => {
                VirtErrorKind::WrongState
            }
            // polkit decides for a non-root user on a world-writable socket;
            // without the system D-Bus it cannot, and libvirt says "Unable to
            // get system bus connection … No such file": a refusal, not a
            // missing daemon (seen on this project's machine as a plain user).
            _ if msg.contains("permission denied")
                || msg.contains("authentication")
                || msg.contains("polkit")
                || msg.contains("system bus") =>
            {
                VirtErrorKind::Denied
            }
            _ if msg.contains("failed to connect") || msg.contains("no such file") => {
                VirtErrorKind::NoConnection
            }
            _ => VirtErrorKind::Other,
        },
        Enum::Unknown(_) => VirtErrorKind::Other,
    }
}

pub(crate) fn wrap(action: &str) -> impl Fn(virt::error::Error) -> VirtError + '_ {
    move |e| VirtError::new(action, kind_of(&e), e.message().to_string())
}

fn state_of(s: virt::domain::DomainStateEnum) -> DomainState {
    use virt::domain::DomainState as S;
    match s {
        Enum::Known(S::Running) => DomainState::Running,
        Enum::Known(S::Blocked) => DomainState::Blocked,
        Enum::Known(S::Paused) => DomainState::Paused,
        Enum::Known(S::Shutdown) => DomainState::ShuttingDown,
        Enum::Known(S::Shutoff) => DomainState::Shutoff,
        Enum::Known(S::Crashed) => DomainState::Crashed,
        Enum::Known(S::PMSuspended) => DomainState::Suspended,
        _ => DomainState::Unknown,
    }
}

impl Libvirt {
    /// Open `uri` read-write. libvirt's habit of printing every error to stderr
    /// is switched off: errors come back as values.
    pub fn open(uri: &str) -> Result<Libvirt, VirtError> {
        virt::error::clear_error_callback();
        let conn = Connect::open(Some(uri)).map_err(wrap(&format!("connecting to {uri}")))?;
        Ok(Libvirt {
            conn,
            uri: uri.to_string(),
        })
    }

    pub(crate) fn lookup(&self, name: &str) -> Result<Domain, VirtError> {
        self.conn
            .lookup_domain_by_name(name)
            .map_err(wrap(&format!("looking up domain '{name}'")))
    }
}

impl Hypervisor for Libvirt {
    fn lib_version(&self) -> Result<(u32, u32, u32), VirtError> {
        let v = self
            .conn
            .lib_version()
            .map_err(wrap("asking libvirt its version"))?;
        Ok((v / 1_000_000, (v / 1000) % 1000, v % 1000))
    }

    fn uri(&self) -> &str {
        &self.uri
    }

    fn domains(&self) -> Result<Vec<DomainSummary>, VirtError> {
        let action = "listing domains";
        let mut out = Vec::new();
        for d in self.conn.list_all_domains(0).map_err(wrap(action))? {
            let name = d.name().map_err(wrap(action))?;
            let (state, _) = d.state().map_err(wrap(action))?;
            out.push(DomainSummary {
                uuid: d.uuid_string().unwrap_or_default(),
                persistent: d.is_persistent().unwrap_or(false),
                state: state_of(state),
                name,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn domain_xml(&self, name: &str) -> Result<String, VirtError> {
        self.lookup(name)?
            .xml_desc(XML_INACTIVE)
            .map_err(wrap(&format!("reading the XML of '{name}'")))
    }

    fn domain_xml_live(&self, name: &str) -> Result<String, VirtError> {
        self.lookup(name)?
            .xml_desc(0)
            .map_err(wrap(&format!("reading the running XML of '{name}'")))
    }

    fn define(&self, xml: &str) -> Result<String, VirtError> {
        let action = "defining the domain";
        let d = self.conn.define_domain_xml(xml).map_err(wrap(action))?;
        d.name().map_err(wrap(action))
    }

    fn start(&self, name: &str) -> Result<(), VirtError> {
        self.lookup(name)?
            .create()
            .map(|_| ())
            .map_err(wrap(&format!("starting '{name}'")))
    }

    fn shutdown(&self, name: &str) -> Result<(), VirtError> {
        self.lookup(name)?
            .shutdown()
            .map(|_| ())
            .map_err(wrap(&format!("shutting down '{name}'")))
    }

    fn destroy(&self, name: &str) -> Result<(), VirtError> {
        self.lookup(name)?
            .destroy()
            .map_err(wrap(&format!("stopping '{name}'")))
    }

    fn undefine(&self, name: &str) -> Result<(), VirtError> {
        let d = self.lookup(name)?;
        let action = format!("undefining '{name}'");
        // Drivers without NVRAM support (the test driver) refuse the flag.
        d.undefine_flags(UNDEFINE_NVRAM)
            .or_else(|_| d.undefine())
            .map_err(wrap(&action))
    }

    fn state(&self, name: &str) -> Result<DomainState, VirtError> {
        let (s, _) = self
            .lookup(name)?
            .state()
            .map_err(wrap(&format!("reading the state of '{name}'")))?;
        Ok(state_of(s))
    }

    fn versions(&self) -> Result<(u64, u64), VirtError> {
        let hv = self
            .conn
            .hyp_version()
            .map_err(wrap("reading the hypervisor's version"))?;
        let lib = self
            .conn
            .lib_version()
            .map_err(wrap("reading libvirt's version"))?;
        Ok((u64::from(hv), u64::from(lib)))
    }

    fn capabilities(&self) -> Result<String, VirtError> {
        self.conn
            .capabilities()
            .map_err(wrap("reading the host capabilities"))
    }

    fn domain_capabilities(
        &self,
        machine: Option<&str>,
        virttype: Option<&str>,
    ) -> Result<String, VirtError> {
        self.conn
            .domain_capabilities(None, Some("x86_64"), machine, virttype, 0)
            .map_err(wrap("reading the domain capabilities"))
    }

    fn qmp(&self, name: &str, command: &str) -> Result<String, VirtError> {
        self.lookup(name)?
            .qemu_monitor_command(command, QMP_JSON)
            .map_err(wrap(&format!("sending QMP to '{name}'")))
    }
    fn agent(&self, name: &str, command: &str, timeout_s: u32) -> Result<String, VirtError> {
        // Seconds, never one of libvirt's special values (-2 blocks for ever).
        let timeout = i32::try_from(timeout_s.max(1)).unwrap_or(i32::MAX);
        self.lookup(name)?
            .qemu_agent_command(command, timeout, 0)
            .map_err(wrap(&format!("asking the guest agent of '{name}'")))
    }
    fn networks(&self) -> Result<Vec<NetworkSummary>, VirtError> {
        let action = "listing networks";
        let mut out = Vec::new();
        for n in self.conn.list_all_networks(0).map_err(wrap(action))? {
            out.push(NetworkSummary {
                name: n.name().map_err(wrap(action))?,
                active: n.is_active().map_err(wrap(action))?,
                autostart: n.autostart().unwrap_or(false),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn start_network(&self, name: &str) -> Result<(), VirtError> {
        let action = format!("starting network '{name}'");
        self.conn
            .lookup_network_by_name(name)
            .map_err(wrap(&action))?
            .create()
            .map_err(wrap(&action))
    }

    fn pool(&self, name: &str) -> Result<PoolSummary, VirtError> {
        let action = format!("reading storage pool '{name}'");
        let p = self
            .conn
            .lookup_storage_pool_by_name(name)
            .map_err(wrap(&action))?;
        let info = p.info().map_err(wrap(&action))?;
        let xml = p.xml_desc(0).unwrap_or_default();
        let path = vfio_assistant_core::domain::xml::Document::parse(&xml)
            .ok()
            .and_then(|d| {
                d.root
                    .child("target")
                    .and_then(|t| t.child("path"))
                    .map(|p| p.text().trim().to_string())
            });
        Ok(PoolSummary {
            name: name.to_string(),
            path,
            active: info.state == POOL_RUNNING,
            available: info.available,
        })
    }

    fn create_default_pool(&self, path: &str) -> Result<(), VirtError> {
        let action = format!("creating the storage pool 'default' at {path}");
        let xml = format!(
            "<pool type='dir'>\n  <name>default</name>\n  <target>\n    <path>{}</path>\n  </target>\n</pool>\n",
            quick_xml::escape::escape(path)
        );
        let p = self
            .conn
            .define_storage_pool_xml(&xml, 0)
            .map_err(wrap(&action))?;
        // The folder made (an existing one is kept as it is), then started.
        let started = p
            .build(0)
            .and_then(|_| p.create(0))
            .and_then(|_| p.set_autostart(true));
        if let Err(e) = started {
            // Nothing half made left behind: the definition goes again.
            let _ = p.undefine();
            return Err(wrap(&action)(e));
        }
        Ok(())
    }

    fn create_volume(
        &self,
        pool: &str,
        name: &str,
        capacity_bytes: u64,
    ) -> Result<String, VirtError> {
        let action = format!("creating volume '{name}' in pool '{pool}'");
        let p = self
            .conn
            .lookup_storage_pool_by_name(pool)
            .map_err(wrap(&action))?;
        let xml = format!(
            "<volume>\n  <name>{}</name>\n  <capacity unit='bytes'>{capacity_bytes}</capacity>\n  <target>\n    <format type='qcow2'/>\n  </target>\n</volume>\n",
            quick_xml::escape::escape(name)
        );
        let vol = virt::storage_vol::StorageVol::create_xml(&p, &xml, VOL_PREALLOC_METADATA)
            .map_err(wrap(&action))?;
        vol.path().map_err(wrap(&action))
    }

    fn vcpu_stats(&self, name: &str) -> Result<Vec<(String, u64)>, VirtError> {
        self.domain_stats(name, super::stats::StatsGroup::Vcpu)
    }
}
