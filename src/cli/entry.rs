//! The program's one entry, for both binaries: the app without a
//! subcommand, the CLI with one. `main` turns `run`'s result into an exit
//! code; errors are printed once, with context (and with `--json` also as
//! `{"error": …}` on stdout, so stdout is always JSON). A reader that closed
//! stdout (`| head`) ends the command quietly with exit 0, as ripgrep does:
//! the CLI writes through `cli::out`, and a `println!` left anywhere (its
//! panic on a closed pipe) is caught here as the same quiet end.
//!
//! Two binaries call it. `vfio-assistant` (src/main.rs, what users run)
//! does not link libvirt: loading libvirt's library and the ~55 libraries
//! it pulls in (GnuTLS, ICU, Kerberos, curl…) is most of a short command's
//! time. The commands that never talk to libvirt (`scan`, `pin`,
//! `snapshot`, `latency`, `check` of a captured host, `--help`,
//! `--version`) run in it; every other one is handed, same arguments, to
//! `vfio-assistant-virt` (src/virt_main.rs, installed in
//! /usr/libexec/vfio-assistant/), which links libvirt and is the whole
//! program — the GUI included.

use super::out::{closed, err_fmt, flush};
use super::{Cli, Command, json_error, json_in_args};
use crate::libvirt::Connect;
use crate::sysroot::HostRoot;
use clap::Parser;
use std::process::ExitCode;

pub fn main(libvirt: Option<Connect>) -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    match libvirt {
        Some(open) => crate::libvirt::provide(open),
        None if needs_libvirt(&cli) => run_with_libvirt(),
        None => {}
    }
    let json = cli.command.as_ref().is_some_and(Command::wants_json);
    let result = match quiet_on_closed_stdout(|| run(cli)) {
        Some(r) => r.and_then(|code| {
            flush()?;
            Ok(code)
        }),
        None => return ExitCode::SUCCESS,
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(2)),
        Err(err) if closed(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let message = format!("{err:#}");
            err_fmt(format_args!("vfio-assistant: {message}\n"));
            if json {
                // Best effort: when stdout is gone too, stderr said it.
                let _ = json_error(&message);
            }
            ExitCode::from(2)
        }
    }
}

/// Help and version go to stdout (exit 0); a wrong argument to stderr (exit
/// 2), and with `--json` among the arguments also as JSON on stdout.
fn usage_error(err: &clap::Error) -> ExitCode {
    let _ = err.print();
    if err.use_stderr() && json_in_args(std::env::args_os()) {
        let text = err.render().to_string();
        let _ = json_error(first_line(&text).trim_start_matches("error: "));
    }
    ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2))
}

/// Run `f`; None when it panicked because stdout was closed (`println!`
/// panics on a broken pipe), with std's panic message kept off stderr. Any
/// other panic goes on as it would have.
fn quiet_on_closed_stdout<T>(f: impl FnOnce() -> T) -> Option<T> {
    fn closed_stdout(payload: &(dyn std::any::Any + Send)) -> bool {
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
    }
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !closed_stdout(info.payload()) {
            default(info);
        }
    }));
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(payload) if closed_stdout(payload.as_ref()) => None,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text).trim()
}

/// With `--host ssh://…`: the other machine's snapshot, fetched into a
/// temporary folder (kept while it is read) and named as the root, for the
/// commands that read a host (and `domain`, whose libvirt is then that
/// machine's, `qemu+ssh://`).
fn remote_root(cli: &mut Cli) -> anyhow::Result<Option<tempfile::TempDir>> {
    let Some(t) = cli.host.host.clone() else {
        return Ok(None);
    };
    // The app fetches it itself, on a worker, with its progress shown.
    if cli.command.is_none() {
        return Ok(None);
    }
    if let Some(Command::Domain(d)) = &mut cli.command {
        d.connect_default(&t.libvirt_uri());
        if !d.reads_host() {
            // Nothing of this machine stands in for that one's (its QEMU
            // log is read there): an empty root.
            let dir = crate::userfile::private_tempdir("vfio-assistant-empty-", None)?;
            cli.host.root = Some(dir.path().to_path_buf());
            return Ok(Some(dir));
        }
    }
    // The user's alone (0700): the snapshot fetched into it is theirs.
    let dir = crate::userfile::private_tempdir("vfio-assistant-fetch-", None)?;
    let file = dir.path().join(format!("{}.tar.gz", t.host));
    t.fetch_snapshot(&file)?;
    cli.host.root = Some(file);
    Ok(Some(dir))
}

/// The commands that act on the other machine itself run there (our own
/// program, over the same SSH): `tune`, `monitor`, `latency`, `input`, `rom`.
/// None when the command is not one of them.
fn run_there(cli: &Cli) -> anyhow::Result<Option<i32>> {
    use crate::remote::{Privilege, forwarded_args};
    let Some(t) = &cli.host.host else {
        return Ok(None);
    };
    let privilege = match &cli.command {
        // Tuning runs there as the login: what needs root there goes to
        // that machine's helper (sudo and the one sudoers line that allows
        // it), never our main program under sudo.
        Some(Command::Tune(t)) if t.changes_host() => Privilege::Helper,
        Some(Command::Tune(_) | Command::Monitor(_) | Command::Latency(_) | Command::Input(_)) => {
            Privilege::User
        }
        // The card's ROM is read as root there (a file named is read here).
        Some(Command::Rom(r)) if r.reads_card() => Privilege::Root,
        _ => return Ok(None),
    };
    let args = forwarded_args(std::env::args_os())?;
    Ok(Some(t.forward(&args, privilege)?))
}

fn run(mut cli: Cli) -> anyhow::Result<i32> {
    if let Some(code) = run_there(&cli)? {
        return Ok(code);
    }
    let _remote = remote_root(&mut cli)?;
    // A folder or a snapshot file (unpacked, kept while `opened` lives); the
    // app opens its own, and latency only asks whether a root was named.
    let opened = match (&cli.command, &cli.host.root) {
        (None | Some(Command::Latency(_)), _) | (_, None) => None,
        (Some(_), Some(path)) => Some(crate::sysroot::open_root(path)?),
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
        None => crate::ui::run_app(crate::ui::Source::from_args(
            cli.demo,
            cli.host.root.clone(),
            cli.host.host.clone(),
        )),
        Some(Command::Scan(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::scan::run(&root.0, args)
        }
        Some(Command::Check(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::check::run(&root.0, args, cli.demo)
        }
        Some(Command::Doctor(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::doctor::run(&root.0, args, cli.demo)
        }
        Some(Command::Pin(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::pin::run(&root.0, args)
        }
        Some(Command::Domain(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::domain::run(&root.0, args, cli.demo, cli.host.host.as_ref())
        }
        Some(Command::Monitor(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::monitor::run(&root.0, args, cli.demo)
        }
        Some(Command::Latency(_)) if cli.demo || captured => {
            // The probe measures the CPUs it runs on: a captured host's
            // cannot be measured, and this machine's would pass for them.
            anyhow::bail!(
                "latency measures this machine's CPUs; --root and --demo name a captured host it cannot measure (run it on that host)"
            )
        }
        Some(Command::Latency(args)) => crate::cli::latency::run(args),
        Some(Command::Rom(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::rom::run(&root.0, args)
        }
        Some(Command::Tune(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::tune::run(&root.0, args)
        }
        Some(Command::Snapshot(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::snapshot::run(&root.0, args)
        }
        Some(Command::Input(args)) => {
            let root = demo_or(root, cli.demo)?;
            crate::cli::input::run(&root.0, args)
        }
    }
}

/// With `--demo`, the bundled sample host (kept alive while it is used).
fn demo_or(root: HostRoot, demo: bool) -> anyhow::Result<(HostRoot, Option<tempfile::TempDir>)> {
    if demo {
        let (root, dir) = crate::demo::unpack_demo()?;
        Ok((root, Some(dir)))
    } else {
        Ok((root, None))
    }
}

/// Whether this command talks to libvirt (or may: the GUI, a domain, a
/// live host's access check). Only those that surely never do stay in the
/// program without libvirt.
fn needs_libvirt(cli: &Cli) -> bool {
    let captured = cli.host.root.is_some() || cli.host.host.is_some();
    match &cli.command {
        Some(Command::Scan(_) | Command::Pin(_) | Command::Snapshot(_) | Command::Latency(_)) => {
            false
        }
        // A captured host has no daemon to reach: no access check.
        Some(Command::Check(c)) => !(captured && !cli.demo && c.is_host_only()),
        _ => true,
    }
}

/// The program that links libvirt: beside this one (a build tree), else
/// where the packages put it (/usr/libexec; Arch's /usr/lib).
fn virt_program() -> Option<std::path::PathBuf> {
    const INSTALLED: [&str; 2] = [
        "/usr/libexec/vfio-assistant/vfio-assistant-virt",
        "/usr/lib/vfio-assistant/vfio-assistant-virt",
    ];
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("vfio-assistant-virt")));
    beside
        .into_iter()
        .chain(INSTALLED.map(std::path::PathBuf::from))
        .find(|p| p.is_file())
}

/// Become the program that links libvirt, with the same arguments. Only
/// returns when it cannot be started: the command then runs here, and what
/// needs libvirt says that it is missing.
fn run_with_libvirt() {
    use std::os::unix::process::CommandExt;
    let Some(program) = virt_program() else {
        crate::libvirt::missing(
            "vfio-assistant-virt is not installed beside this program or in /usr/libexec/vfio-assistant/",
        );
        return;
    };
    let err = std::process::Command::new(&program)
        .arg0("vfio-assistant")
        .args(std::env::args_os().skip(1))
        .exec();
    crate::libvirt::missing(&format!(
        "{} could not be started: {err}",
        program.display()
    ));
}
