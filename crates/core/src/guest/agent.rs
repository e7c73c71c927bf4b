//! One call to the guest's agent and its typed answers: `guest-get-osinfo`
//! and `guest-get-devices` (qemu's qga/qapi-schema.json). Failures are values
//! that say what happened in the guest's terms — no agent there, no answer,
//! the command turned off in the guest, garbage — each with what to try.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::hypervisor::{Hypervisor, VirtError, VirtErrorKind};

/// How a command reaches the agent: libvirt for a VM (`DomainAgent`), or a
/// socket where qemu-ga listens (the tests).
pub trait AgentLink {
    /// Send one command (a JSON object); the agent's whole reply (a JSON
    /// object with `return` or `error`), waiting at most `timeout_s`.
    fn send(&self, command: &str, timeout_s: u32) -> Result<String, AgentError>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentError {
    /// Nothing answers on the agent's port: the VM has no agent channel, or
    /// the agent is not installed or not started (yet) in the guest.
    Absent(String),
    /// The agent did not answer within the time given.
    NoAnswer { command: String, seconds: u32 },
    /// The guest's agent has this command turned off (qemu-ga's
    /// `--block-rpcs`/`--allow-rpcs`, or its configuration file).
    Disabled { command: String },
    /// The agent ran the command and answered with an error.
    Failed { command: String, message: String },
    /// libvirt refused the call (it needs write access to the VM).
    Denied(String),
    /// The VM is not running, or not there.
    NotRunning(String),
    /// A reply the protocol does not allow.
    Garbage { command: String, why: String },
    /// The connection cannot reach guest agents at all (libvirt's test
    /// driver, the demo's): nothing to say of the guest.
    Unsupported(String),
}

impl AgentError {
    /// What to try, in plain words.
    pub fn hint(&self) -> &'static str {
        match self {
            AgentError::Absent(_) => {
                "Install the guest tools in Windows (virtio-win-guest-tools.exe from the virtio-win ISO: the QEMU Guest Agent service), and keep the VM's org.qemu.guest_agent.0 channel (every VM this app writes has it)."
            }
            AgentError::NoAnswer { .. } => {
                "The guest may be busy or still starting: try again in a minute. If it never answers, restart the QEMU Guest Agent service in Windows."
            }
            AgentError::Disabled { .. } => {
                "The guest's agent was started with this command blocked (--block-rpcs or --allow-rpcs, or its config file). Allow it there, or check this by hand in the guest."
            }
            AgentError::Failed { .. } => "The guest's own message says why.",
            AgentError::Denied(_) => {
                "Asking the guest needs write access to the VM in libvirt: add your user to the libvirt group, or use the same connection you manage the VM with."
            }
            AgentError::NotRunning(_) => {
                "Start the VM first: the checks inside it need it running."
            }
            AgentError::Garbage { .. } => {
                "The agent's reply made no sense: update the guest tools in Windows to the virtio-win version this app names."
            }
            AgentError::Unsupported(_) => "Use qemu:///system, where the VM's QEMU runs.",
        }
    }
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::Absent(m) => write!(f, "no guest agent answers: {}", m.trim())?,
            AgentError::NoAnswer { command, seconds } => write!(
                f,
                "the guest agent did not answer {command} within {seconds} s"
            )?,
            AgentError::Disabled { command } => {
                write!(f, "the guest's agent has {command} turned off")?
            }
            AgentError::Failed { command, message } => write!(
                f,
                "the guest agent could not run {command}: {}",
                message.trim()
            )?,
            AgentError::Denied(m) => write!(f, "not allowed to ask the guest agent: {}", m.trim())?,
            AgentError::NotRunning(m) => write!(f, "the VM is not running: {}", m.trim())?,
            AgentError::Garbage { command, why } => write!(
                f,
                "the guest agent's reply to {command} is not valid: {why}"
            )?,
            AgentError::Unsupported(m) => write!(
                f,
                "this connection cannot reach a guest agent: {}",
                m.trim()
            )?,
        }
        write!(f, "\n  what to try: {}", self.hint())
    }
}

impl std::error::Error for AgentError {}

/// An agent error said in the protocol's words (`{"error": {"class",
/// "desc"}}`) or in libvirt's message around them, made one of ours.
pub(crate) fn classify(command: &str, message: &str) -> AgentError {
    // qemu-ga: "Command guest-exec has been disabled" (older: "The command
    // guest-exec has been disabled for this instance").
    if message.contains("has been disabled") {
        return AgentError::Disabled {
            command: command.to_string(),
        };
    }
    AgentError::Failed {
        command: command.to_string(),
        message: message.to_string(),
    }
}

/// libvirt's error for an agent call, made one of ours.
pub(crate) fn from_virt(command: &str, timeout_s: u32, e: VirtError) -> AgentError {
    match e.kind {
        VirtErrorKind::AgentAbsent => AgentError::Absent(e.message),
        VirtErrorKind::AgentTimeout => AgentError::NoAnswer {
            command: command.to_string(),
            seconds: timeout_s,
        },
        VirtErrorKind::AgentFailed => classify(command, &e.message),
        VirtErrorKind::Denied => AgentError::Denied(e.message),
        VirtErrorKind::NoDomain | VirtErrorKind::WrongState => AgentError::NotRunning(e.message),
        VirtErrorKind::Unsupported => AgentError::Unsupported(e.message),
        _ => AgentError::Failed {
            command: command.to_string(),
            message: e.message,
        },
    }
}

/// A running VM's agent, through libvirt.
pub struct DomainAgent<'a> {
    pub hypervisor: &'a dyn Hypervisor,
    pub domain: &'a str,
}

impl AgentLink for DomainAgent<'_> {
    fn send(&self, command: &str, timeout_s: u32) -> Result<String, AgentError> {
        let name = command_name(command);
        self.hypervisor
            .agent(self.domain, command, timeout_s)
            .map_err(|e| from_virt(&name, timeout_s, e))
    }
}

fn command_name(command: &str) -> String {
    serde_json::from_str::<Value>(command)
        .ok()
        .and_then(|v| v.get("execute").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "the command".to_string())
}

/// The guest's operating system (`guest-get-osinfo`); every field optional,
/// as the schema has them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OsInfo {
    /// `mswindows` on Windows, the os-release ID on Linux.
    pub id: Option<String>,
    pub name: Option<String>,
    pub pretty_name: Option<String>,
    pub version: Option<String>,
    pub version_id: Option<String>,
    /// Windows: the build number (`19045`, `22631`).
    pub kernel_release: Option<String>,
    /// Windows: `10.0`.
    pub kernel_version: Option<String>,
    pub machine: Option<String>,
    pub variant: Option<String>,
}

impl OsInfo {
    pub fn is_windows(&self) -> bool {
        self.id.as_deref() == Some("mswindows")
    }

    /// Windows 11 is build 22000 and later; qemu-ga's own name for it said
    /// "Windows 10" in releases that predate 11 (its table ended there), so
    /// the build decides.
    pub fn windows_generation(&self) -> Option<u8> {
        // Windows Server has its own names (2019, 2022, 2025).
        if !self.is_windows() || self.variant.as_deref() == Some("server") {
            return None;
        }
        let build: u32 = self.kernel_release.as_deref()?.trim().parse().ok()?;
        Some(if build >= 22000 { 11 } else { 10 })
    }

    /// One line: "Windows 11 Pro (build 26100)", or the pretty name.
    /// qemu-ga takes Windows' name from the registry's ProductName, which
    /// says "Windows 10" on Windows 11 too: the build corrects it.
    pub fn summary(&self) -> String {
        let name = self
            .pretty_name
            .clone()
            .or_else(|| self.name.clone())
            .unwrap_or_else(|| "an unnamed system".to_string());
        let name = if self.windows_generation() == Some(11) {
            name.replace("Windows 10", "Windows 11")
        } else {
            name
        };
        match self.kernel_release.as_deref() {
            Some(build) if self.is_windows() => format!("{name} (build {})", build.trim()),
            _ => name,
        }
    }
}

/// A device as the guest's Windows lists it (`guest-get-devices`, Windows
/// guests only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestDevice {
    pub driver_name: Option<String>,
    pub driver_version: Option<String>,
    /// The driver's date, nanoseconds since 1970.
    pub driver_date_ns: Option<i64>,
    /// PCI vendor and device ID, when the device is a PCI one.
    pub pci: Option<(u16, u16)>,
}

/// A guest's agent, over a link.
pub struct Agent<'a> {
    link: &'a dyn AgentLink,
    /// Each call's bound, in seconds.
    pub timeout_s: u32,
}

impl<'a> Agent<'a> {
    pub fn new(link: &'a dyn AgentLink, timeout_s: u32) -> Self {
        Agent { link, timeout_s }
    }

    /// One command; its `return` value.
    pub fn call(&self, execute: &str, arguments: Option<Value>) -> Result<Value, AgentError> {
        let mut cmd = serde_json::json!({ "execute": execute });
        if let (Some(args), Some(obj)) = (arguments, cmd.as_object_mut()) {
            obj.insert("arguments".to_string(), args);
        }
        let reply = self.link.send(&cmd.to_string(), self.timeout_s)?;
        parse_reply(execute, &reply)
    }

    pub fn osinfo(&self) -> Result<OsInfo, AgentError> {
        let v = self.call("guest-get-osinfo", None)?;
        os_info(&v).ok_or_else(|| garbage("guest-get-osinfo", "not an object"))
    }

    pub fn devices(&self) -> Result<Vec<GuestDevice>, AgentError> {
        let v = self.call("guest-get-devices", None)?;
        devices(&v).ok_or_else(|| garbage("guest-get-devices", "not a list of devices"))
    }
}

pub(crate) fn garbage(command: &str, why: &str) -> AgentError {
    AgentError::Garbage {
        command: command.to_string(),
        why: why.to_string(),
    }
}

/// A reply: its `return`, or its `error` made ours.
pub fn parse_reply(command: &str, reply: &str) -> Result<Value, AgentError> {
    let v: Value = serde_json::from_str(reply.trim())
        .map_err(|e| garbage(command, &format!("not JSON ({e})")))?;
    if let Some(r) = v.get("return") {
        return Ok(r.clone());
    }
    if let Some(err) = v.get("error") {
        let desc = err
            .get("desc")
            .and_then(Value::as_str)
            .unwrap_or("no reason given");
        return Err(classify(command, desc));
    }
    Err(garbage(command, "neither a return nor an error"))
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// `guest-get-osinfo`'s return.
pub fn os_info(v: &Value) -> Option<OsInfo> {
    v.as_object()?;
    Some(OsInfo {
        id: text(v, "id"),
        name: text(v, "name"),
        pretty_name: text(v, "pretty-name"),
        version: text(v, "version"),
        version_id: text(v, "version-id"),
        kernel_release: text(v, "kernel-release"),
        kernel_version: text(v, "kernel-version"),
        machine: text(v, "machine"),
        variant: text(v, "variant"),
    })
}

/// `guest-get-devices`'s return.
pub fn devices(v: &Value) -> Option<Vec<GuestDevice>> {
    let list = v.as_array()?;
    let mut out = Vec::with_capacity(list.len().min(4096));
    for d in list.iter().take(4096) {
        d.as_object()?;
        let id = d.get("id");
        let pci = id
            .filter(|id| id.get("type").and_then(Value::as_str) == Some("pci"))
            .and_then(|id| {
                let ven = u16::try_from(id.get("vendor-id")?.as_u64()?).ok()?;
                let dev = u16::try_from(id.get("device-id")?.as_u64()?).ok()?;
                Some((ven, dev))
            });
        out.push(GuestDevice {
            driver_name: text(d, "driver-name"),
            driver_version: text(d, "driver-version"),
            driver_date_ns: d.get("driver-date").and_then(Value::as_i64),
            pci,
        });
    }
    Some(out)
}
