//! The window's "or in a terminal" line is the CLI's own grammar (issue
//! 43: it was written in the window, beside the CLI's flags): each request
//! the Tuning page makes, written as `sudo vfio-assistant tune apply …`
//! by `tuning::command_line`, parses back through the CLI's clap into the
//! same request.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use clap::Parser;
use std::collections::BTreeMap;
use vfio_assistant::cli::tune::TuneCommand;
use vfio_assistant::cli::{Cli, Command};
use vfio_assistant::tuning::command_line::apply_command;
use vfio_assistant::tuning::kind::{ChangeId, Kind};
use vfio_assistant::tuning::model::Request;

fn parsed(line: &str) -> Request {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..2], ["sudo", "vfio-assistant"], "{line}");
    let cli = Cli::try_parse_from(&words[1..]).unwrap_or_else(|e| panic!("{line}: {e}"));
    let Some(Command::Tune(t)) = cli.command else {
        panic!("{line}: not tune")
    };
    let TuneCommand::Apply(a) = t.command else {
        panic!("{line}: not apply")
    };
    a.request()
}

#[test]
fn the_terminal_line_parses_back_to_the_same_request() {
    let user = Some("desk".to_string());
    let requests = [
        Request {
            gpus: vec!["0000:0b:00.0".parse().unwrap()],
            vcpus: Some(8),
            memory_mib: Some(16384),
            ..Request::default()
        },
        Request {
            gpus: vec!["0000:0b:00.0".parse().unwrap()],
            cpus: Some(vec![2, 3, 4, 5, 10, 11, 12, 13]),
            memory_mib: Some(8192),
            hugepages_1g: true,
            sriov: BTreeMap::from([("0000:03:00.0".parse().unwrap(), 4)]),
            only: vec![ChangeId::of(Kind::VfioBoot), ChangeId::of(Kind::Cmdline)],
            isolation_hook: true,
            vm: Some("win11".into()),
            looking_glass_mib: Some(64),
            kvmfr: true,
            qemu_as_user: true,
            desktop_user: user.clone(),
            ..Request::default()
        },
        Request {
            gpus: vec!["0000:01:00.0".parse().unwrap()],
            single_gpu: true,
            vm: Some("win11".into()),
            desktop_user: user.clone(),
            ..Request::default()
        },
        Request {
            gpus: vec!["0000:0c:00.0".parse().unwrap()],
            shared_gpu: true,
            vm: Some("gaming".into()),
            shared_stop_units: vec!["ollama.service".into()],
            vcpus: Some(4),
            host_keeps_vm_cpus: true,
            desktop_user: user.clone(),
            ..Request::default()
        },
    ];
    for r in requests {
        let line = apply_command(&r);
        let mut back = parsed(&line);
        // Who the desktop user is comes from the terminal's sudo, not a flag.
        back.desktop_user = r.desktop_user.clone();
        assert_eq!(back, r, "{line}");
    }
}
