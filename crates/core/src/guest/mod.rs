//! The Windows guest seen from the host: the QEMU guest agent's protocol
//! (qemu-ga, reached over libvirt's `virDomainQemuAgentCommand`), each reply
//! parsed into a value and each failure into a sentence a person can act on.
//!
//! * `agent.rs`: one call (JSON in, the reply's `return` out), the errors
//!   (no agent, no answer, a command the guest's agent has disabled, garbage),
//!   and the typed calls: `guest-get-osinfo`, `guest-get-devices`.
//! * `exec.rs`: `guest-exec` and its `guest-exec-status` poll, bounded in time
//!   and in output.
//! * `windows.rs`: what Windows prints (pnputil's device list with problem
//!   codes, reg query's MSI setting), read.
//! * `base64.rs`: the agent's output encoding, decoded with a size cap.
//!
//! The link is a trait (`AgentLink`): the app's is the `Hypervisor`
//! connection (libvirt), and the tests also speak to a real `qemu-ga` on a
//! socket, the same protocol the guest's agent answers on its virtio port.

pub mod agent;
mod base64;
pub mod exec;
pub mod windows;

pub use agent::{Agent, AgentError, AgentLink, GuestDevice, OsInfo};
pub use exec::ExecOutput;
