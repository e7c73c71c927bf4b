//! Prerequisite checks: `HostSnapshot` (+ optionally one device) -> findings,
//! each with evidence, a plain "why" and the fix. Pure functions over the
//! snapshot, so every check runs the same on the live host and on a capture.

pub mod access;
pub mod cmdline;
pub mod devices;
pub mod idle;
pub mod initramfs;
/// The finding model lives in `crate::finding`, below every layer that
/// makes findings (checks, domain preflight, tuning evidence).
pub mod model {
    pub use crate::finding::{Action, Evidence, Finding, Status};
}
pub mod platform;
pub mod reset_health;
pub mod rom;
pub mod runtime;
pub mod secure_boot;
pub mod vm;

use crate::host::HostSnapshot;
use model::{Finding, Status};
use serde::Serialize;

/// A finding's id: stable (scripts, `check --json` and the doctor's
/// symptoms use them) and declared by the check file that gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct CheckId(pub &'static str);

impl CheckId {
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

/// How a check file runs over a snapshot (with `--device`, one device).
pub type Run = fn(&HostSnapshot, Option<&str>, &mut Vec<Finding>);

/// A check file's line in the table.
pub struct Area {
    pub name: &'static str,
    /// Every id its findings can have.
    pub ids: &'static [CheckId],
    /// None: it runs where its data is (libvirt's access with a
    /// connection, a card's ROM when read, a VM with its live probe).
    pub run: Option<Run>,
}

/// The table: every check file, in the order `run_checks` runs them.
/// Adding a check is a function in its area's file and its id in that
/// file's `AREA`; a new area is its file and its line here.
pub const AREAS: &[Area] = &[
    platform::AREA,
    devices::AREA,
    runtime::AREA,
    idle::AREA,
    initramfs::AREA,
    secure_boot::AREA,
    reset_health::AREA,
    rom::AREA,
    access::AREA,
    vm::AREA,
];

/// Every id a finding can have, from the table.
pub fn check_ids() -> impl Iterator<Item = CheckId> {
    AREAS.iter().flat_map(|a| a.ids.iter().copied())
}

/// Whether `id` is one of the table's.
pub fn is_check_id(id: &str) -> bool {
    check_ids().any(|c| c.0 == id)
}

/// All findings, failures first (stable within a status).
pub fn run_checks(s: &HostSnapshot, device: Option<&str>) -> Vec<Finding> {
    let mut out = Vec::new();
    for run in AREAS.iter().filter_map(|a| a.run) {
        run(s, device, &mut out);
    }
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
