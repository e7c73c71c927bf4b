//! `vfio-assistant snapshot OUT.tar.gz [--force]`: the files the scan reads,
//! archived (see capture.rs); OUT is written whole or not at all, the
//! user's alone (0600), secrets masked.

use super::out::outln;
use crate::capture::capture;
use crate::sysroot::HostRoot;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Where to write the archive (`.tar.gz`); `-` for standard output (what
    /// `--host ssh://…` runs on the other machine).
    #[arg(value_name = "OUT.tar.gz")]
    pub out: PathBuf,
    /// Replace OUT if it exists (it is never written through a link).
    #[arg(long)]
    pub force: bool,
}

pub fn run(root: &HostRoot, args: &SnapshotArgs) -> anyhow::Result<i32> {
    if args.out.as_os_str() == "-" {
        // Whole or not at all here too: into a file of our own first.
        let dir = crate::userfile::private_tempdir("vfio-assistant-snapshot-", None)
            .context("a temporary folder for the snapshot")?;
        let file = dir.path().join("snapshot.tar.gz");
        capture(root, &file, false).context("capturing the snapshot")?;
        let mut f = std::fs::File::open(&file).context("reading the snapshot back")?;
        let mut out = std::io::stdout().lock();
        std::io::copy(&mut f, &mut out).context("writing the snapshot to standard output")?;
        std::io::Write::flush(&mut out).context("writing the snapshot to standard output")?;
        return Ok(0);
    }
    let report = capture(root, &args.out, args.force)
        .with_context(|| format!("capturing {}", args.out.display()))?;
    outln!(
        "Wrote {}: {} files, {} symlinks, {} directories, {} placeholders.",
        args.out.display(),
        report.files,
        report.symlinks,
        report.directories,
        report.placeholders
    )?;
    if !report.skipped.is_empty() {
        outln!(
            "{} file(s) could not be read{} and were left out or kept as empty placeholders, e.g. {}",
            report.skipped.len(),
            if root.is_live() {
                " (run as root to include them)"
            } else {
                ""
            },
            report
                .skipped
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    outln!(
        "MAC addresses, UUIDs and serial numbers are masked, and the values of settings named like secrets{}; SNAPSHOT.txt in it lists them. It is yours alone (mode 0600). To read it back:",
        secrets_said(&report)
    )?;
    outln!("  vfio-assistant scan --root {}", args.out.display())?;
    Ok(0)
}

/// How many settings were masked and private keys left out, in words.
fn secrets_said(report: &crate::capture::CaptureReport) -> String {
    let settings: usize = report.masked.values().map(Vec::len).sum();
    let mut said = match settings {
        0 => " (none found)".to_string(),
        n => format!(" ({n} in {} file(s))", report.masked.len()),
    };
    if !report.private_keys.is_empty() {
        said.push_str(&format!(
            "; {} private key(s) left out",
            report.private_keys.len()
        ));
    }
    said
}
