//! `vfio-assistant input list|watch`: the host's keyboards and mice as
//! evdev passthrough names them, and the "press a key" picker — which of
//! them react while it watches — for `domain new --evdev-keyboard PATH`.

use super::out::{errln, out, outln};
use crate::host::input::{InputKind, read_input_devices, watch};
use crate::sysroot::HostRoot;
use clap::{Args, Subcommand};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct InputArgs {
    #[command(subcommand)]
    pub command: InputCommand,
}

#[derive(Debug, Subcommand)]
pub enum InputCommand {
    /// The keyboards and mice under /dev/input/by-id, with their names.
    List(ListArgs),
    /// Watch them for a few seconds: press a key on the keyboard (move the
    /// mouse) you want to give the VM, and see which nodes reacted.
    Watch(WatchArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// How long to watch (1-60 s).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub seconds: u64,
    #[arg(long)]
    pub json: bool,
    /// Watch only these event nodes (default: every keyboard and mouse
    /// under /dev/input/by-id).
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,
}

pub fn run(root: &HostRoot, args: &InputArgs) -> anyhow::Result<i32> {
    let devices = read_input_devices(root);
    match &args.command {
        InputCommand::List(a) => {
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&devices)?)?;
            } else if devices.is_empty() {
                outln!("No keyboards or mice under /dev/input/by-id.")?;
            } else {
                for d in &devices {
                    outln!(
                        "{:9} {}  ({}{})",
                        d.kind.word(),
                        d.by_id,
                        d.name.as_deref().unwrap_or("?"),
                        d.event_node
                            .as_deref()
                            .map(|e| format!(", now {e}"))
                            .unwrap_or_default()
                    )?;
                }
            }
            Ok(0)
        }
        InputCommand::Watch(a) => {
            let paths: Vec<String> = if a.nodes.is_empty() {
                devices
                    .iter()
                    .filter(|d| matches!(d.kind, InputKind::Keyboard | InputKind::Mouse))
                    .map(|d| d.by_id.clone())
                    .collect()
            } else {
                a.nodes.clone()
            };
            if !a.json {
                errln!(
                    "Watching {} keyboards and mice for {} s: press a key on the VM's keyboard and move its mouse…",
                    paths.len(),
                    a.seconds
                );
            }
            let found = watch(root, &paths, Duration::from_secs(a.seconds), &|| false)?;
            if a.json {
                outln!("{}", serde_json::to_string_pretty(&found)?)?;
            } else {
                let reacted: Vec<_> = found.iter().filter(|r| r.keys + r.moves > 0).collect();
                if reacted.is_empty() {
                    outln!("Nothing reacted: run it again and press a key while it watches.")?;
                }
                for r in reacted {
                    out!("{}: {} keys, {} moves\n", r.by_id, r.keys, r.moves)?;
                }
            }
            Ok(0)
        }
    }
}
