//! `domain list`, `domain validate FILE`, `domain define FILE`: the libvirt side.
//! The connection defaults to qemu:///system (test:///default with --demo).
//! Validate and define run the one preflight (`report::preflight`): the
//! schema, what this host's QEMU/KVM gives (a trial start on a live QEMU
//! connection), files, memory, network and devices.

use super::out::{StdoutError, errln, out, outln};
use crate::checks::model::Finding;
use crate::domain::xml::Document;
use crate::host::{HostSnapshot, scan};
use crate::libvirt::{DEFAULT_URI, Hypervisor, TEST_URI, connect};

/// An open libvirt connection.
pub type Libvirt = Box<dyn Hypervisor + Send>;
use crate::report::findings::{FindingsRequest, domain_findings, host_findings};
use crate::report::libvirt::LibvirtAt;
use crate::report::lifecycle::{commit_define, plan_define};
use crate::report::preflight::{Preflight, PreflightRequest, preflight};
use crate::sysroot::HostRoot;
use anyhow::Context;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Debug, Args, Clone, Default)]
pub struct ConnectArgs {
    /// The libvirt connection (default qemu:///system; test:///default with --demo).
    #[arg(long, value_name = "URI")]
    pub connect: Option<String>,
}

impl ConnectArgs {
    pub fn uri(&self, demo: bool) -> &str {
        match &self.connect {
            Some(u) => u,
            None if demo => TEST_URI,
            None => DEFAULT_URI,
        }
    }
    pub fn open(&self, demo: bool) -> anyhow::Result<Libvirt> {
        Ok(connect(self.uri(demo))?)
    }
}

pub use crate::report::preflight::caps_of;

/// The host's findings plus, with `--domain NAME`, that domain's (one second
/// of live data while it runs); failures first. For `check` and `doctor`:
/// the composition is `report::findings`, the same the app uses.
pub fn findings_with_domain(
    root: &HostRoot,
    snap: &HostSnapshot,
    device: Option<&str>,
    domain: Option<&str>,
    connect: &ConnectArgs,
    demo: bool,
    read_rom: bool,
) -> anyhow::Result<Vec<Finding>> {
    // Whether this user can reach libvirt: on the live host, or wherever
    // --connect (or --demo's test driver) points. A snapshot has no daemon.
    let reach = root.is_live() || connect.connect.is_some() || demo;
    let req = FindingsRequest {
        device,
        read_rom,
        libvirt: reach.then(|| LibvirtAt {
            uri: connect.uri(demo),
            connect: crate::libvirt::connect,
        }),
        quiet: false,
    };
    let mut findings = host_findings(root, snap, &req);
    if let Some(name) = domain {
        let hv = connect.open(demo)?;
        findings.extend(domain_findings(root, snap, &hv, name));
        findings.sort_by_key(|f| f.status);
    }
    Ok(findings)
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[arg(long)]
    pub json: bool,
}

pub fn run_list(args: &ListArgs, demo: bool) -> anyhow::Result<i32> {
    let hv = args.connect.open(demo)?;
    let domains = hv.domains()?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&domains)?)?;
        return Ok(0);
    }
    outln!("{} domain(s) on {}", domains.len(), hv.uri())?;
    let width = domains
        .iter()
        .map(|d| d.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    for d in &domains {
        outln!(
            "  {:width$}  {}{}",
            d.name,
            d.state.label(),
            if d.persistent { "" } else { " (transient)" }
        )?;
    }
    Ok(0)
}

/// Domain XML from a file, at most 16 MiB, never blocking on a FIFO.
pub fn read_xml(file: &Path) -> anyhow::Result<String> {
    let text = crate::userfile::read_text(file, 16 * 1024 * 1024)?;
    Document::parse(&text).with_context(|| format!("{} is not well-formed XML", file.display()))?;
    Ok(text)
}

/// The folder relative paths in `file` are read against: its own.
fn base_of(file: &Path) -> Option<PathBuf> {
    let abs = std::path::absolute(file).ok()?;
    abs.parent().map(Path::to_path_buf)
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The domain XML file.
    pub file: PathBuf,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Do not try a stripped copy of the domain on this host's QEMU.
    #[arg(long)]
    pub no_trial: bool,
    /// Print the preflight as JSON (see docs/preflight-json.md).
    #[arg(long)]
    pub json: bool,
}

/// The preflight's findings and adaptations, for people.
pub fn print_preflight(pre: &Preflight, label: &str) -> Result<(), StdoutError> {
    for e in &pre.adapted {
        outln!("adapted {}: {}\n  why: {}", e.path, e.what, e.why)?;
    }
    for f in &pre.findings {
        outln!("{:7} {}", f.status.word(), f.title)?;
        if f.status != crate::checks::model::Status::Pass {
            for ev in &f.evidence {
                outln!("        {}: {}", ev.source, ev.value)?;
            }
            if let Some(fix) = f.fix_text() {
                outln!("        fix: {fix}")?;
            }
        }
    }
    if pre.passes() {
        outln!("{label}: nothing found that stops it from starting on this host.")?;
    } else {
        outln!("{label}: it will not start on this host as it is (FAIL above).")?;
    }
    Ok(())
}

/// The connection to check against, or why there is none (printed, not fatal).
fn open_for_check(connect: &ConnectArgs, root: &HostRoot, demo: bool) -> Option<Libvirt> {
    if !(root.is_live() || demo || connect.connect.is_some()) {
        return None;
    }
    match connect.open(demo) {
        Ok(hv) => Some(hv),
        Err(e) => {
            errln!("note: not checked against libvirt: {e:#}");
            None
        }
    }
}

pub fn run_validate(root: &HostRoot, args: &ValidateArgs, demo: bool) -> anyhow::Result<i32> {
    let text = read_xml(&args.file)?;
    let snap = scan(root)?;
    let hv = open_for_check(&args.connect, root, demo);
    let req = PreflightRequest {
        base_dir: None,
        trial: !args.no_trial,
    };
    let pre = preflight(
        root,
        &snap,
        hv.as_ref().map(|h| h as &dyn Hypervisor),
        &text,
        &req,
    )
    .with_context(|| args.file.display().to_string())?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&pre)?)?;
    } else {
        print_preflight(&pre, &args.file.display().to_string())?;
    }
    Ok(if pre.passes() { 0 } else { 1 })
}

#[derive(Debug, Args)]
pub struct DefineArgs {
    /// The domain XML file.
    pub file: PathBuf,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Define without asking (the diff is still printed).
    #[arg(long)]
    pub yes: bool,
    /// Define even when the preflight says it will not start.
    #[arg(long)]
    pub force: bool,
    /// Do not try a stripped copy of the domain on this host's QEMU.
    #[arg(long)]
    pub no_trial: bool,
}

pub fn run_define(root: &HostRoot, args: &DefineArgs, demo: bool) -> anyhow::Result<i32> {
    let text = read_xml(&args.file)?;
    let snap = scan(root)?;
    let hv = args.connect.open(demo)?;
    let base = base_of(&args.file);
    let req = PreflightRequest {
        base_dir: base.as_deref(),
        trial: !args.no_trial,
    };
    let plan = plan_define(root, &snap, &hv, &text, &req)
        .with_context(|| args.file.display().to_string())?;
    print_preflight(&plan.preflight, &plan.name)?;
    for k in &plan.kept {
        outln!("kept {}: {}\n  why: {}", k.path, k.what, k.why)?;
    }
    if !plan.preflight.passes() && !args.force {
        errln!("Not defined: fix what FAILs above, or define it anyway with --force.");
        return Ok(1);
    }
    match &plan.existing {
        Some(_) if plan.diff.is_empty() => {
            outln!(
                "'{}' on {} already is exactly this: nothing to do.",
                plan.name,
                hv.uri()
            )?;
            return Ok(0);
        }
        Some(_) => {
            outln!("Update of '{}' on {}:", plan.name, hv.uri())?;
            out!("{}", plan.diff)?;
        }
        None => outln!("'{}' is new on {}.", plan.name, hv.uri())?,
    }
    if !args.yes && !super::confirm("Define it?")? {
        errln!("Not defined.");
        return Ok(1);
    }
    let name = commit_define(&hv, &plan)?;
    outln!(
        "{} '{name}' on {}. Start it with `vfio-assistant domain start {name}`.",
        if plan.existing.is_some() {
            "Updated"
        } else {
            "Defined"
        },
        hv.uri()
    )?;
    Ok(0)
}
