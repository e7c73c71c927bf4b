//! libvirt errors as people should see them: what we tried, libvirt's own
//! message, and what to try next.

use std::fmt;

/// The kinds of failure that have a different thing to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VirtErrorKind {
    /// No daemon / socket, or the URI names a driver that is not there.
    NoConnection,
    /// Not allowed: polkit or socket permissions.
    Denied,
    NoDomain,
    /// The domain exists but is not in a state that allows this (e.g. not running).
    WrongState,
    /// libvirt rejected the XML.
    BadXml,
    /// The driver does not do this (e.g. QMP on the test driver).
    Unsupported,
    /// No guest agent to talk to: the domain has no agent channel, or no
    /// agent answers on it.
    AgentAbsent,
    /// The guest agent took longer than the time given.
    AgentTimeout,
    /// The guest agent answered a command with an error.
    AgentFailed,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtError {
    /// What we were doing, e.g. "defining the domain".
    pub action: String,
    pub kind: VirtErrorKind,
    /// libvirt's message, as it gave it.
    pub message: String,
}

impl VirtError {
    pub fn new(action: impl Into<String>, kind: VirtErrorKind, message: impl Into<String>) -> Self {
        VirtError {
            action: action.into(),
            kind,
            message: message.into(),
        }
    }

    /// What to try, in plain words.
    pub fn hint(&self) -> &'static str {
        match self.kind {
            VirtErrorKind::NoConnection => {
                "Is libvirt installed and running? On most distributions: `sudo systemctl enable --now libvirtd` (or virtqemud.socket on newer ones). Check the URI: qemu:///system is where virt-manager keeps VMs."
            }
            VirtErrorKind::Denied => {
                "Your user may not manage system VMs: add it to the libvirt group (`sudo usermod -aG libvirt $USER`, then log in again), or run this command with sudo."
            }
            VirtErrorKind::NoDomain => {
                "No domain by that name on this connection: `vfio-assistant domain list` (or `virsh -c URI list --all`) shows the names."
            }
            VirtErrorKind::WrongState => {
                "The domain is not in a state that allows this (for example it is not running, or already running): check it with `vfio-assistant domain list`."
            }
            VirtErrorKind::BadXml => {
                "libvirt rejected the XML: the New VM page's review (in a terminal: `vfio-assistant domain validate FILE`) checks it against libvirt's schema and says where."
            }
            VirtErrorKind::Unsupported => {
                "This connection's driver cannot do that (the test driver has no QEMU, for example); use qemu:///system."
            }
            VirtErrorKind::AgentAbsent => {
                "No guest agent answers: install the guest tools in the guest (on Windows, virtio-win-guest-tools from the virtio-win ISO) and keep the domain's org.qemu.guest_agent.0 channel."
            }
            VirtErrorKind::AgentTimeout => {
                "The guest agent did not answer in time: the guest may be busy or starting; try again."
            }
            VirtErrorKind::AgentFailed => "The guest agent's own message says why.",
            VirtErrorKind::Other => "See libvirt's message; `journalctl -u libvirtd` may say more.",
        }
    }
}

impl fmt::Display for VirtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed: {}\n  what to try: {}",
            self.action,
            self.message.trim(),
            self.hint()
        )
    }
}

impl std::error::Error for VirtError {}
