//! Keeping every CPU in shallow idle states for a while, through the kernel's
//! PM QoS interface: a process that writes a 32-bit latency limit to
//! `/dev/cpu_dma_latency` and keeps the file open makes the idle governor
//! choose only states that wake within it. Closing the file (dropping the
//! guard, or the process ending, even by a crash) withdraws the request:
//! nothing stays changed. The limit is `SHALLOW_IDLE_US` (C1/C1E stay
//! allowed), the same line the `cpu.idle_states` check and its advice draw,
//! so the comparison shows what following that advice would gain.

use super::latency::{LatencyStats, ProbeError, probe};
use crate::host::cpuidle::SHALLOW_IDLE_US;
use crate::sysroot::{HostPath, HostRoot};
use std::io::Write;
use std::time::Duration;

/// Why the CPUs could not be held in shallow idle states.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdleHoldError {
    #[error("{path}: run as root to keep the CPUs in shallow idle states")]
    NotRoot { path: String },
    #[error("{path} does not exist (a kernel without PM QoS)")]
    NoPmQos { path: String },
    #[error("{path}: {message}")]
    Open { path: String, message: String },
    #[error("writing {path}: {message}")]
    Write { path: String, message: String },
}

/// The open PM QoS device. Opening registers no limit yet; `hold` sets one.
#[derive(Debug)]
pub struct IdleHold {
    file: std::fs::File,
    path: HostPath,
}

impl IdleHold {
    /// Open the device (root), so that a missing permission shows before
    /// anything is measured.
    pub fn open(root: &HostRoot) -> Result<IdleHold, IdleHoldError> {
        let path = HostPath::dev("cpu_dma_latency");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(root.resolve(&path))
            .map_err(|e| {
                let path = path.to_string();
                match e.kind() {
                    std::io::ErrorKind::PermissionDenied => IdleHoldError::NotRoot { path },
                    std::io::ErrorKind::NotFound => IdleHoldError::NoPmQos { path },
                    _ => IdleHoldError::Open {
                        path,
                        message: e.to_string(),
                    },
                }
            })?;
        Ok(IdleHold { file, path })
    }

    /// Limit every CPU to idle states that wake within `SHALLOW_IDLE_US`,
    /// until this is dropped.
    pub fn hold_shallow(&mut self) -> Result<(), IdleHoldError> {
        let limit = i32::try_from(SHALLOW_IDLE_US).unwrap_or(i32::MAX);
        self.file
            .write_all(&limit.to_ne_bytes())
            .map_err(|e| IdleHoldError::Write {
                path: self.path.to_string(),
                message: e.to_string(),
            })
    }
}

/// Why the run with shallow idle states only was not measured.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotCompared {
    #[error("{0}")]
    Hold(IdleHoldError),
    #[error("{0}")]
    Probe(ProbeError),
    /// On another machine, where this login has no root without a password.
    #[error(
        "keeping {host}'s CPUs to shallow idle states needs root there, and this login has none without a password (log in as root, or let sudo run {program} without one)"
    )]
    NoRootThere { host: String, program: String },
}

/// The probe as configured, and (when asked) with shallow idle states only,
/// or why that second run could not be made.
pub type Compared = (
    Vec<LatencyStats>,
    Option<Result<Vec<LatencyStats>, NotCompared>>,
);

/// The probe as the host is configured, then (with `hold`) again while every
/// CPU is kept in shallow idle states; the request ends with the second run.
pub fn probe_compared(
    cpus: &[u32],
    interval: Duration,
    duration: Duration,
    priority: i32,
    hold: Option<IdleHold>,
) -> Result<Compared, ProbeError> {
    let configured = probe(cpus, interval, duration, priority)?;
    let held = hold.map(|mut h| {
        h.hold_shallow().map_err(NotCompared::Hold)?;
        let r = probe(cpus, interval, duration, priority).map_err(NotCompared::Probe);
        drop(h);
        r
    });
    Ok((configured, held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_shallow_limit_and_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::at(dir.path());
        let err = IdleHold::open(&root).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        // A temporary root's stand-in for the device node.
        std::fs::create_dir_all(dir.path().join("dev")).unwrap();
        let dev = dir.path().join("dev/cpu_dma_latency");
        std::fs::write(&dev, b"").unwrap();
        let mut held = IdleHold::open(&root).unwrap();
        assert!(
            std::fs::read(&dev).unwrap().is_empty(),
            "opening sets nothing"
        );
        held.hold_shallow().unwrap();
        let limit = i32::try_from(SHALLOW_IDLE_US).unwrap();
        assert_eq!(std::fs::read(&dev).unwrap(), limit.to_ne_bytes());
    }
}
