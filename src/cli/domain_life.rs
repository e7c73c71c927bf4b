//! `domain start|stop|destroy NAME`: start with the networks it needs and,
//! when it fails, the reason from libvirt's error and the QEMU log
//! (`report::lifecycle`); stop asks the guest (ACPI), destroy pulls the plug.

use super::domain_virt::ConnectArgs;
use super::out::{StdoutError, outln};
use crate::libvirt::Hypervisor;
use crate::report::lifecycle::{StartOutcome, start_on};
use crate::sysroot::HostRoot;
use clap::Args;

#[derive(Debug, Args)]
pub struct LifeArgs {
    /// The domain's name.
    pub name: String,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[arg(long)]
    pub json: bool,
}

/// The outcome of a start, for people.
pub fn print_start(o: &StartOutcome, uri: &str) -> Result<(), StdoutError> {
    for n in &o.networks_started {
        outln!("Started network '{n}', which the VM plugs into.")?;
    }
    for (n, why) in &o.networks_failed {
        outln!("Could not start network '{n}', which the VM plugs into: {why}")?;
    }
    if o.started {
        outln!("'{}' is running on {uri}.", o.name)?;
        return match &o.install_keys {
            Some(Ok(n)) => outln!(
                "Unattended install: pressed Enter {n} times for the installer's \"Press any key to boot from CD\"; Windows Setup goes on by itself. `vfio-assistant domain install-done {}` once Windows is installed.",
                o.name
            ),
            Some(Err(e)) => outln!(
                "Unattended install: no key could be pressed ({}): open the VM's screen and press a key at \"Press any key to boot from CD\".",
                e.message
            ),
            None => Ok(()),
        };
    }
    outln!(
        "'{}' did not start: {}",
        o.name,
        o.message.as_deref().unwrap_or("")
    )?;
    for c in &o.causes {
        outln!(
            "\ncause: {}\n  seen: {}\n  why: {}\n  fix: {}",
            c.title,
            c.evidence,
            c.why,
            c.fix
        )?;
    }
    if o.causes.is_empty() {
        outln!(
            "\nNo known cause in {}. Read the whole log: sudo less /var/log/libvirt/qemu/{}.log",
            if o.log_read {
                "libvirt's message or the QEMU log"
            } else {
                "libvirt's message (the QEMU log is readable by root only)"
            },
            o.name
        )?;
    }
    Ok(())
}

/// Start it; with `remote`, the domain is that machine's and a failure is
/// explained from its QEMU log, read there.
pub fn run_start(
    root: &HostRoot,
    args: &LifeArgs,
    demo: bool,
    remote: Option<&crate::remote::SshTarget>,
) -> anyhow::Result<i32> {
    let hv = args.connect.open(demo)?;
    let log_there = |name: &str| remote.and_then(|t| t.qemu_log(name));
    let o = start_on(&hv, root, &args.name, remote.map(|_| &log_there as _));
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&o)?)?;
    } else {
        print_start(&o, hv.uri())?;
    }
    Ok(if o.started { 0 } else { 1 })
}

fn done(args: &LifeArgs, action: &str, said: &str) -> anyhow::Result<i32> {
    if args.json {
        outln!(
            "{}",
            serde_json::json!({"name": args.name, "action": action, "done": true})
        )?;
    } else {
        outln!("{said}")?;
    }
    Ok(0)
}

pub fn run_stop(args: &LifeArgs, demo: bool) -> anyhow::Result<i32> {
    let hv = args.connect.open(demo)?;
    hv.shutdown(&args.name)?;
    done(
        args,
        "shutdown",
        &format!(
            "Asked '{}' to shut down (ACPI power button). A guest that ignores it: `vfio-assistant domain destroy {}`.",
            args.name, args.name
        ),
    )
}

pub fn run_destroy(args: &LifeArgs, demo: bool) -> anyhow::Result<i32> {
    let hv = args.connect.open(demo)?;
    hv.destroy(&args.name)?;
    done(
        args,
        "destroy",
        &format!("'{}' is off (forced, like pulling the plug).", args.name),
    )
}
