//! Prerequisite checks: `HostSnapshot` (+ optionally one device) -> findings,
//! each with evidence, a plain "why" and the fix. Pure functions over the
//! snapshot, so every check runs the same on the live host and on a capture.

pub mod devices;
pub mod model;
pub mod platform;
pub mod runtime;

use crate::host::HostSnapshot;
use model::{Finding, Status};
use serde::Serialize;

/// All findings, failures first (stable within a status).
pub fn run_checks(s: &HostSnapshot, device: Option<&str>) -> Vec<Finding> {
    let mut out = Vec::new();
    platform::check(s, &mut out);
    devices::check(s, device, &mut out);
    runtime::check(s, &mut out);
    out.sort_by_key(|f| f.status);
    out
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub fail: usize,
    pub warn: usize,
    pub unknown: usize,
    pub info: usize,
    pub pass: usize,
}

pub fn counts(findings: &[Finding]) -> Counts {
    let mut c = Counts::default();
    for f in findings {
        match f.status {
            Status::Fail => c.fail += 1,
            Status::Warn => c.warn += 1,
            Status::Unknown => c.unknown += 1,
            Status::Info => c.info += 1,
            Status::Pass => c.pass += 1,
        }
    }
    c
}
