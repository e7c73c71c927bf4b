//! `domain list`, `domain validate FILE`, `domain define FILE`: the libvirt side.
//! The connection defaults to qemu:///system (test:///default with --demo).

use crate::checks::access::check_connect;
use crate::checks::model::Finding;
use crate::checks::run_checks;
use crate::checks::vm::{probe_vm, vm_findings};
use crate::domain::validate::{SchemaResult, caps_problems, schema_check};
use crate::domain::xml::Document;
use crate::host::HostSnapshot;
use crate::libvirt::caps::DomainCaps;
use crate::libvirt::{DEFAULT_URI, Hypervisor, Libvirt, TEST_URI};
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
        Ok(Libvirt::open(self.uri(demo))?)
    }
}

/// The host's domain capabilities for q35 under KVM (or whatever the driver
/// offers), when it can tell.
pub fn caps_of(hv: &dyn Hypervisor) -> Option<DomainCaps> {
    let xml = hv
        .domain_capabilities(Some("q35"), Some("kvm"))
        .or_else(|_| hv.domain_capabilities(None, None))
        .ok()?;
    DomainCaps::parse(&xml).ok()
}

/// The host's findings plus, with `--domain NAME`, that domain's (one second
/// of live data while it runs); failures first. For `check` and `doctor`.
pub fn findings_with_domain(
    root: &HostRoot,
    snap: &HostSnapshot,
    device: Option<&str>,
    domain: Option<&str>,
    connect: &ConnectArgs,
    demo: bool,
    read_rom: bool,
) -> anyhow::Result<Vec<Finding>> {
    let mut findings = run_checks(snap, device);
    if read_rom {
        for e in crate::checks::devices::targets(snap, device) {
            let addr = e.device.address.as_str();
            findings.push(crate::checks::rom::rom_finding(
                Some(addr),
                Some(crate::checks::rom::Card::of(&e.device)),
                &crate::host::rom::rom_path(addr).to_string(),
                &crate::host::rom::read_card_rom(root, addr),
            ));
        }
        findings.sort_by_key(|f| f.status);
    }
    // Whether this user can reach libvirt: on the live host, or wherever
    // --connect (or --demo's test driver) points. A snapshot has no daemon.
    if root.is_live() || connect.connect.is_some() || demo {
        findings.push(check_connect(root, connect.uri(demo)));
        findings.sort_by_key(|f| f.status);
    }
    if let Some(name) = domain {
        let hv = connect.open(demo)?;
        let live = probe_vm(&hv, root, name, std::time::Duration::from_secs(1));
        findings.extend(vm_findings(snap, root, &live));
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
        println!("{}", serde_json::to_string_pretty(&domains)?);
        return Ok(0);
    }
    println!("{} domain(s) on {}", domains.len(), hv.uri());
    let width = domains
        .iter()
        .map(|d| d.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    for d in &domains {
        println!(
            "  {:width$}  {}{}",
            d.name,
            d.state.label(),
            if d.persistent { "" } else { " (transient)" }
        );
    }
    Ok(0)
}

fn read_xml(file: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    Document::parse(&text).with_context(|| format!("{} is not well-formed XML", file.display()))?;
    Ok(text)
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The domain XML file.
    pub file: PathBuf,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

pub fn run_validate(args: &ValidateArgs, demo: bool) -> anyhow::Result<i32> {
    let text = read_xml(&args.file)?;
    let name = args.file.display();
    let mut ok = true;
    match schema_check(&text) {
        SchemaResult::Valid => println!("schema: {name} is valid for libvirt's domain schema"),
        SchemaResult::Invalid(msg) => {
            ok = false;
            println!("schema: {name} does not match libvirt's domain schema:\n{msg}");
        }
        SchemaResult::Unavailable(why) => println!("schema: not checked: {why}"),
    }
    match args.connect.open(demo) {
        Ok(hv) => match caps_of(&hv) {
            Some(caps) => {
                let doc = Document::parse(&text)?;
                let problems = caps_problems(&doc, &caps);
                if problems.is_empty() {
                    println!(
                        "host: nothing in it that {} ({} {}) cannot give",
                        hv.uri(),
                        caps.emulator,
                        caps.machine
                    );
                }
                for p in &problems {
                    ok = false;
                    println!("host: {p}");
                }
            }
            None => println!(
                "host: not checked: {} gives no domain capabilities",
                hv.uri()
            ),
        },
        Err(e) => println!("host: not checked: {e:#}"),
    }
    Ok(if ok { 0 } else { 1 })
}

#[derive(Debug, Args)]
pub struct DefineArgs {
    /// The domain XML file.
    pub file: PathBuf,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

pub fn run_define(args: &DefineArgs, demo: bool) -> anyhow::Result<i32> {
    let text = read_xml(&args.file)?;
    let hv = args.connect.open(demo)?;
    let name = hv.define(&text)?;
    println!(
        "Defined '{name}' on {}. Start it with `virsh -c {} start {name}` or from virt-manager.",
        hv.uri(),
        hv.uri()
    );
    Ok(0)
}
