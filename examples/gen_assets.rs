//! Man pages and shell completions, generated from the clap definition at
//! package time so they never drift: `vfio-assistant(1)` and one page per
//! subcommand (`vfio-assistant-tune-apply(1)`…), and completions for bash,
//! zsh and fish. `cargo run --example gen_assets -- OUT` writes
//! `OUT/man/*.1` and `OUT/completions/{vfio-assistant.bash,_vfio-assistant,vfio-assistant.fish}`.

#![allow(clippy::print_stdout)] // it says what it wrote

use clap::CommandFactory;
use clap_complete::{Shell, generate_to};
use std::path::{Path, PathBuf};
use vfio_assistant::cli::Cli;

fn pages(
    cmd: &clap::Command,
    prefix: &str,
    dir: &Path,
    out: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let name = if prefix.is_empty() {
        cmd.get_name().to_string()
    } else {
        format!("{prefix}-{}", cmd.get_name())
    };
    // Each page names itself as the command is typed.
    // clap takes a static name (a short-lived generator may leak it).
    let static_name: &'static str = Box::leak(name.clone().into_boxed_str());
    let page = cmd.clone().name(static_name);
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(page).render(&mut buf)?;
    std::fs::write(&path, buf)?;
    out.push(path);
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        pages(sub, &name, dir, out)?;
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("target/assets"), PathBuf::from);
    let man = out.join("man");
    let comp = out.join("completions");
    std::fs::create_dir_all(&man)?;
    std::fs::create_dir_all(&comp)?;
    let mut cmd = Cli::command();
    cmd.build();
    let mut written = Vec::new();
    pages(&cmd, "", &man, &mut written)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        written.push(generate_to(shell, &mut cmd, "vfio-assistant", &comp)?);
    }
    for w in &written {
        println!("{}", w.display());
    }
    Ok(())
}
