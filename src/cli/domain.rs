//! `vfio-assistant domain …`: `new` (domain_new.rs), `list`, `validate`,
//! `define` (domain_virt.rs), `start`, `stop`, `destroy` (domain_life.rs),
//! `install-done` (domain_install.rs), and here `tune FILE|--domain NAME [--vcpus N]
//! [--diff] [--keep-…]`: the same tuning the wizard gives, applied to a domain
//! the user already has, keeping everything else as written. The tuned XML
//! goes to stdout (or a diff with `--diff`); what changed and why to stderr.

use super::domain_life::{self, LifeArgs};
use super::domain_new::{self, NewArgs};
use super::domain_virt::{self, ConnectArgs, DefineArgs, ListArgs, ValidateArgs};
use super::out::{errln, out};
use crate::domain::tune::{TuneOptions, diff, tune};
use crate::domain::xml::Document;
use crate::host::scan;
use crate::libvirt::Hypervisor;
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
    /// Write a tuned Windows 10/11 passthrough domain for this host and print its XML.
    New(Box<NewArgs>),
    /// Tune an existing domain (a file, or one libvirt has) and print the result.
    Tune(TuneArgs),
    /// List the domains on a libvirt connection with their state.
    List(ListArgs),
    /// Check a domain XML file against libvirt's schema and this host's capabilities.
    Validate(ValidateArgs),
    /// Define a domain in libvirt from an XML file, or update the one of that
    /// name (keeping its UUID, MACs, NVRAM and hand additions; the diff first).
    Define(DefineArgs),
    /// Start a domain (and the libvirt networks it needs); a failure is explained.
    Start(LifeArgs),
    /// Ask a running domain to shut down (ACPI power button).
    Stop(LifeArgs),
    /// Force a domain off.
    Destroy(LifeArgs),
    /// After an unattended install (`domain new --unattended`): take the
    /// installer, driver and answer CDs out and delete the answer media.
    InstallDone(LifeArgs),
    /// Where the virtio-win driver disc is on this machine, or fetch
    /// Fedora's (`--download --to PATH`, checked against its SHA-256).
    VirtioWin(super::domain_install::VirtioArgs),
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The domain XML (e.g. from `virsh dumpxml NAME`).
    #[arg(required_unless_present = "domain", conflicts_with = "domain")]
    pub file: Option<PathBuf>,
    /// Tune the domain libvirt has under this name (it is printed, not redefined;
    /// `domain define` the result).
    #[arg(long, value_name = "NAME")]
    pub domain: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
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
    /// Hide KVM from the guest (kvm hidden + Hyper-V vendor_id): only NVIDIA
    /// drivers before 465 need it (Code 43).
    #[arg(long)]
    pub hide_kvm: bool,
    #[command(flatten)]
    pub play: super::domain_new::PlayArgs,
}

impl DomainArgs {
    /// The libvirt used where `--connect` is not given: another machine's
    /// (`qemu+ssh://…`, with `--host`).
    pub fn connect_default(&mut self, uri: &str) {
        let c = match &mut self.command {
            DomainCommand::New(a) => &mut a.connect,
            DomainCommand::Tune(a) => &mut a.connect,
            DomainCommand::List(a) => &mut a.connect,
            DomainCommand::Validate(a) => &mut a.connect,
            DomainCommand::Define(a) => &mut a.connect,
            DomainCommand::Start(a)
            | DomainCommand::Stop(a)
            | DomainCommand::Destroy(a)
            | DomainCommand::InstallDone(a) => &mut a.connect,
            DomainCommand::VirtioWin(_) => return,
        };
        if c.connect.is_none() {
            c.connect = Some(uri.to_string());
        }
    }

    /// Whether the command reads the host (its devices, CPUs, files):
    /// with `--host`, that machine's snapshot is fetched for it.
    pub fn reads_host(&self) -> bool {
        matches!(
            self.command,
            DomainCommand::New(_)
                | DomainCommand::Tune(_)
                | DomainCommand::Validate(_)
                | DomainCommand::Define(_)
        )
    }
}

/// With `remote`, the domains are that machine's (the connection defaults
/// to its `qemu+ssh://`, set by the caller) and its QEMU log is read there.
pub fn run(
    root: &HostRoot,
    args: &DomainArgs,
    demo: bool,
    remote: Option<&crate::remote::SshTarget>,
) -> anyhow::Result<i32> {
    match &args.command {
        DomainCommand::New(a) => domain_new::run(root, a, demo),
        DomainCommand::Tune(t) => run_tune(root, t, demo),
        DomainCommand::List(c) => domain_virt::run_list(c, demo),
        DomainCommand::Validate(v) => domain_virt::run_validate(root, v, demo),
        DomainCommand::Define(d) => domain_virt::run_define(root, d, demo),
        DomainCommand::Start(a) => domain_life::run_start(root, a, demo, remote),
        DomainCommand::Stop(a) => domain_life::run_stop(a, demo),
        DomainCommand::Destroy(a) => domain_life::run_destroy(a, demo),
        DomainCommand::InstallDone(a) => super::domain_install::run_install_done(a, demo),
        DomainCommand::VirtioWin(v) => super::domain_install::run_virtio(root, v),
    }
}

fn run_tune(root: &HostRoot, args: &TuneArgs, demo: bool) -> anyhow::Result<i32> {
    let (text, label, hyperv_supported, versions) = match (&args.file, &args.domain) {
        (Some(file), _) => (
            crate::userfile::read_text(file, 16 * 1024 * 1024)?,
            file.display().to_string(),
            None,
            None,
        ),
        (None, Some(name)) => {
            let hv = args.connect.open(demo)?;
            let caps = domain_virt::caps_of(&hv);
            (
                hv.domain_xml(name)?,
                format!("{name} ({})", hv.uri()),
                caps.and_then(|c| c.hyperv),
                hv.versions().ok(),
            )
        }
        (None, None) => anyhow::bail!("give a domain XML file or --domain NAME"),
    };
    let mut doc =
        Document::parse(&text).with_context(|| format!("{label} is not well-formed XML"))?;
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
        hyperv_supported,
        hide_kvm: args.hide_kvm,
        timers: !args.keep_timers,
        // Always: a port nothing else uses, and the in-guest checks need it.
        guest_agent: true,
    };
    let mut edits = tune(&mut doc, &opts).with_context(|| label.clone())?;
    edits.extend(
        crate::domain::playable::apply_playable(&mut doc, &args.play.playable(versions))
            .map_err(anyhow::Error::msg)?,
    );
    let out = doc.serialize();
    if args.diff {
        out!("{}", diff(&text, &out, &label))?;
    } else {
        out!("{out}")?;
    }
    for e in &edits {
        errln!("changed {}: {}\n  why: {}", e.path, e.what, e.why);
    }
    Ok(0)
}
