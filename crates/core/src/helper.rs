//! The privileged helper's logic (`vfio-assistant-helper`, started by
//! pkexec): one request on stdin — a closed, typed enum of at most 1 MiB —,
//! re-read the host, re-plan, apply or undo through `tuning`, and stream one
//! JSON line per step. It trusts nothing it is given: paths and file
//! contents never come from the caller (only change ids, PCI addresses, CPU
//! numbers, a memory size and VF counts, each checked against the host),
//! kernel tokens come from the closed set in `tuning::tokens`, the commands
//! from the closed set in `tuning::command`, and a build for users takes
//! no arguments at all (the test hooks exist only with the `test-hooks`
//! feature). Protocol: docs/helper-protocol.md.

use crate::sysroot::HostRoot;
use crate::tuning::apply::{ApplyError, Env, apply, undo};
use crate::tuning::journal::{EntryState, valid_id};
use crate::tuning::model::Request;
use crate::tuning::prepare::{plan_to_run, read};
use crate::tuning::status::status;
use serde::{Deserialize, Serialize};
use std::io::Read;

pub mod client;
pub mod reply;
pub use reply::{HelperReply, ReplyResult};

/// The most a request may be.
pub const MAX_REQUEST: usize = 1 << 20;

/// What the helper is asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum HelperRequest {
    /// Plan `request` on this host and apply the changes named in
    /// `request.only` (all of them when empty).
    Apply {
        request: Box<Request>,
    },
    Undo {
        id: String,
        #[serde(default)]
        force: bool,
    },
    Status {},
}

/// Why a request is refused (exit 2, nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the request is larger than {MAX_REQUEST} bytes")]
    TooLarge,
    #[error("the request is not valid JSON of a known kind: {0}")]
    Malformed(String),
    #[error("only one request per run: found more after the first")]
    Trailing,
    #[error("{0}")]
    BadValue(String),
    #[error(
        "--root, --journal, --fail-at and --pause-at are for tests and are refused when pkexec, sudo or a setuid bit gave the helper root"
    )]
    RootUnderPkexec,
    /// `undo --force` through sudo (the sudoers line).
    #[error(
        "undo --force is not given through sudo: it puts the old files back over anyone's edits made since, which the sudoers line does not allow. An admin runs it as root: sudo vfio-assistant tune undo --force {0}"
    )]
    ForceThroughSudo(String),
    /// QEMU run as the caller, asked through sudo (the sudoers line).
    #[error(
        "QEMU running as you is not given through sudo: every VM of the system libvirt, and the disks it hands to QEMU, would become yours, which the sudoers line does not allow. Ask for it from the app (polkit asks for an admin's password), or as an admin run the same `vfio-assistant tune apply` with sudo in front"
    )]
    QemuAsUserThroughSudo,
}

/// Check every value a caller gave before the host is even read.
pub fn check_request(r: &HelperRequest) -> Result<(), Refusal> {
    let bad = |s: String| Err(Refusal::BadValue(s));
    match r {
        HelperRequest::Status {} => Ok(()),
        HelperRequest::Undo { id, .. } => {
            if valid_id(id) {
                Ok(())
            } else {
                bad(format!("{id:?} is not a transaction id"))
            }
        }
        HelperRequest::Apply { request } => {
            // Every PCI address is a `PciAddr`: one that is not was refused
            // when the request was read (serde, with NotPciAddr's words).
            if let Some(n) = request.vcpus
                && !(1..=4096).contains(&n)
            {
                return bad(format!("{n} vCPUs is out of range"));
            }
            if let Some(cpus) = &request.cpus
                && (cpus.is_empty() || cpus.len() > 4096 || cpus.iter().any(|c| *c >= 4096))
            {
                return bad("the CPU list is empty or names a CPU past 4095".into());
            }
            if let Some(m) = request.memory_mib
                && !(1..=1 << 30).contains(&m)
            {
                return bad(format!("{m} MiB is out of range"));
            }
            if request.sriov.values().any(|n| *n > 4096) {
                return bad("more than 4096 virtual functions".into());
            }
            if let Some(u) = &request.desktop_user
                && !crate::tuning::play::valid_user(u)
            {
                return bad(format!("{u:?} is not a user name"));
            }
            if let Some(m) = request.looking_glass_mib
                && !(16..=1024).contains(&m)
            {
                return bad(format!("{m} MiB of Looking Glass memory is out of range"));
            }
            // The name goes into a hook script: a closed character set.
            if let Some(vm) = &request.vm
                && !crate::tuning::hook::valid_vm_name(vm)
            {
                return bad(format!(
                    "{vm:?} is not a VM name (letters, digits and ._+- only)"
                ));
            }
            Ok(())
        }
    }
}

/// Parse exactly one request from `bytes`.
pub fn parse_request(bytes: &[u8]) -> Result<HelperRequest, Refusal> {
    if bytes.len() > MAX_REQUEST {
        return Err(Refusal::TooLarge);
    }
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<HelperRequest>();
    let req = match stream.next() {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            return Err(bad_address(bytes).unwrap_or_else(|| Refusal::Malformed(e.to_string())));
        }
        None => return Err(Refusal::Malformed("empty input".into())),
    };
    let rest = &bytes[stream.byte_offset()..];
    if rest.iter().any(|b| !b.is_ascii_whitespace()) {
        return Err(Refusal::Trailing);
    }
    check_request(&req)?;
    Ok(req)
}

/// A request refused for an address (a `PciAddr`: serde refused it while
/// reading) is said as the check says a bad value, with the address, not as
/// JSON that is not valid.
fn bad_address(bytes: &[u8]) -> Option<Refusal> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let r = v.get("request")?;
    let listed = ["gpus", "devices"]
        .iter()
        .filter_map(|k| r.get(*k)?.as_array())
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string));
    let keys = r
        .get("sriov")
        .and_then(|s| s.as_object())
        .into_iter()
        .flat_map(|o| o.keys().cloned());
    listed
        .chain(keys)
        .find(|a| a.trim().parse::<crate::host::pci_addr::PciAddr>().is_err())
        .map(|a| Refusal::BadValue(format!("{a:?} is not a PCI address")))
}

/// Read at most `MAX_REQUEST + 1` bytes from `input`.
pub fn read_request(input: &mut dyn Read) -> Result<HelperRequest, Refusal> {
    let mut buf = Vec::new();
    input
        .take(MAX_REQUEST as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Refusal::Malformed(e.to_string()))?;
    parse_request(&buf)
}

/// Where the helper works.
pub struct HelperEnv {
    pub root: HostRoot,
    pub journal: Option<std::path::PathBuf>,
    /// Tests only (`--fail-at N` with `--root`): the n-th step fails, to
    /// show the rollback.
    pub fail_at: Option<usize>,
    /// Tests only (`--pause-at N` with `--root`): the n-th step waits a
    /// few seconds first, for a test to cut the connection mid-apply.
    pub pause_at: Option<usize>,
    /// Under pkexec, the user who asked (PKEXEC_UID): the desktop user the
    /// Looking Glass change and QEMU's user are for, whatever the request
    /// says.
    pub asking_uid: Option<u32>,
    /// Started by sudo for a user other than root (SUDO_UID, no
    /// PKEXEC_UID): the sudoers line, which allows tuning and nothing that
    /// reaches past it — `undo --force` (another's later edits overwritten)
    /// and QEMU running as the caller (every system VM theirs) are refused.
    pub through_sudo: bool,
}

/// What the printed sudoers line lets its user do, said wherever the line
/// is printed (`tune sudoers`, a sudo that wants a password, `--host`).
pub const SUDOERS_ALLOWS: &str = "It lets that user run the helper as root without a password, with no arguments (\"\") and one closed request on its standard input, the same the app sends: apply, undo and read the tuning this program plans (boot options, the vfio-pci binding, CPU, memory and interrupt settings, libvirt hooks, qemu.conf's device list). Nothing else: through it the helper refuses undo --force and QEMU running as that user.";

/// What the sudoers line does not allow (`HelperEnv::through_sudo`).
pub fn refused_through_sudo(req: &HelperRequest) -> Option<Refusal> {
    match req {
        HelperRequest::Undo { id, force: true } => Some(Refusal::ForceThroughSudo(id.clone())),
        HelperRequest::Apply { request } if request.qemu_as_user => {
            Some(Refusal::QemuAsUserThroughSudo)
        }
        _ => None,
    }
}

/// Run one request; each reply goes to `out` (the helper writes each as a
/// line, `HelperReply::to_line`). The exit code: 0 done, 1 rolled back (or
/// an undo that could not restore everything), 2 refused.
pub fn serve(env: &HelperEnv, req: &HelperRequest, out: &mut dyn FnMut(HelperReply)) -> i32 {
    if env.through_sudo
        && let Some(why) = refused_through_sudo(req)
    {
        out(HelperReply::error(why.to_string()));
        return 2;
    }
    let run_commands = env.root.is_live();
    let mut e = Env::new(env.root.clone(), env.journal.clone(), run_commands);
    e.fail_at = env.fail_at;
    e.pause_at = env.pause_at;
    let ended =
        |result: ReplyResult, recovery: Option<String>| HelperReply::Result { result, recovery };
    match req {
        HelperRequest::Status {} => {
            out(ended(ReplyResult::Status { status: status(&e) }, None));
            0
        }
        HelperRequest::Undo { id, force } => {
            match undo(&e, id, *force, &mut |p| out(HelperReply::Progress(p))) {
                Ok(o) => {
                    let code = if o.failure.is_some() { 1 } else { 0 };
                    out(ended(ReplyResult::Outcome(o), None));
                    code
                }
                Err(err) => {
                    out(HelperReply::error(err.to_string()));
                    2
                }
            }
        }
        HelperRequest::Apply { request } => {
            let (snap, facts) = match read(&env.root) {
                Ok(r) => r,
                Err(err) => {
                    out(HelperReply::error(format!("{err:#}")));
                    return 2;
                }
            };
            let mut request = request.clone();
            // Under pkexec or sudo the desktop user is whoever asked, not
            // what the request says (a request cannot make QEMU run as
            // another user); root asking through sudo names one itself.
            if let Some(uid) = env.asking_uid.filter(|u| *u != 0) {
                request.desktop_user = facts.user_name(uid);
            }
            let request = &request;
            let p = match plan_to_run(&snap, &facts, request, run_commands) {
                Ok(p) => p,
                Err(err) => {
                    out(HelperReply::error(err.to_string()));
                    return 2;
                }
            };
            if p.changes.is_empty() {
                out(HelperReply::nothing_to_do());
                return 0;
            }
            match apply(&e, &facts, &p, request, &mut |p| {
                out(HelperReply::Progress(p))
            }) {
                Ok(o) => {
                    let code = if o.state == EntryState::Applied { 0 } else { 1 };
                    out(ended(
                        ReplyResult::Outcome(o),
                        Some(p.boot.recovery.clone()),
                    ));
                    code
                }
                Err(ApplyError::Preflight(why)) => {
                    out(HelperReply::error(format!(
                        "refused before changing anything: {why}"
                    )));
                    2
                }
                Err(err) => {
                    out(HelperReply::error(err.to_string()));
                    2
                }
            }
        }
    }
}

/// Where the helper is: `VFIO_ASSISTANT_HELPER`, else next to this program
/// (a build tree), else where the packages put it.
pub fn helper_path() -> std::path::PathBuf {
    const INSTALLED: &str = "/usr/libexec/vfio-assistant/vfio-assistant-helper";
    // Tests and development trees name it (the app runs unprivileged; pkexec
    // still asks, and polkit's action matches only the installed path).
    if let Some(p) = std::env::var_os("VFIO_ASSISTANT_HELPER") {
        return std::path::PathBuf::from(p);
    }
    if let Ok(me) = std::env::current_exe()
        && let Some(dir) = me.parent()
    {
        let sibling = dir.join("vfio-assistant-helper");
        if sibling.is_file() && !std::path::Path::new(INSTALLED).is_file() {
            return sibling;
        }
    }
    // Arch keeps helpers in /usr/lib (its package rewrites the policy too).
    const ARCH: &str = "/usr/lib/vfio-assistant/vfio-assistant-helper";
    if !std::path::Path::new(INSTALLED).is_file() && std::path::Path::new(ARCH).is_file() {
        return std::path::PathBuf::from(ARCH);
    }
    std::path::PathBuf::from(INSTALLED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_closed_well_formed_requests() {
        assert!(parse_request(br#"{"kind":"status"}"#).is_ok());
        assert!(
            parse_request(br#"{"kind":"apply","request":{"gpus":["0b:00.0"],"vcpus":4}}"#).is_ok()
        );
        for (bad, want) in [
            (
                &br#"{"kind":"reboot"}"#[..],
                "not valid JSON of a known kind",
            ),
            (br#"{"kind":"status","x":1}"#, "not valid JSON"),
            (
                br#"{"kind":"apply","request":{"gpus":["../../etc"]}}"#,
                "not a PCI address",
            ),
            (
                br#"{"kind":"apply","request":{"gpus":["0b:00.0"],"path":"/etc/x"}}"#,
                "not valid JSON",
            ),
            (
                br#"{"kind":"apply","request":{"cpus":[4096]}}"#,
                "past 4095",
            ),
            (
                br#"{"kind":"apply","request":{"only":["thp; reboot"]}}"#,
                "not a change id",
            ),
            (br#"{"kind":"undo","id":"../x"}"#, "not a transaction id"),
            (
                br#"{"kind":"status"} {"kind":"status"}"#,
                "only one request",
            ),
            (b"", "empty input"),
            (b"\xff\xfe", "not valid JSON"),
        ] {
            let e = parse_request(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{:?}: {e}", String::from_utf8_lossy(bad));
        }
        let big = vec![b' '; MAX_REQUEST + 1];
        assert_eq!(parse_request(&big), Err(Refusal::TooLarge));
        // Short or long, an address is the same value once read.
        let read = |g: &str| match parse_request(
            format!(r#"{{"kind":"apply","request":{{"gpus":["{g}"]}}}}"#).as_bytes(),
        ) {
            Ok(HelperRequest::Apply { request }) => request.gpus,
            other => panic!("{other:?}"),
        };
        assert_eq!(read("0b:00.1"), read("0000:0b:00.1"));
        for bad in ["0b:00.8", "0b:00", "zz:00.0"] {
            assert_eq!(
                parse_request(
                    format!(r#"{{"kind":"apply","request":{{"sriov":{{"{bad}":2}}}}}}"#).as_bytes()
                ),
                Err(Refusal::BadValue(format!("{bad:?} is not a PCI address"))),
            );
        }
    }
}
