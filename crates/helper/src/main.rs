//! `vfio-assistant-helper`: the only code that runs as root (started by
//! pkexec for the app's one-click tuning). One request on stdin, one JSON
//! line per step on stdout, the exit code last: 0 done, 1 rolled back, 2
//! refused with nothing changed. See docs/helper-protocol.md.
//!
//! It starts from a clean environment (STYLE rule 14, `clean_environment`):
//! what it needs of its own is read once, then everything else it was given
//! is cleared, so nothing of the caller's — a PATH with a `zstd` of theirs
//! first, `GCONV_PATH`, `IFS`, `TMPDIR`, a locale — reaches the programs it
//! runs, and those are found in `syspath::SYSTEM_PATH` only.

use std::ffi::OsString;
use std::process::ExitCode;
use vfio_assistant_core::helper::{HelperEnv, HelperReply, read_request, serve};
use vfio_assistant_core::sysroot::HostRoot;

use std::io::Write;

/// One line out; a reader that went away (the app closed, the SSH
/// connection dropped) does not stop the helper: what it started runs to
/// its end and the journal says how it ended.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn refuse(why: &str) -> ExitCode {
    say(&HelperReply::error(why).to_line());
    ExitCode::from(2)
}

/// The variables the helper reads before it clears its environment; every
/// other one is removed (and `PATH` set to `syspath::SYSTEM_PATH`):
/// * `PKEXEC_UID` — set by pkexec: the user who asked, whom the Looking
///   Glass change is for;
/// * `SUDO_UID` — set by sudo: the same, through the sudoers line or
///   `sudo`; a request through it may not use `undo --force` or make QEMU
///   run as that user (`HelperEnv::through_sudo`).
///
/// Nothing else is kept: not `HOME`, `LANG` or `LC_*` (the programs it runs
/// speak the C locale), `TMPDIR` (the helper makes no temporary files
/// outside the folders it writes), `IFS`, `GCONV_PATH`, `LD_*`.
const KEPT: [&str; 2] = ["PKEXEC_UID", "SUDO_UID"];

/// Variables the dynamic loader acts on before the helper's first line
/// (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `LD_AUDIT`, every `LD_*`, glibc's
/// tunables): pkexec removes them, and glibc drops them from the setuid
/// sudo's own environment before sudo reads it, whatever its `env_keep`
/// says. Should they arrive all the same when pkexec, sudo or a setuid bit
/// started the helper for someone, that someone's environment reached root:
/// the helper refuses to change anything. (Root's own, when root runs it,
/// are root's: cleared like the rest.)
fn loader_variable(name: &str) -> bool {
    name.starts_with("LD_") || name == "GLIBC_TUNABLES"
}

/// Why the helper refuses to start (said as its one error line, exit 2).
#[derive(Debug)]
enum StartRefused {
    /// A loader variable arrived although someone's privilege started us.
    LoaderVariable(String),
    /// The users' build takes no arguments.
    #[cfg_attr(feature = "test-hooks", allow(dead_code))]
    Argument(String),
    /// A test build's argument it does not know.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    TestArgument(String),
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    StepNumber { flag: &'static str, given: String },
    /// Test hooks under pkexec, sudo or a setuid bit.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    HooksUnderLentRoot,
    /// A failure or pause on purpose, on the live host.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    InjectedOnLiveHost,
}

impl std::fmt::Display for StartRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartRefused::LoaderVariable(v) => write!(
                f,
                "{v} is set although pkexec, sudo or a setuid bit started the helper: the dynamic loader acted on it before the helper's first line, so the caller's environment reached root. Nothing was changed; start the helper without it."
            ),
            StartRefused::Argument(a) => write!(
                f,
                "unknown argument {a:?}: the helper takes no arguments, only one request on its standard input (docs/helper-protocol.md)"
            ),
            StartRefused::TestArgument(a) => write!(
                f,
                "unknown argument {a:?}: this test build takes --root DIR, --journal DIR, --fail-at N and --pause-at N"
            ),
            StartRefused::StepNumber { flag, given } => {
                write!(f, "{flag} takes a step number, not {given:?}")
            }
            StartRefused::HooksUnderLentRoot => write!(
                f,
                "{}",
                vfio_assistant_core::helper::Refusal::RootUnderPkexec
            ),
            StartRefused::InjectedOnLiveHost => write!(
                f,
                "--fail-at and --pause-at are for tests on a --root tree, never the live host"
            ),
        }
    }
}

/// What was kept of the environment, read before it was cleared.
struct Asked {
    pkexec_uid: Option<OsString>,
    sudo_uid: Option<OsString>,
}

/// Read `KEPT`, refuse a loader variable, and clear the rest (`PATH` then
/// `SYSTEM_PATH`). Called first thing in `main`.
fn clean_environment() -> Result<Asked, StartRefused> {
    let vars: Vec<OsString> = std::env::vars_os().map(|(k, _)| k).collect();
    let lent = ["PKEXEC_UID", "SUDO_UID"]
        .iter()
        .any(|k| std::env::var_os(k).is_some())
        || rustix::process::getuid() != rustix::process::geteuid();
    if let Some(bad) = vars
        .iter()
        .find(|k| lent && loader_variable(&k.to_string_lossy()))
    {
        return Err(StartRefused::LoaderVariable(
            bad.to_string_lossy().into_owned(),
        ));
    }
    let asked = Asked {
        pkexec_uid: std::env::var_os(KEPT[0]),
        sudo_uid: std::env::var_os(KEPT[1]),
    };
    for k in vars {
        if k.to_str() != Some("PATH") {
            // SAFETY: first thing in main, before any other thread exists
            // (nothing else reads or writes the environment meanwhile).
            unsafe { std::env::remove_var(&k) };
        }
    }
    // SAFETY: as above, still single-threaded.
    unsafe { std::env::set_var("PATH", vfio_assistant_core::syspath::SYSTEM_PATH) };
    Ok(asked)
}

impl Asked {
    fn uid(v: &Option<OsString>) -> Option<u32> {
        v.as_ref()
            .and_then(|u| u.to_str())
            .and_then(|u| u.trim().parse().ok())
    }

    /// The user who asked for root: pkexec's PKEXEC_UID, or sudo's SUDO_UID
    /// (both set by the program that gave us root, not by the caller).
    fn asking_uid(&self) -> Option<u32> {
        Self::uid(&self.pkexec_uid).or_else(|| Self::uid(&self.sudo_uid))
    }

    /// Started through sudo by someone other than root (the sudoers line,
    /// or sudo with a password): not pkexec, whose action asks an admin.
    fn through_sudo(&self) -> bool {
        self.pkexec_uid.is_none() && Self::uid(&self.sudo_uid).is_some_and(|u| u != 0)
    }

    /// Whether someone else's privilege runs us: pkexec, sudo, a setuid
    /// bit. The test hooks are refused then even in a test build.
    #[cfg(feature = "test-hooks")]
    fn lent_privilege(&self) -> bool {
        self.pkexec_uid.is_some()
            || self.sudo_uid.is_some()
            || rustix::process::getuid() != rustix::process::geteuid()
    }
}

/// What the tests may tell the helper; nothing else can be told to it.
#[derive(Default)]
struct TestHooks {
    root: Option<String>,
    journal: Option<std::path::PathBuf>,
    fail_at: Option<usize>,
    pause_at: Option<usize>,
}

/// The arguments. A build for users (without the `test-hooks` feature)
/// takes none at all: the request on stdin is everything the helper is
/// told, so the sudoers line and the polkit action allow exactly that.
/// (A compile-time switch, not a runtime check: a check can be forgotten
/// or talked around, code that is not there cannot run.)
#[cfg(not(feature = "test-hooks"))]
fn test_hooks(_: &Asked) -> Result<TestHooks, StartRefused> {
    match std::env::args().nth(1) {
        None => Ok(TestHooks::default()),
        Some(a) => Err(StartRefused::Argument(a)),
    }
}

#[cfg(feature = "test-hooks")]
fn test_hooks(asked: &Asked) -> Result<TestHooks, StartRefused> {
    let mut h = TestHooks::default();
    let mut args = std::env::args().skip(1);
    let number = |flag: &'static str, n: String| {
        n.parse::<usize>()
            .map_err(|_| StartRefused::StepNumber { flag, given: n })
    };
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--root", Some(d)) => h.root = Some(d),
            ("--journal", Some(d)) => h.journal = Some(std::path::PathBuf::from(d)),
            ("--fail-at", Some(n)) => h.fail_at = Some(number("--fail-at", n)?),
            ("--pause-at", Some(n)) => h.pause_at = Some(number("--pause-at", n)?),
            _ => {
                return Err(StartRefused::TestArgument(a));
            }
        }
    }
    let any =
        h.root.is_some() || h.journal.is_some() || h.fail_at.is_some() || h.pause_at.is_some();
    if any && asked.lent_privilege() {
        return Err(StartRefused::HooksUnderLentRoot);
    }
    // A failure on purpose (to show the rollback) only ever on a test tree.
    if (h.fail_at.is_some() || h.pause_at.is_some()) && h.root.is_none() {
        return Err(StartRefused::InjectedOnLiveHost);
    }
    Ok(h)
}

fn main() -> ExitCode {
    let asked = match clean_environment() {
        Ok(a) => a,
        Err(why) => return refuse(&why.to_string()),
    };
    let hooks = match test_hooks(&asked) {
        Ok(h) => h,
        Err(why) => return refuse(&why.to_string()),
    };
    let req = match read_request(&mut std::io::stdin().lock()) {
        Ok(r) => r,
        Err(e) => return refuse(&e.to_string()),
    };
    let env = HelperEnv {
        root: hooks.root.map_or_else(HostRoot::live, HostRoot::at),
        journal: hooks.journal,
        fail_at: hooks.fail_at,
        pause_at: hooks.pause_at,
        asking_uid: asked.asking_uid(),
        through_sudo: asked.through_sudo(),
    };
    vfio_assistant_core::tuning::apply::keep_on_hangup();
    let code = serve(&env, &req, &mut |reply| say(&reply.to_line()));
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}
