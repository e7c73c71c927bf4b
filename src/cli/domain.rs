//! `vfio-assistant domain tune FILE [--vcpus N] [--diff] [--keep-…]`: the same
//! tuning the wizard gives, applied to a domain the user already has, keeping
//! everything else as written. The tuned XML goes to stdout (or a diff with
//! `--diff`); what changed and why goes to stderr.

use crate::domain::tune::{TuneOptions, diff, tune};
use crate::domain::xml::Document;
use crate::host::scan;
use crate::pinning::{PinRequest, plan};
use crate::sysroot::HostRoot;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DomainArgs {
    #[command(subcommand)]
    pub command: DomainCommand,
}

#[derive(Debug, Subcommand)]
pub enum DomainCommand {
    /// Tune an existing domain XML file and print the result.
    Tune(TuneArgs),
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The domain XML (e.g. from `virsh dumpxml NAME`).
    pub file: PathBuf,
    /// Pin this many vCPUs with the planner (from this host's topology, or --root's).
    #[arg(long)]
    pub vcpus: Option<usize>,
    /// Print a unified diff instead of the whole document.
    #[arg(long)]
    pub diff: bool,
    /// Leave the memory balloon as it is.
    #[arg(long)]
    pub keep_memballoon: bool,
    /// Leave the Hyper-V enlightenments as they are.
    #[arg(long)]
    pub keep_hyperv: bool,
    /// Leave the clock and timers as they are.
    #[arg(long)]
    pub keep_timers: bool,
    /// Leave the <cpu> element as it is.
    #[arg(long)]
    pub keep_cpu: bool,
}

pub fn run(root: &HostRoot, args: &DomainArgs) -> anyhow::Result<i32> {
    match &args.command {
        DomainCommand::Tune(t) => run_tune(root, t),
    }
}

fn run_tune(root: &HostRoot, args: &TuneArgs) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let mut doc = Document::parse(&text)
        .with_context(|| format!("{} is not well-formed XML", args.file.display()))?;
    let pin_plan = match args.vcpus {
        Some(n) => {
            let snap = scan(root)?;
            let req = PinRequest {
                vcpus: n,
                amd: snap.cpu.vendor.as_deref() == Some("AuthenticAMD"),
                ..PinRequest::default()
            };
            Some(plan(&snap.topology, &req)?)
        }
        None => None,
    };
    let opts = TuneOptions {
        plan: pin_plan,
        memballoon_off: !args.keep_memballoon,
        cpu_host_passthrough: !args.keep_cpu,
        hyperv: !args.keep_hyperv,
        timers: !args.keep_timers,
    };
    let edits = tune(&mut doc, &opts).with_context(|| args.file.display().to_string())?;
    let out = doc.serialize();
    if args.diff {
        print!("{}", diff(&text, &out, &args.file.display().to_string()));
    } else {
        print!("{out}");
    }
    for e in &edits {
        eprintln!("changed {}: {}\n  why: {}", e.path, e.what, e.why);
    }
    Ok(0)
}
