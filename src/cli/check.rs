//! `vfio-assistant check [--device ADDR] [--domain NAME [--connect URI]] [--json]`:
//! the prerequisite checks, and with `--domain` the checks on that libvirt
//! domain (see checks/vm.rs).
//! Exit 0 when nothing fails, 1 when something fails, 2 when the checks could
//! not run at all.

use super::domain_virt::{ConnectArgs, findings_with_domain};
use super::out::{out, outln};
use crate::checks::model::{Finding, Status};
use crate::checks::{Counts, counts};
use crate::host::scan;
use crate::report::next_step::{NextAction, NextStep, next_step_with};
use crate::sysroot::HostRoot;
use clap::Args;
use serde::Serialize;
use std::fmt::Write;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Check this PCI device (e.g. 01:00.0) instead of every GPU.
    #[arg(long, value_name = "ADDRESS")]
    pub device: Option<String>,
    /// Print the findings as JSON (see docs/check-json.md).
    #[arg(long)]
    pub json: bool,
    /// Also explain the checks that passed.
    #[arg(long, short)]
    pub verbose: bool,
    /// Also check this libvirt domain: its state and QEMU's, pinning, Hyper-V,
    /// Code 43 suspects, and one second of live data while it runs.
    #[arg(long, value_name = "NAME")]
    pub domain: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Also read each checked card's ROM (root; the ROM is enabled in sysfs for
    /// the read and disabled again) and say whether it carries the UEFI GOP driver.
    #[arg(long)]
    pub read_rom: bool,
    /// The card meant for the VM, where the host has several: the next
    /// step then speaks of it (the app's Overview remembers the same choice).
    #[arg(long, value_name = "ADDRESS")]
    pub gpu: Option<String>,
}

impl CheckArgs {
    /// The host alone: no domain and no libvirt named (a captured host's
    /// check then never talks to libvirt).
    pub fn is_host_only(&self) -> bool {
        self.domain.is_none() && self.connect.connect.is_none()
    }
}

#[derive(Serialize)]
struct CheckDocument<'a> {
    schema_version: u32,
    root: &'a str,
    counts: Counts,
    /// The one thing to do now (the app's Overview opens with it).
    next_step: NextStep,
    findings: &'a [Finding],
}

pub fn run(root: &HostRoot, args: &CheckArgs, demo: bool) -> anyhow::Result<i32> {
    let snap = scan(root)?;
    let findings = findings_with_domain(
        root,
        &snap,
        args.device.as_deref(),
        args.domain.as_deref(),
        &args.connect,
        demo,
        args.read_rom,
    )?;
    let c = counts(&findings);
    if args.json {
        let doc = CheckDocument {
            schema_version: 1,
            root: &snap.root,
            counts: c.clone(),
            next_step: next_step_with(&snap, &findings, args.gpu.as_deref()),
            findings: &findings,
        };
        outln!("{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        let step = next_step_with(&snap, &findings, args.gpu.as_deref());
        out!("{}", render(&snap.root, &findings, &c, args.verbose))?;
        out!("{}", render_next_step(&step))?;
    }
    Ok(if c.fail > 0 { 1 } else { 0 })
}

/// The one next step, after the findings (where a terminal leaves the eye).
/// Every command it prints runs as printed (tests/it/printed_commands.rs).
pub fn render_next_step(step: &NextStep) -> String {
    let mut o = format!(
        "\nNext step: {}\n       why:  {}\n       how:  {}\n",
        step.sentence,
        step.why,
        how(&step.action)
    );
    if let NextAction::MoveScreen { steps, .. } = &step.action {
        for (i, s) in steps.iter().enumerate() {
            let _ = writeln!(o, "       {}.  {s}", i + 1);
        }
    }
    for alt in &step.alternatives {
        let _ = writeln!(o, "       {}: {}", alt.label, how(&alt.action));
    }
    o
}

/// How an action is carried out: the app's button, and the command.
fn how(action: &NextAction) -> String {
    match action {
        NextAction::Tuning { change, device } => {
            let gpu = device
                .as_deref()
                .filter(|_| {
                    matches!(
                        change,
                        crate::tuning::kinds::Kind::VfioBoot
                            | crate::tuning::kinds::Kind::SingleGpuHook
                            | crate::tuning::kinds::Kind::SharedGpuHook
                    )
                })
                .map(|d| format!(" --gpu {d}"))
                .unwrap_or_default();
            let mode = match change {
                crate::tuning::kinds::Kind::SingleGpuHook => " --single-gpu VM",
                crate::tuning::kinds::Kind::SharedGpuHook => " --shared-gpu VM",
                _ => "",
            };
            format!(
                "the app's Tuning page does it, or `vfio-assistant tune plan --only {change}{gpu}{mode}` shows it"
            )
        }
        NextAction::NewVm => "the app's New VM page, or `vfio-assistant domain new --help`".to_string(),
        NextAction::RestoreHost { .. } => {
            "the app's Restore the host button, or `sudo vfio-assistant tune undo --last`".to_string()
        }
        NextAction::ByHand => "by hand: nothing on the running system can do it".to_string(),
        NextAction::MoveScreen { .. } => {
            "by hand, in the firmware setup and at the back of the machine; then `vfio-assistant check` says whether it took".to_string()
        }
        NextAction::ChooseGpu { cards } => {
            let lines: Vec<String> = cards
                .iter()
                .map(|c| format!("`vfio-assistant check --gpu {}` for the {}", c.address, c.name))
                .collect();
            format!("the app's Overview asks, or {}", lines.join(", or "))
        }
    }
}

/// The human report: failures first, each with what was seen, why and the fix.
pub fn render(root: &str, findings: &[Finding], c: &Counts, verbose: bool) -> String {
    let mut o = String::new();
    let host = if root == "/" { "this machine" } else { root };
    let _ = writeln!(
        o,
        "VFIO Assistant checks ({host}): {} failed, {}, {} unknown, {} info, {} passed\n",
        c.fail,
        crate::units::count(c.warn, "warning"),
        c.unknown,
        c.info,
        c.pass
    );
    for f in findings {
        let _ = writeln!(
            o,
            "{:<9} {}  ({})",
            format!("[{}]", f.status.word()),
            f.title,
            f.id
        );
        if f.status == Status::Pass && !verbose {
            continue;
        }
        for e in &f.evidence {
            let _ = writeln!(o, "       seen: {} = {}", e.source, e.value);
        }
        if !f.why.is_empty() {
            let _ = writeln!(o, "       why:  {}", f.why);
        }
        if let Some(fix) = f.fix_text() {
            let _ = writeln!(o, "       fix:  {fix}");
        }
    }
    o
}
