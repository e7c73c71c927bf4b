//! What `--shared-stop` may name (issue 41): only a unit the plan saw
//! holding the card — found by the card's device numbers in every
//! process's open files and mappings — or one of the few that hold GPUs by
//! design (nvidia-persistenced, nvidia-powerd, nvidia-dcgm, ollama). A unit
//! the host needs is refused with a sentence even by a valid name, and so is
//! any other; a fake holder (a file with the card's name, from a user
//! namespace) makes no unit "seen". Planned through the CLI on the real
//! booted host's capture (bochs at 01:00.0 the card, its `card0` node).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::devnodes::{can_mknod, char_node, open_fd, process};
use crate::support::hosts::put;
use crate::support::tree::copy_tree;
use std::path::Path;
use std::process::Command;

const HOST: &str = "tests/fixtures/hosts/e2e-debian12-grub";

/// The capture, the card's node made (226:0), `e2e-holder.service` (pid
/// 4242) holding it, and a user's fake holder in `fake.service`.
fn host() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join(HOST), r);
    put(
        r,
        "sys/bus/pci/devices/0000:01:00.0/drm/card0/dev",
        "226:0\n",
    );
    // A tree is read as a jail: its links lead inside it, as the kernel's
    // fd links lead to the file itself.
    char_node(r, "dev/dri/card0", 226, 0);
    let p = process(r, 4242, "e2e-holder", "/system.slice/e2e-holder.service");
    open_fd(&p, 3, "/dev/dri/card0");
    let fake = process(r, 4343, "sleep", "/system.slice/fake.service");
    std::fs::create_dir_all(r.join("tmp/ns/dev/dri")).unwrap();
    std::fs::write(r.join("tmp/ns/dev/dri/card0"), "").unwrap();
    open_fd(&fake, 3, "/tmp/ns/dev/dri/card0");
    dir
}

fn plan(root: &Path, stop: &str) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["tune", "plan", "--json", "--root"])
        .arg(root)
        .args([
            "--gpu",
            "01:00.0",
            "--shared-gpu",
            "win11",
            "--shared-stop",
            stop,
        ])
        .output()
        .unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn only_units_seen_holding_the_card_or_known_to_may_be_stopped() {
    if !can_mknod() {
        return;
    }
    let dir = host();
    let r = dir.path();
    for ok in [
        "e2e-holder.service",
        "ollama.service",
        "nvidia-persistenced.service",
    ] {
        let (success, out) = plan(r, ok);
        assert!(success, "{ok}: {out}");
        assert!(out.contains(&format!(" {ok}")), "{ok} in the hook: {out}");
    }
    // Units the host needs, whatever holds what: refused with the sentence
    // that says which ones may never be stopped.
    for bad in [
        "firewalld.service",
        "nftables.service",
        "auditd.service",
        "apparmor.service",
        "networking.service",
        "wpa_supplicant.service",
        "greetd.service",
        "user-runtime-dir@1000.service",
        "serial-getty@ttyS0.service",
        "-x.service",
        "--no-block",
    ] {
        let (success, out) = plan(r, bad);
        assert!(!success, "{bad} was accepted: {out}");
        assert!(
            out.contains("is not a unit it may stop") || out.contains("unexpected argument"),
            "{bad}: {out}"
        );
    }
    // A valid name that holds nothing here — and the fake holder's unit,
    // whose "card" is a file with the card's name — are refused, naming
    // what was seen.
    for unseen in ["docker.service", "fake.service"] {
        let (success, out) = plan(r, unseen);
        assert!(!success, "{unseen} was accepted: {out}");
        assert!(
            out.contains(&format!("{unseen} does not hold 0000:01:00.0"))
                && out.contains("now: e2e-holder.service"),
            "{unseen}: {out}"
        );
    }
}
