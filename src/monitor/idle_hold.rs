//! Holding every CPU out of its deep idle states for a while, through the
//! kernel's PM QoS interface: a process that writes a 32-bit latency limit
//! (here 0 µs) to `/dev/cpu_dma_latency` and keeps the file open makes the
//! idle governor choose only states that wake within it. Closing the file
//! (dropping the guard, or the process ending) withdraws the request: nothing
//! stays changed. cyclictest does this by default; we do it only on request,
//! to show what deep idle states cost on this host (probe once as configured,
//! once held).

use crate::sysroot::{HostPath, HostRoot};
use std::io::Write;

/// The request, in force while this lives.
#[derive(Debug)]
pub struct ShallowIdle {
    _file: std::fs::File,
}

/// Ask for 0 µs wake-ups on every CPU until the guard is dropped.
pub fn hold_shallow_idle(root: &HostRoot) -> Result<ShallowIdle, String> {
    let path = HostPath::dev("cpu_dma_latency");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(root.resolve(&path))
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => {
                format!("{path}: run as root to hold the CPUs out of deep idle states")
            }
            std::io::ErrorKind::NotFound => {
                format!("{path} does not exist (a kernel without PM QoS)")
            }
            _ => format!("{path}: {e}"),
        })?;
    file.write_all(&0i32.to_ne_bytes())
        .map_err(|e| format!("writing {path}: {e}"))?;
    Ok(ShallowIdle { _file: file })
}

/// The latency probe run while every CPU is held out of deep idle states;
/// the request is withdrawn as soon as it is done.
pub fn probe_held_shallow(
    root: &HostRoot,
    cpus: &[u32],
    interval: std::time::Duration,
    duration: std::time::Duration,
    priority: i32,
) -> Result<Vec<super::latency::LatencyStats>, String> {
    let guard = hold_shallow_idle(root)?;
    let r = super::latency::probe(cpus, interval, duration, priority).map_err(|e| e.to_string());
    drop(guard);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_zero_limit_and_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::at(dir.path());
        let err = hold_shallow_idle(&root).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
        // A temporary root's stand-in for the device node.
        std::fs::create_dir_all(dir.path().join("dev")).unwrap();
        std::fs::write(dir.path().join("dev/cpu_dma_latency"), b"\x7f\x7f\x7f\x7f").unwrap();
        let held = hold_shallow_idle(&root).unwrap();
        let bytes = std::fs::read(dir.path().join("dev/cpu_dma_latency")).unwrap();
        assert_eq!(bytes, 0i32.to_ne_bytes());
        drop(held);
    }
}
