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
use crate::remote::{HostSource, OpenedHost};
use crate::sysroot::HostRoot;
use clap::Parser;
use std::process::ExitCode;

/// What a binary links beside the CLI: libvirt's opener and the window.
/// `vfio-assistant` links neither (the commands that need them continue in
/// `vfio-assistant-virt`), so neither libvirt nor the GUI's code is in it.
#[derive(Clone, Copy, Default)]
pub struct Links {
    pub libvirt: Option<Connect>,
    pub gui: Option<fn(crate::ui::Source) -> anyhow::Result<i32>>,
}

pub fn main(links: Links) -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    match links.libvirt {
        Some(open) => crate::libvirt::provide(open),
        None if needs_libvirt(&cli) => run_with_libvirt(),
        None => {}
    }
    let json = cli.command.as_ref().is_some_and(Command::wants_json);
    let result = match quiet_on_closed_stdout(|| run(cli, links.gui)) {
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

fn run(
    mut cli: Cli,
    gui: Option<fn(crate::ui::Source) -> anyhow::Result<i32>>,
) -> anyhow::Result<i32> {
    if let Some(code) = run_there(&cli)? {
        return Ok(code);
    }
    let source = HostSource::from_args(cli.demo, cli.host.root.clone(), cli.host.host.clone());
    let Some(command) = &mut cli.command else {
        return match gui {
            Some(run_app) => run_app(source),
            None => anyhow::bail!(
                "the app's window is vfio-assistant-virt, which could not be started from here (the commands still work: vfio-assistant --help)"
            ),
        };
    };
    let captured = cli
        .host
        .root
        .as_ref()
        .is_some_and(|p| !HostRoot::at(p).is_live());
    let (root, _kept) = open_for(command, &source)?;
    match &*command {
        Command::Scan(args) => crate::cli::scan::run(&root, args),
        Command::Check(args) => crate::cli::check::run(&root, args, cli.demo),
        Command::Doctor(args) => crate::cli::doctor::run(&root, args, cli.demo),
        Command::Pin(args) => crate::cli::pin::run(&root, args),
        Command::Domain(args) => {
            crate::cli::domain::run(&root, args, cli.demo, cli.host.host.as_ref())
        }
        Command::Monitor(args) => crate::cli::monitor::run(&root, args, cli.demo),
        Command::Latency(_) if cli.demo || captured => {
            // The probe measures the CPUs it runs on: a captured host's
            // cannot be measured, and this machine's would pass for them.
            anyhow::bail!(
                "latency measures this machine's CPUs; --root and --demo name a captured host it cannot measure (run it on that host)"
            )
        }
        Command::Latency(args) => crate::cli::latency::run(args),
        Command::Rom(args) => crate::cli::rom::run(&root, args),
        Command::Tune(args) => crate::cli::tune::run(&root, args),
        Command::Snapshot(args) => crate::cli::snapshot::run(&root, args),
        Command::Input(args) => crate::cli::input::run(&root, args),
    }
}

/// What keeps an opened host's files while a command reads it.
#[allow(dead_code)] // held for their Drop
enum Kept {
    Nothing,
    Host(OpenedHost),
    Empty(tempfile::TempDir),
}

/// The host a command reads, opened once from its source (the app opens
/// its own). Latency reads none: it measures this machine's CPUs. A
/// `domain` command with `--host` uses that machine's libvirt, and when it
/// reads no host, an empty root: nothing of this machine stands in for that
/// one's (its QEMU log is read there).
fn open_for(command: &mut Command, source: &HostSource) -> anyhow::Result<(HostRoot, Kept)> {
    if let (Command::Domain(d), HostSource::Remote(t)) = (&mut *command, source) {
        d.connect_default(&t.libvirt_uri());
        if !d.reads_host() {
            let dir = crate::userfile::private_tempdir("vfio-assistant-empty-", None)?;
            return Ok((HostRoot::at(dir.path()), Kept::Empty(dir)));
        }
    }
    if matches!(command, Command::Latency(_)) {
        return Ok((HostRoot::live(), Kept::Nothing));
    }
    let opened = source.open()?;
    Ok((opened.root.clone(), Kept::Host(opened)))
}

/// Whether this command talks to libvirt (or may: the GUI, a domain, a
/// live host's access check). Only those that surely never do stay in the
/// program without libvirt.
fn needs_libvirt(cli: &Cli) -> bool {
    let captured = cli.host.root.is_some() || cli.host.host.is_some();
    match &cli.command {
        // Tuning plans, applies (through the helper), says its status and
        // undoes without libvirt: its hooks name VMs, never ask libvirt.
        Some(
            Command::Scan(_)
            | Command::Pin(_)
            | Command::Snapshot(_)
            | Command::Latency(_)
            | Command::Tune(_),
        ) => false,
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
