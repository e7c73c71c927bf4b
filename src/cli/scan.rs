//! `vfio-assistant scan [--json]`.

use super::out::{out, outln};
use super::text::render_report;
use crate::host::scan;
use crate::sysroot::HostRoot;
use clap::Args;

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Print the stable JSON document (schema: docs/scan-json.md) instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Also list every warning (files that could not be read) in the report.
    #[arg(long, short)]
    pub verbose: bool,
}

/// Exit code 0 for a scan with partial data (warnings are data); errors bubble up.
pub fn run(root: &HostRoot, args: &ScanArgs) -> anyhow::Result<i32> {
    let snap = scan(root)?;
    if args.json {
        let text = serde_json::to_string_pretty(&snap)?;
        outln!("{text}")?;
    } else {
        out!("{}", render_report(&snap, args.verbose))?;
    }
    Ok(0)
}
