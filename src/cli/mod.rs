//! The command line: `vfio-assistant` with no subcommand opens the app; the
//! subcommands print to the terminal (`--json` for scripts: then stdout is
//! JSON in every mode, an error included). One file per subcommand; all
//! output goes through `out` (a closed pipe is a quiet end, not a panic).

pub mod check;
pub mod doctor;
pub mod domain;
pub mod domain_install;
pub mod domain_life;
pub mod domain_new;
pub mod domain_virt;
pub mod entry;
pub mod input;
pub mod latency;
pub mod monitor;
pub mod out;
pub mod pin;
pub mod rom;
pub mod scan;
pub mod snapshot;
pub mod text;
pub mod tune;
pub mod tune_args;
pub mod tune_helper;
pub mod tune_keep;
pub mod tune_text;

use crate::remote::SshTarget;
use clap::{Args, Parser, Subcommand};
use out::{StdoutError, errln, outln};
use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "vfio-assistant",
    version,
    about = "Reads a Linux host for GPU passthrough (VFIO) and explains what it finds",
    long_about = "Reads a Linux host for GPU/PCI passthrough to KVM/libvirt virtual machines (VFIO): \
PCI devices and IOMMU groups with a passthrough verdict, the CPU topology, kernel and firmware state.\n\n\
Without a subcommand it opens the desktop app."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub host: HostArgs,
    /// Use the bundled sample host (real data from a Ryzen desktop) instead of this
    /// machine: the app opens on it; each command's help says what it does there.
    #[arg(long, global = true)]
    pub demo: bool,
}

#[derive(Debug, Args, Clone, Default)]
pub struct HostArgs {
    /// Read the host from this folder (an extracted snapshot or a fixture tree) or
    /// snapshot file (.tar.gz) instead of the running machine.
    #[arg(long, value_name = "PATH", global = true, conflicts_with = "host")]
    pub root: Option<PathBuf>,
    /// Another machine over SSH: ssh://[user@]host[:port][/root], with your
    /// SSH keys and config. Its own vfio-assistant (the same version) takes
    /// the snapshot scan, check, doctor, pin and the app read; tune,
    /// monitor, latency, input and rom run there (sudo for what needs
    /// root); domain uses its libvirt (qemu+ssh://…/system).
    #[arg(long, value_name = "ssh://[USER@]HOST[:PORT]", global = true, value_parser = ssh_target)]
    pub host: Option<SshTarget>,
}

/// `--host` read once, at the edge: everything after it holds an
/// `SshTarget`, never the text.
fn ssh_target(text: &str) -> Result<SshTarget, String> {
    SshTarget::parse(text).map_err(|e| e.to_string())
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the host: devices by IOMMU group with passthrough verdicts, the CPU
    /// topology, kernel and firmware state.
    #[command(
        after_help = "With --demo: the report of the bundled sample host (a real Ryzen desktop with two NVIDIA cards) instead of this machine."
    )]
    Scan(scan::ScanArgs),
    /// Check the prerequisites for GPU passthrough, each with evidence, why and the
    /// fix. Exit 1 when something fails.
    #[command(
        after_help = "With --demo: the checks run on the bundled sample host, and libvirt access is checked on libvirt's test driver (test:///default) instead of qemu:///system."
    )]
    Check(check::CheckArgs),
    /// Troubleshoot a symptom (VM paused at start, stutter, Code 43, reset bug…):
    /// the relevant checks, the evidence, the fix, and what to check in the guest.
    #[command(
        after_help = "With --demo: the symptom is walked on the bundled sample host; --domain reads a domain of libvirt's test driver (test:///default)."
    )]
    Doctor(doctor::DoctorArgs),
    /// Plan CPU pinning for a VM: whole cores with their SMT siblings, one L3 group
    /// and NUMA node where it fits, housekeeping cores left to the host.
    #[command(
        after_help = "With --demo: the plan is for the sample host's Ryzen 5 1600 (two CCX of three cores), not this machine's CPU."
    )]
    Pin(pin::PinArgs),
    /// libvirt domains: `new` writes a tuned Windows passthrough domain, `tune`
    /// tunes an existing one keeping everything else, `list`, `validate`, `define`.
    #[command(
        after_help = "With --demo: `new` writes a domain for the sample host's GPU and CPU; list, validate, define, start and stop use libvirt's test driver (test:///default), which keeps nothing after the command."
    )]
    Domain(domain::DomainArgs),
    /// Watch interrupts per CPU and per source, CPU time, and a running VM's vCPU
    /// placement and KVM exit rates, live.
    #[command(
        after_help = "With --demo: the sample host's counters, which never move (a capture); a VM is looked up on libvirt's test driver."
    )]
    Monitor(monitor::MonitorArgs),
    /// Measure timer wake-up latency on CPUs, like cyclictest (the latency a vCPU
    /// pinned there would see).
    #[command(
        after_help = "With --demo: refused — the probe measures the CPUs it runs on, which are this machine's, not the sample host's."
    )]
    Latency(latency::LatencyArgs),
    /// What is in a graphics card's ROM (from the card, as root, or a file): the
    /// UEFI GOP driver OVMF needs, a flash-tool header, the right card; `--save`
    /// writes a clean copy for <rom file='…'/>.
    #[command(
        after_help = "With --demo: the sample host holds no ROMs (a capture never reads them): say so, and check files with --file."
    )]
    Rom(rom::RomArgs),
    /// Capture exactly the files the scan reads into OUT.tar.gz, MAC addresses,
    /// UUIDs and serial numbers masked, to attach to a bug report.
    #[command(
        after_help = "With --demo: writes the bundled sample host itself, as a snapshot file."
    )]
    Snapshot(snapshot::SnapshotArgs),
    /// Host tuning as one undoable transaction: plan, apply, status, undo,
    /// list (kernel command line, vfio-pci at boot, governor, THP, KSM,
    /// hugepages, IRQ affinity, SR-IOV).
    #[command(
        after_help = "With --demo: plans and previews on the sample host's files; nothing on this machine is read or written, commands are listed, never run."
    )]
    Tune(tune::TuneArgs),
    /// Keyboards and mice for evdev passthrough: `list` them, `watch` which
    /// one reacts when you press a key (for `domain new --evdev-keyboard`).
    #[command(
        after_help = "With --demo or --root: `list` shows the captured host's devices; `watch` needs the live host (a capture's devices cannot be pressed)."
    )]
    Input(input::InputArgs),
}

impl Command {
    /// Whether the command was asked for JSON: then its errors are JSON too.
    pub fn wants_json(&self) -> bool {
        use domain::DomainCommand as D;
        match self {
            Command::Scan(a) => a.json,
            Command::Check(a) => a.json,
            Command::Doctor(a) => a.json,
            Command::Pin(a) => a.json,
            Command::Monitor(a) => a.json,
            Command::Latency(a) => a.json,
            Command::Rom(a) => a.json,
            Command::Domain(a) => match &a.command {
                D::List(l) => l.json,
                D::Validate(v) => v.json,
                D::Start(l) | D::Stop(l) | D::Destroy(l) | D::InstallDone(l) => l.json,
                D::New(_) | D::Tune(_) | D::Define(_) | D::VirtioWin(_) => false,
            },
            Command::Snapshot(_) => false,
            Command::Input(i) => match &i.command {
                input::InputCommand::List(a) => a.json,
                input::InputCommand::Watch(a) => a.json,
            },
            Command::Tune(t) => match &t.command {
                tune::TuneCommand::Plan(p) => p.req.json,
                tune::TuneCommand::Apply(a) => a.req.json,
                tune::TuneCommand::Status(j) | tune::TuneCommand::List(j) => j.json,
                tune::TuneCommand::Undo(u) => u.json,
                tune::TuneCommand::Keep(k) => k.out.json,
                tune::TuneCommand::Sudoers => false,
            },
        }
    }
}

/// A command that could not run, for scripts: `{"error": "…"}` on stdout.
pub fn json_error(message: &str) -> Result<(), StdoutError> {
    outln!("{}", serde_json::json!({ "error": message }))
}

/// Whether `--json` is among the arguments (before a `--`): for errors in
/// the arguments themselves, found before there is a `Command` to ask.
pub fn json_in_args(args: impl IntoIterator<Item = OsString>) -> bool {
    args.into_iter()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// Ask a yes/no question on the terminal. Without a terminal the answer is
/// no (scripts say `--yes`), and the message says so.
pub fn confirm(question: &str) -> std::io::Result<bool> {
    if !std::io::stdin().is_terminal() {
        errln!("{question} Not asked: no terminal (give --yes to go ahead).");
        return Ok(false);
    }
    out::err_fmt(format_args!("{question} [y/N] "));
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "Yes"))
}
