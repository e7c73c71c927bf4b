//! Why a request cannot be planned on this host (every value is checked
//! against the host: the helper plans for itself from anyone's request).

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{0}: no PCI device with this address on this host")]
    NoDevice(String),
    #[error("{0} cannot be passed through: {1}")]
    NotViable(String, String),
    #[error("CPU {0} is not an online CPU of this host (online: {1})")]
    NoCpu(u32, String),
    #[error("{0}")]
    Pinning(String),
    #[error("{0}")]
    Sriov(String),
    #[error("the kernel parameter {0:?} is not one this tool writes")]
    Token(String),
    #[error("memory of {0} MiB is more than this host has")]
    Memory(u64),
    /// A hook of ours (isolation, single GPU, shared GPU) cannot be made.
    #[error("{0}")]
    Hook(String),
    #[error("shared GPU: {0}")]
    Shared(String),
    #[error("{0}")]
    OnlyKeyboard(String),
    #[error("{0}")]
    User(String),
    #[error("{0} would be written by both '{1}' and '{2}' (a bug: please report it)")]
    Conflict(String, String, String),
}
