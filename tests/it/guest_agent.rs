//! The guest agent client (`guest`): its parsers on replies recorded from
//! real Windows 10/11 and Linux guests (tests/fixtures/guest, each with its
//! SOURCE), and the client against a real `qemu-ga` (Debian's
//! qemu-guest-agent, the same program and protocol a guest runs) listening
//! on a socket here: the OS, a program run with its output, a program that
//! never ends and an agent that never answers (both bounded), a command the
//! agent has turned off. And through libvirt: a running VM whose agent is
//! not there says so.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use vfio_assistant::guest::agent::{DomainAgent, os_info, parse_reply};
use vfio_assistant::guest::exec::exec_status;
use vfio_assistant::guest::{Agent, AgentError, AgentLink};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/guest/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn osinfo_of(name: &str) -> vfio_assistant::guest::OsInfo {
    let text = fixture(name);
    // Some recordings are the bare return value, some the whole reply.
    let v = match parse_reply("guest-get-osinfo", &text) {
        Ok(v) => v,
        Err(_) => serde_json::from_str(&text).unwrap(),
    };
    os_info(&v).unwrap()
}

#[test]
fn windows_says_which_windows_it_is() {
    // Windows 11 24H2 says "Windows 10 Pro" in its registry name: the build
    // (26100) tells.
    let w11 = osinfo_of("osinfo-win11-winapps.json");
    assert!(w11.is_windows());
    assert_eq!(w11.windows_generation(), Some(11));
    assert_eq!(w11.summary(), "Windows 11 Pro (build 26100)");
    let w10 = osinfo_of("osinfo-win10-enterprise-vdsm-comment.json");
    assert_eq!(w10.windows_generation(), Some(10));
    assert_eq!(w10.summary(), "Windows 10 Enterprise (build 10240)");
    // Windows Server has its own names; Linux its own.
    let server = osinfo_of("osinfo-winserver2022-truenas-compact.json");
    assert_eq!(server.windows_generation(), None);
    assert_eq!(
        server.summary(),
        "Windows Server 2022 Standard (build 20348)"
    );
    let rhel = osinfo_of("osinfo-linux-rhel82-tp-qemu-pr2159.json");
    assert!(!rhel.is_windows());
    assert_eq!(rhel.summary(), "Red Hat Enterprise Linux 8.2 Beta (Ootpa)");
}

#[test]
fn exec_status_as_a_real_agent_recorded_it() {
    let v = parse_reply(
        "guest-exec-status",
        &fixture("exec-linux-centos7-exec-status-reply.json"),
    )
    .unwrap();
    let out = exec_status(&v).unwrap().unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout, "anaconda-ks.cfg\n");
    assert!(!out.truncated);
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for bad in ["", "{", "[]", "{\"neither\": 1}", "null", "\u{0}"] {
        let e = parse_reply("guest-get-osinfo", bad).unwrap_err();
        assert!(matches!(e, AgentError::Garbage { .. }), "{bad:?}: {e:?}");
    }
    let e =
        exec_status(&serde_json::json!({"exited": true, "out-data": "not base64!"})).unwrap_err();
    assert!(e.to_string().contains("not base64"), "{e}");
    assert!(exec_status(&serde_json::json!({"pid": 1})).is_err());
    assert_eq!(
        exec_status(&serde_json::json!({"exited": false})).unwrap(),
        None
    );
    // Both wordings of a turned-off command (qemu before and after 6.0).
    for desc in [
        "Command guest-exec has been disabled",
        "The command guest-exec has been disabled for this instance",
    ] {
        let reply =
            format!("{{\"error\": {{\"class\": \"CommandNotFound\", \"desc\": \"{desc}\"}}}}");
        let e = parse_reply("guest-exec", &reply).unwrap_err();
        assert_eq!(
            e,
            AgentError::Disabled {
                command: "guest-exec".into()
            }
        );
    }
}

/// A socket where an agent listens: one command, one reply line, each read
/// bounded by the call's timeout.
struct SocketLink(Mutex<BufReader<UnixStream>>);

impl SocketLink {
    fn connect(path: &Path) -> SocketLink {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match UnixStream::connect(path) {
                Ok(s) => return SocketLink(Mutex::new(BufReader::new(s))),
                Err(e) if Instant::now() > deadline => {
                    panic!("no agent on {}: {e}", path.display())
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl AgentLink for SocketLink {
    fn send(&self, command: &str, timeout_s: u32) -> Result<String, AgentError> {
        let mut s = self.0.lock().unwrap();
        let no_answer = || AgentError::NoAnswer {
            command: command.to_string(),
            seconds: timeout_s,
        };
        s.get_ref()
            .set_read_timeout(Some(Duration::from_secs(u64::from(timeout_s.max(1)))))
            .unwrap();
        s.get_mut()
            .write_all(format!("{command}\n").as_bytes())
            .map_err(|_| no_answer())?;
        let mut line = String::new();
        match s.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(line),
            _ => Err(no_answer()),
        }
    }
}

/// A real qemu-ga on a socket of its own, stopped when dropped.
struct Qga {
    child: Child,
    dir: PathBuf,
}

impl Qga {
    fn start(blocked: &[&str]) -> Option<Qga> {
        let bin = ["/usr/sbin/qemu-ga", "/usr/bin/qemu-ga"]
            .into_iter()
            .find(|p| Path::new(p).exists());
        let Some(bin) = bin else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI installs qemu-guest-agent (scripts/setup.sh test)"
            );
            eprintln!("skipped: no qemu-ga here (Debian's qemu-guest-agent)");
            return None;
        };
        let dir = std::env::temp_dir().join(format!(
            "vfio-assistant-qga-{}-{}",
            std::process::id(),
            blocked.join("+")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(["-m", "unix-listen", "-p"])
            .arg(dir.join("qga.sock"))
            .arg("-t")
            .arg(&dir);
        if !blocked.is_empty() {
            cmd.args(["-b", &blocked.join(",")]);
        }
        let child = cmd.spawn().unwrap();
        Some(Qga { child, dir })
    }
    fn link(&self) -> SocketLink {
        SocketLink::connect(&self.dir.join("qga.sock"))
    }
}

impl Drop for Qga {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_real_agent_says_its_os_and_runs_a_program() {
    let Some(qga) = Qga::start(&[]) else { return };
    let link = qga.link();
    let agent = Agent::new(&link, 10);
    let os = agent.osinfo().unwrap();
    let release = std::fs::read_to_string("/etc/os-release").unwrap();
    let id = release
        .lines()
        .find_map(|l| l.strip_prefix("ID="))
        .unwrap()
        .trim_matches('"');
    assert_eq!(os.id.as_deref(), Some(id), "{os:?}");
    assert!(!os.is_windows());
    let out = agent
        .exec(
            "/bin/sh",
            &["-c", "echo to-out; echo to-err >&2; exit 3"],
            Duration::from_secs(20),
        )
        .unwrap();
    assert_eq!(out.exit_code, Some(3), "{out:?}");
    assert_eq!(out.stdout, "to-out\n");
    assert_eq!(out.stderr, "to-err\n");
    // A Linux agent has no guest-get-devices (Windows only): it says it is off.
    let e = agent.devices().unwrap_err();
    assert!(matches!(e, AgentError::Disabled { .. }), "{e:?}");
}

#[test]
fn a_program_that_never_ends_is_waited_for_a_bounded_time() {
    let Some(qga) = Qga::start(&[]) else { return };
    let link = qga.link();
    let agent = Agent::new(&link, 10);
    let t0 = Instant::now();
    let e = agent
        .exec("/bin/sleep", &["30"], Duration::from_secs(1))
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(matches!(e, AgentError::NoAnswer { .. }), "{e:?}");
    assert!(e.to_string().contains("still running"), "{e}");
    let _ = Command::new("pkill")
        .args(["-f", "^/bin/sleep 30$"])
        .status();
}

#[test]
fn a_command_the_agent_turned_off_says_so() {
    let Some(qga) = Qga::start(&["guest-exec", "guest-exec-status"]) else {
        return;
    };
    let link = qga.link();
    let agent = Agent::new(&link, 10);
    let e = agent
        .exec("/bin/true", &[], Duration::from_secs(5))
        .unwrap_err();
    assert_eq!(
        e,
        AgentError::Disabled {
            command: "guest-exec".into()
        }
    );
    assert!(e.to_string().contains("turned off"), "{e}");
    // What is not turned off still answers.
    assert!(agent.osinfo().is_ok());
}

#[test]
fn an_agent_that_never_answers_is_waited_for_a_bounded_time() {
    let dir = std::env::temp_dir().join(format!("vfio-assistant-mute-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("mute.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    let held = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(5));
        drop(s);
    });
    let link = SocketLink::connect(&sock);
    let agent = Agent::new(&link, 1);
    let t0 = Instant::now();
    let e = agent.osinfo().unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert!(
        matches!(e, AgentError::NoAnswer { seconds: 1, .. }),
        "{e:?}"
    );
    held.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_running_vm_without_its_agent_says_so_through_libvirt() {
    use crate::support::vm::{Cleanup, bootable_domain, kvm_guest_possible, system, test_name};
    use vfio_assistant::libvirt::Hypervisor;
    if !kvm_guest_possible(1) {
        return;
    }
    let Some(hv) = system() else { return };
    let name = test_name("agent");
    let _c = Cleanup(&hv, name.clone());
    let xml = bootable_domain(&hv, &name, 1, &[]);
    assert!(
        xml.contains("org.qemu.guest_agent.0"),
        "every VM we write has the agent's port"
    );
    hv.define(&xml).unwrap();
    hv.start(&name).unwrap();
    let link = DomainAgent {
        hypervisor: &hv,
        domain: &name,
    };
    let agent = Agent::new(&link, 2);
    let t0 = Instant::now();
    let e = agent.osinfo().unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(matches!(e, AgentError::Absent(_)), "{e:?}");
    assert!(e.to_string().contains("guest tools"), "{e}");
    // And a VM that is not running.
    hv.destroy(&name).unwrap();
    let e = agent.osinfo().unwrap_err();
    assert!(matches!(e, AgentError::NotRunning(_)), "{e:?}");
}
