//! From a root and a request to the plan, one way for the CLI, the helper
//! and the window: `read` the host once (the scan and the tuning facts),
//! `plan_to_run` on what was read (pure: the window calls it on what its
//! jobs read), and `prepare`, both. A plan for a captured tree or a dry run
//! lists its commands, not runs them.

use super::facts::{TuneFacts, gather};
use super::model::{Plan, Request};
use super::plan::{PlanError, plan};
use crate::host::{HostSnapshot, ScanError, scan};
use crate::sysroot::HostRoot;

/// What a plan was made from, and the plan.
#[derive(Debug)]
pub struct Prepared {
    pub snap: HostSnapshot,
    pub facts: TuneFacts,
    pub plan: Plan,
}

/// Why there is no plan.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The root could not be scanned at all.
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// The request does not fit this host.
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// Read the host for a plan, once: its snapshot and its tuning facts.
pub fn read(root: &HostRoot) -> Result<(HostSnapshot, TuneFacts), ScanError> {
    let snap = scan(root)?;
    Ok((snap, gather(root)))
}

/// Plan `request` on what was read; its commands listed, not run, unless
/// `run_commands` (the live host, not a dry run).
pub fn plan_to_run(
    snap: &HostSnapshot,
    facts: &TuneFacts,
    request: &Request,
    run_commands: bool,
) -> Result<Plan, PlanError> {
    let mut p = plan(snap, facts, request)?;
    if !run_commands {
        p.list_commands_only();
    }
    Ok(p)
}

/// `read`, then `plan_to_run`.
pub fn prepare(
    root: &HostRoot,
    request: &Request,
    run_commands: bool,
) -> Result<Prepared, PrepareError> {
    let (snap, facts) = read(root)?;
    let plan = plan_to_run(&snap, &facts, request, run_commands)?;
    Ok(Prepared { snap, facts, plan })
}
