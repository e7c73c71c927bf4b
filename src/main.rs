//! `vfio-assistant`: the app without a subcommand, the CLI with one. `main`
//! turns `run`'s result into an exit code; errors are printed once, with context.

use clap::Parser;
use std::process::ExitCode;
use vfio_assistant::cli::{Cli, Command};
use vfio_assistant::sysroot::HostRoot;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(2)),
        Err(err) => {
            eprintln!("vfio-assistant: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    // A folder or a snapshot file (unpacked, kept while `opened` lives); the
    // app opens its own, and latency only asks whether a root was named.
    let opened = match (&cli.command, &cli.host.root) {
        (None | Some(Command::Latency(_)), _) | (_, None) => None,
        (Some(_), Some(path)) => Some(vfio_assistant::sysroot::open_root(path)?),
    };
    let captured = cli
        .host
        .root
        .as_ref()
        .is_some_and(|p| !HostRoot::at(p).is_live());
    let root = opened
        .as_ref()
        .map_or_else(HostRoot::live, |o| o.root().clone());
    match &cli.command {
        None => vfio_assistant::ui::run_app(vfio_assistant::ui::Source::from_args(
            cli.demo,
            cli.host.root.clone(),
        )),
        Some(Command::Scan(args)) => {
            let root = demo_or(root, cli.demo)?;
            vfio_assistant::cli::scan::run(&root.0, args)
        }
        Some(Command::Check(args)) => {
            let root = demo_or(root, cli.demo)?;
            vfio_assistant::cli::check::run(&root.0, args, cli.demo)
        }
        Some(Command::Doctor(args)) => {
            let root = demo_or(root, cli.demo)?;
            vfio_assistant::cli::doctor::run(&root.0, args, cli.demo)
        }
        Some(Command::Pin(args)) => {
            let root = demo_or(root, cli.demo)?;
            vfio_assistant::cli::pin::run(&root.0, args)
        }
        Some(Command::Domain(args)) => {
            let root = demo_or(root, cli.demo)?;
            vfio_assistant::cli::domain::run(&root.0, args, cli.demo)
        }
        Some(Command::Monitor(args)) => {
            let root = demo_or(root, cli.demo)?;
            vfio_assistant::cli::monitor::run(&root.0, args, cli.demo)
        }
        Some(Command::Latency(_)) if cli.demo || captured => {
            // The probe measures the CPUs it runs on: a captured host's
            // cannot be measured, and this machine's would pass for them.
            eprintln!(
                "vfio-assistant: latency measures this machine's CPUs; --root and --demo name a captured host it cannot measure (run it on that host)"
            );
            Ok(2)
        }
        Some(Command::Latency(args)) => vfio_assistant::cli::latency::run(args),
        Some(Command::Rom(args)) => {
            let root = demo_or(root, cli.demo)?;
            vfio_assistant::cli::rom::run(&root.0, args)
        }
        Some(Command::Snapshot(args)) => {
            let root = demo_or(root, cli.demo)?;
            vfio_assistant::cli::snapshot::run(&root.0, args)
        }
    }
}

/// With `--demo`, the bundled sample host (kept alive while it is used).
fn demo_or(root: HostRoot, demo: bool) -> anyhow::Result<(HostRoot, Option<tempfile::TempDir>)> {
    if demo {
        let (root, dir) = vfio_assistant::ui::demo::unpack_demo()?;
        Ok((root, Some(dir)))
    } else {
        Ok((root, None))
    }
}
