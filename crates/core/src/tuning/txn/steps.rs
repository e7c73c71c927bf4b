//! The steps of a transaction that touch the host outside files: a
//! command run (or recorded when commands do not run), a value read back,
//! a value written as the kernel wants it, an unbind that applies.

use super::Env;
use crate::sysroot::{HostPath, HostRoot};
use crate::tuning::fsops::confined;
use crate::tuning::journal::CommandRecord;
use crate::tuning::model::CommandStep;

/// Why a command step failed (its output is in the journal's record).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandFailed {
    #[error("empty command")]
    Empty,
    #[error("`{command}` exited with {status}: {last_line}")]
    Exited {
        command: String,
        status: String,
        last_line: String,
    },
    #[error("`{command}` could not run: {message}")]
    NotRun { command: String, message: String },
}

pub(crate) fn read_value(root: &HostRoot, path: &str) -> Option<String> {
    let target = confined(root, path, true).ok()?;
    let bytes = crate::userfile::read_bytes(&target, 1 << 20).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// Run `argv` (no shell), recording its output; an exit other than 0 fails.
/// The program is found in the system's folders only (`syspath`), never on
/// the PATH the helper was started with, and runs with a clean environment
/// (PATH the system's, the command's own `envs`, nothing of the caller's).
pub(crate) fn run_command(
    env: &Env,
    argv: &[String],
    envs: &[(&str, &str)],
    records: &mut Vec<CommandRecord>,
) -> Result<(), CommandFailed> {
    let Some((prog, args)) = argv.split_first() else {
        return Err(CommandFailed::Empty);
    };
    let mut cmd = match &env.tool_dir {
        Some(d) => {
            let mut c = std::process::Command::new(d.join(prog));
            crate::syspath::clean(&mut c).env("VFIO_ASSISTANT_ROOT", env.root.base());
            c
        }
        None => crate::syspath::command(prog),
    };
    let out = cmd
        .args(args)
        .envs(envs.iter().copied())
        .stdin(std::process::Stdio::null())
        .output();
    let (status, text) = match &out {
        Ok(o) => {
            let mut t = String::from_utf8_lossy(&o.stdout).into_owned();
            t.push_str(&String::from_utf8_lossy(&o.stderr));
            (o.status.code(), t)
        }
        Err(e) => (None, e.to_string()),
    };
    let tail = if text.len() > 65536 {
        let mut cut = text.len() - 65536;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text[cut..].to_string()
    } else {
        text
    };
    records.push(CommandRecord {
        argv: argv.to_vec(),
        status,
        output: tail.clone(),
    });
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(CommandFailed::Exited {
            command: argv.join(" "),
            status: o.status.to_string(),
            last_line: tail.lines().last().unwrap_or("").to_string(),
        }),
        Err(e) => Err(CommandFailed::NotRun {
            command: argv.join(" "),
            message: e.to_string(),
        }),
    }
}

/// Run a command step, or record that it was not run.
pub(crate) fn command_step(
    env: &Env,
    c: &CommandStep,
    records: &mut Vec<CommandRecord>,
) -> Result<(), CommandFailed> {
    let argv = c.argv();
    if !(env.run_commands && c.run) {
        records.push(CommandRecord {
            argv,
            status: None,
            output: "not run".into(),
        });
        return Ok(());
    }
    run_command(env, &argv, c.cmd.envs(), records)
}

/// A value for writing: a cleared driver_override is an empty line.
pub(crate) fn value_text(v: &str) -> String {
    if v == "(null)" {
        "\n".into()
    } else {
        v.to_string()
    }
}

/// Writing `addr` to `/sys/bus/pci/drivers/DRV/unbind` needs the device to
/// be on DRV now (else the kernel says ENODEV, or the file is not there at
/// all because DRV is not loaded): false when there is nothing to unbind.
pub(crate) fn unbind_applies(root: &HostRoot, path: &str, value: &str) -> bool {
    let Some(drv) = path
        .strip_prefix("/sys/bus/pci/drivers/")
        .and_then(|r| r.strip_suffix("/unbind"))
    else {
        return true;
    };
    let link = root
        .link_name(&HostPath::sys(&format!(
            "bus/pci/devices/{}/driver",
            value.trim()
        )))
        .ok()
        .flatten();
    link.as_deref() == Some(drv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a tuning runs as root gets the system's PATH, its own words,
    /// and nothing of the environment the helper (or this test) was given.
    #[test]
    fn a_command_gets_nothing_of_the_callers_environment() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::new(
            HostRoot::at(dir.path()),
            Some(dir.path().join("journal")),
            true,
        );
        let mut records = Vec::new();
        let argv: Vec<String> = ["sh", "-c", "env"].map(String::from).to_vec();
        run_command(&env, &argv, &[("KERNEL_INSTALL_BYPASS", "1")], &mut records).unwrap();
        let text = &records[0].output;
        let mut names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .filter(|k| !["PWD", "SHLVL", "_", "OLDPWD"].contains(k))
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["KERNEL_INSTALL_BYPASS", "PATH"], "{text}");
        assert!(
            text.contains(&format!("PATH={}", crate::syspath::SYSTEM_PATH)),
            "{text}"
        );
    }
}
