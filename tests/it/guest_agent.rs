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
    // `check --domain` and the app's VM findings say it.
    let root = vfio_assistant::sysroot::HostRoot::live();
    let snap = vfio_assistant::host::scan(&root).unwrap();
    let f = vfio_assistant::report::findings::domain_findings(&root, &snap, &hv, &name);
    let said = f
        .iter()
        .find(|x| x.id == "guest.agent")
        .expect("a guest.agent finding");
    assert_eq!(
        said.status,
        vfio_assistant::finding::Status::Warn,
        "{said:#?}"
    );
    // And a VM that is not running.
    hv.destroy(&name).unwrap();
    let e = agent.osinfo().unwrap_err();
    assert!(matches!(e, AgentError::NotRunning(_)), "{e:?}");
}

/// Replies recorded from real Windows (tests/fixtures/guest), played back in
/// the order the in-guest checks ask: the composition under test, the
/// recordings real.
struct Recorded {
    replies: Mutex<Vec<String>>,
    asked: Mutex<Vec<String>>,
}

impl AgentLink for Recorded {
    fn send(&self, command: &str, _timeout_s: u32) -> Result<String, AgentError> {
        self.asked.lock().unwrap().push(command.to_string());
        let mut r = self.replies.lock().unwrap();
        assert!(!r.is_empty(), "asked more than recorded: {command}");
        Ok(r.remove(0))
    }
}

fn b64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn exec_replies(pid: u32, stdout: &str) -> [String; 2] {
    [
        format!("{{\"return\": {{\"pid\": {pid}}}}}"),
        format!(
            "{{\"return\": {{\"exited\": true, \"exitcode\": 0, \"out-data\": \"{}\"}}}}",
            b64(stdout.as_bytes())
        ),
    ]
}

#[test]
fn code_43_and_msi_mode_read_from_windows_own_words() {
    use vfio_assistant::finding::Status;
    use vfio_assistant::report::guest::{PassedFunction, guest_findings};
    let pnp = fixture("pnputil-enum-devices-display-code43-plus-healthy-rtx3090.txt");
    let reg = fixture("reg-query-msisupported-nvidia-vfio-win10.txt");
    let mut replies = vec![fixture("osinfo-win11-winapps.json")];
    replies.extend(exec_replies(11, &pnp));
    replies.extend(exec_replies(12, &reg));
    // Windows' settings: the power plan (a recording), the timer (our own
    // PowerShell line's output: MIN MAX CURRENT in 100 ns), the Looking
    // Glass service (sc.exe query's documented layout) and its log.
    replies.extend(exec_replies(
        13,
        &fixture("powercfg-getactivescheme-balanced-win11.txt"),
    ));
    replies.extend(exec_replies(14, "156250 5000 10000\r\n"));
    replies.extend(exec_replies(
        15,
        "\r\nSERVICE_NAME: Looking Glass (host)\r\n        TYPE               : 10  WIN32_OWN_PROCESS\r\n        STATE              : 1  STOPPED\r\n        WIN32_EXIT_CODE    : 0  (0x0)\r\n",
    ));
    replies.extend(exec_replies(
        16,
        "[I]      1.234 main.c:234 | app_main | Looking Glass Host (B7)\r\n[E]      2.345 ivshmem.c:120 | ivshmemInit | Unable to find the IVSHMEM device\r\n",
    ));
    let link = Recorded {
        replies: Mutex::new(replies),
        asked: Mutex::new(Vec::new()),
    };
    let passed = [
        PassedFunction {
            address: "0000:01:00.0".into(),
            vendor_id: 0x10de,
            device_id: 0x2204,
            name: "GA102 [GeForce RTX 3090]".into(),
        },
        PassedFunction {
            address: "0000:01:00.1".into(),
            vendor_id: 0x10de,
            device_id: 0x1aef,
            name: "GA102 High Definition Audio Controller".into(),
        },
    ];
    let f = guest_findings(&link, &passed, true);
    let said: Vec<(&str, Status, &str)> = f
        .iter()
        .map(|x| (x.id.as_str(), x.status, x.title.as_str()))
        .collect();
    assert_eq!(
        said,
        vec![
            (
                "guest.os",
                Status::Pass,
                "The guest agent answers: Windows 11 Pro (build 26100)"
            ),
            (
                "guest.function",
                Status::Pass,
                "NVIDIA GeForce RTX 3090 runs in Windows"
            ),
            (
                "guest.msi",
                Status::Pass,
                "NVIDIA GeForce RTX 3090 uses MSI in Windows"
            ),
            (
                "guest.function",
                Status::Fail,
                "Windows does not list GA102 High Definition Audio Controller"
            ),
            (
                "guest.power",
                Status::Warn,
                "Windows runs the Balanced power plan"
            ),
            (
                "guest.timer",
                Status::Pass,
                "Windows' timer runs at 1.000 ms (finest 0.500 ms)"
            ),
            (
                "guest.looking_glass",
                Status::Fail,
                "The Looking Glass host service is stopped"
            ),
        ]
    );
    let lg = f.iter().find(|x| x.id == "guest.looking_glass").unwrap();
    assert!(
        lg.evidence[1]
            .value
            .contains("Unable to find the IVSHMEM device"),
        "{lg:#?}"
    );
    let asked = link.asked.lock().unwrap();
    assert!(
        asked[3].contains("MessageSignaledInterruptProperties")
            && asked[3].contains("VEN_10DE&DEV_2204"),
        "{}",
        asked[3]
    );
}

#[test]
fn pnputil_reads_code_43() {
    use vfio_assistant::guest::windows::{msi_supported, pnputil_devices};
    let d = pnputil_devices(&fixture(
        "pnputil-enum-devices-display-code43-plus-healthy-rtx3090.txt",
    ));
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!(d[0].problem, Some((43, "CM_PROB_FAILED_POST_START".into())));
    assert_eq!(d[0].pci_ids(), None, "a root-enumerated virtual display");
    assert_eq!(d[1].pci_ids(), Some((0x10de, 0x2204)));
    assert_eq!(
        (d[1].status.as_str(), d[1].problem.as_ref()),
        ("Started", None)
    );
    assert_eq!(
        msi_supported(&fixture("reg-query-msisupported-nvidia-vfio-win10.txt")),
        Some(true)
    );
    assert_eq!(
        msi_supported("    MSISupported    REG_DWORD    0x0\n"),
        Some(false)
    );
    assert_eq!(
        msi_supported(
            "ERROR: The system was unable to find the specified registry key or value.\n"
        ),
        None
    );
    assert!(pnputil_devices("garbage\n\u{0}\n:::\n").is_empty());
}

#[test]
fn a_code_43_gpu_fails_with_its_why() {
    use vfio_assistant::finding::Status;
    use vfio_assistant::report::guest::{PassedFunction, guest_findings};
    // The recorded listing's Code 43 device, given PCI IDs as a passed GPU
    // would have (the recording's device is a virtual display: its lines
    // are Windows' own, only the instance ID is a PCI one here).
    let pnp = fixture("pnputil-enum-devices-display-code43-plus-healthy-rtx3090.txt").replace(
        "ROOT\\DISPLAY\\0000",
        "PCI\\VEN_1002&DEV_744C&SUBSYS_0E3B1002&REV_C8\\6&1a2b3c4d&0&00000019",
    );
    let mut replies = vec![fixture("osinfo-win10-enterprise-vdsm-comment.json").replace('\n', " ")];
    replies[0] = format!("{{\"return\": {}}}", replies[0]);
    replies.extend(exec_replies(7, &pnp));
    replies.extend(exec_replies(
        8,
        "ERROR: The system was unable to find the specified registry key or value.\r\n",
    ));
    replies.extend(exec_replies(
        9,
        &fixture("powercfg-getactivescheme-highperf-win11.txt"),
    ));
    replies.extend(exec_replies(10, "156250 5000 156250\r\n"));
    let link = Recorded {
        replies: Mutex::new(replies),
        asked: Mutex::new(Vec::new()),
    };
    let passed = [PassedFunction {
        address: "0000:03:00.0".into(),
        vendor_id: 0x1002,
        device_id: 0x744c,
        name: "Navi 31 [Radeon RX 7900 XT/7900 XTX]".into(),
    }];
    let f = guest_findings(&link, &passed, false);
    let power = f.iter().find(|x| x.id == "guest.power").unwrap();
    assert_eq!(power.status, Status::Pass, "{power:#?}");
    assert!(
        !f.iter().any(|x| x.id == "guest.looking_glass"),
        "no Looking Glass in this VM"
    );
    let gpu = f.iter().find(|x| x.id == "guest.function").unwrap();
    assert_eq!(gpu.status, Status::Fail, "{gpu:#?}");
    assert!(
        gpu.title.contains("Code 43") && gpu.why.contains("reset"),
        "{gpu:#?}"
    );
    assert!(
        gpu.evidence[0]
            .value
            .contains("problem 43 [CM_PROB_FAILED_POST_START]"),
        "{gpu:#?}"
    );
    let msi = f.iter().find(|x| x.id == "guest.msi").unwrap();
    assert_eq!(
        (msi.status, msi.evidence[0].value.as_str()),
        (Status::Info, "not set")
    );
}
