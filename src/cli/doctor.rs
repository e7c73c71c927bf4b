//! `vfio-assistant doctor [SYMPTOM] [--device ADDR] [--json] [--list]`.
//! Exit 0 when no cause was found, 1 when one was, 2 when the flow could not run.

use super::domain_virt::{ConnectArgs, findings_with_domain};
use super::out::{out, outln};
use crate::checks::model::Status;
use crate::doctor::{Diagnosis, Outcome, SYMPTOMS, diagnose, find_symptom};
use crate::host::scan;
use crate::sysroot::HostRoot;
use clap::Args;
use std::fmt::Write;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The symptom (see --list); without one, every symptom is walked briefly.
    pub symptom: Option<String>,
    /// The device the symptom is about (e.g. 01:00.0); every GPU by default.
    #[arg(long, value_name = "ADDRESS")]
    pub device: Option<String>,
    /// List the symptoms (with --json: each with the checks it walks).
    #[arg(long)]
    pub list: bool,
    /// Print the diagnosis as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also read this libvirt domain: its state and QEMU's, pinning, Hyper-V,
    /// Code 43 workarounds, and one second of live data while it runs.
    #[arg(long, value_name = "NAME")]
    pub domain: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Also read each checked card's ROM (root; the ROM is enabled in sysfs for
    /// the read and disabled again) and say whether it carries the UEFI GOP driver.
    #[arg(long)]
    pub read_rom: bool,
}

pub fn list() -> String {
    let mut o = String::from("Symptoms (vfio-assistant doctor SYMPTOM):\n");
    for s in SYMPTOMS {
        let _ = writeln!(
            o,
            "  {:<18} {}\n  {:<18} (\"{}\")",
            s.id, s.title, "", s.says
        );
    }
    o
}

pub fn render(d: &Diagnosis) -> String {
    let mut o = String::new();
    let verdict = d.outcome.label().to_uppercase();
    let _ = writeln!(o, "{}\n[{verdict}] {}\n", d.title, d.summary);
    for f in d.findings.iter().filter(|f| f.status != Status::Pass) {
        let _ = writeln!(o, "{:<9} {}", format!("[{}]", f.status.word()), f.title);
        for e in &f.evidence {
            let _ = writeln!(o, "       seen: {} = {}", e.source, e.value);
        }
        if let Some(fix) = f.fix_text() {
            let _ = writeln!(o, "       fix:  {fix}");
        }
    }
    let passed: Vec<&str> = d
        .findings
        .iter()
        .filter(|f| f.status == Status::Pass)
        .map(|f| f.title.as_str())
        .collect();
    if !passed.is_empty() {
        let _ = writeln!(o, "Checked and fine: {}", passed.join("; "));
    }
    if !d.next_steps.is_empty() {
        let _ = writeln!(o, "\nNext, where the host scan cannot look:");
        for s in &d.next_steps {
            let _ = writeln!(o, "  - {s}");
        }
    }
    o
}

pub fn run(root: &HostRoot, args: &DoctorArgs, demo: bool) -> anyhow::Result<i32> {
    if args.list {
        if args.json {
            outln!("{}", serde_json::to_string_pretty(SYMPTOMS)?)?;
        } else {
            out!("{}", list())?;
        }
        return Ok(0);
    }
    let symptoms: Vec<_> = match &args.symptom {
        Some(id) => match find_symptom(id) {
            Some(s) => vec![s],
            None => {
                anyhow::bail!("unknown symptom {id:?}; `vfio-assistant doctor --list` names them")
            }
        },
        None => SYMPTOMS.iter().collect(),
    };
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
    let named = args.domain.is_some();
    let diagnoses: Vec<Diagnosis> = symptoms
        .iter()
        .map(|s| diagnose(s, &findings, named))
        .collect();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&diagnoses)?)?;
    } else if args.symptom.is_some() {
        for d in &diagnoses {
            out!("{}", render(d))?;
        }
    } else {
        for d in &diagnoses {
            outln!("{:<18} {:<27} {}", d.symptom, d.outcome.label(), d.title)?;
        }
        outln!("\nRun `vfio-assistant doctor SYMPTOM` for the evidence and the fixes.")?;
    }
    Ok(
        if diagnoses.iter().any(|d| d.outcome == Outcome::CauseFound) {
            1
        } else {
            0
        },
    )
}
