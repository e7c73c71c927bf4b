//! Every wait in both GPU hooks has a hard bound (issue 41). `timeout N`
//! alone sends TERM and then waits for as long as the step likes: a child
//! that ignores TERM (`trap "" TERM; sleep 30`) took 30 s. With
//! `timeout -k` it gets KILL $KILL seconds later, so the step ends after
//! $WAIT + $KILL seconds, and the start fails with the card (or the screen)
//! given back. What cannot be killed at all — a write the kernel holds — is
//! left behind a second later and the start fails the same; the shared
//! hook then leaves the card where it is (each write would hang the same
//! way). The times are measured and printed (`--nocapture`); the steps that
//! would not end run for 30 s, and the hooks must end long before that
//! (the margin is for a loaded CI runner: each hook forks hundreds of
//! times).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::shared_gpu_hook::{driver, host, log};
use crate::single_gpu_hook::{desktop, read};
use crate::support::devnodes::can_mknod;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// The bounds the tests run the hooks with: single 2 s + 2 s, shared 3 s +
/// 2 s (VFIO_ASSISTANT_WAIT, and KILL's default).
const SINGLE_WAIT: u64 = 2;
const SHARED_WAIT: u64 = 3;
const KILL: u64 = 2;

fn exe(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Ends the step a stand-in left behind (its pid in `stuck.pid`).
fn end_left_behind(r: &Path) {
    if let Ok(pid) = std::fs::read_to_string(r.join("stuck.pid")) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status();
    }
}

#[test]
fn single_gpu_a_stop_whose_child_ignores_term_is_killed_at_the_bound() {
    let (dir, script) = desktop();
    let r = dir.path();
    exe(
        &r.join("bin/systemctl"),
        &format!(
            "#!/bin/sh\necho \"systemctl $*\" >> '{}/systemctl.log'\ncase \"$1\" in show) echo gdm.service ;; stop) trap '' TERM; sh -c 'sleep 30' ;; esac\nexit 0\n",
            r.display()
        ),
    );
    let t = Instant::now();
    let o = crate::single_gpu_hook::run(r, &script, "prepare", "begin", "win11");
    let took = t.elapsed();
    eprintln!(
        "single GPU, a stop ignoring TERM (WAIT {SINGLE_WAIT} s, KILL {KILL} s): the start failed after {took:.2?}"
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        took >= Duration::from_secs(SINGLE_WAIT + KILL) && took < Duration::from_secs(20),
        "{took:?}"
    );
    let l = read(r, "var/log/vfio-assistant-single-gpu.log");
    assert!(l.contains("FAILED: run systemctl stop"), "{l}");
    assert!(read(r, "systemctl.log").contains("start -- gdm.service"));
    assert_eq!(read(r, "sys/class/vtconsole/vtcon1/bind").trim(), "1");
}

/// A step that cannot be killed (here a `timeout` that never returns; on a
/// host, a write the kernel holds): left behind, and the start fails.
#[test]
fn single_gpu_a_step_that_cannot_be_killed_is_left_behind() {
    let (dir, script) = desktop();
    let r = dir.path();
    exe(
        &r.join("bin/timeout"),
        &format!(
            "#!/bin/sh\ncase \"$*\" in *'stop -- display-manager'*) echo $$ > '{}/stuck.pid'; trap '' TERM INT HUP; sleep 30; exit 0 ;; esac\nexec /usr/bin/timeout \"$@\"\n",
            r.display()
        ),
    );
    let t = Instant::now();
    let o = crate::single_gpu_hook::run(r, &script, "prepare", "begin", "win11");
    let took = t.elapsed();
    end_left_behind(r);
    eprintln!(
        "single GPU, a step that cannot be killed: left behind, the start failed after {took:.2?}"
    );
    let l = read(r, "var/log/vfio-assistant-single-gpu.log");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(took < Duration::from_secs(20), "{took:?} {o:?}\n{l}");
    assert!(
        l.contains("LEFT BEHIND") && l.contains("screen back"),
        "{l}"
    );
    assert!(read(r, "systemctl.log").contains("start -- gdm.service"));
}

#[test]
fn shared_gpu_a_unit_whose_stop_ignores_term_is_killed_and_the_card_stays() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    std::fs::write(r.join(".stop-ignores-term"), "").unwrap();
    let t = Instant::now();
    let o = crate::shared_gpu_hook::run(r, &script, "prepare", "begin");
    let took = t.elapsed();
    eprintln!(
        "shared GPU, a stop ignoring TERM (WAIT {SHARED_WAIT} s, KILL {KILL} s): the start failed after {took:.2?}"
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        took >= Duration::from_secs(SHARED_WAIT + KILL) && took < Duration::from_secs(20),
        "{took:?}"
    );
    let l = log(r);
    assert!(
        l.contains("could not stop e2e-holder.service within 3s"),
        "{l}"
    );
    assert_eq!(driver(r, "0000:01:00.0").as_deref(), Some("bochs-drm"));
    assert_eq!(driver(r, "0000:01:00.1").as_deref(), Some("snd_hda_intel"));
}

/// An unbind the kernel never finishes: left behind after its bound; the
/// card is not written to again (left where it is), its units come back.
#[test]
fn shared_gpu_an_unbind_stuck_in_the_kernel_gives_up_on_the_vm_not_the_host() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    std::fs::write(r.join(".unbind-stuck"), "").unwrap();
    let t = Instant::now();
    let o = crate::shared_gpu_hook::run(r, &script, "prepare", "begin");
    let took = t.elapsed();
    end_left_behind(r);
    eprintln!(
        "shared GPU, an unbind stuck in the kernel: left behind, the start failed after {took:.2?}"
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    let l = log(r);
    assert!(
        l.contains("LEFT BEHIND") && l.contains("is left as it is") && !l.contains("healthy"),
        "{l}"
    );
    // The audio function went first: its override stays, nothing else was
    // written to the card after the stuck write.
    assert_eq!(
        read(r, "sys/bus/pci/devices/0000:01:00.1/driver_override").trim(),
        "vfio-pci"
    );
    assert!(read(r, "systemctl.log").contains("start -- e2e-holder.service"));
}
