//! Whether a card came back (issue 34), on the real booted host's capture:
//! the second card answering, then as a failed reset leaves it — config
//! space all ones, the kernel's "not ready … giving up" — each said with
//! the fix its family has (vendor-reset for the AMD cards it covers, a plain
//! sentence for those nothing fixes).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use super::support::tree::copy_tree;
use std::path::Path;
use std::process::Command;

const HOST: &str = "tests/fixtures/hosts/e2e-debian12-grub";
const GPU: &str = "0000:01:00.0";

fn host() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(HOST),
        dir.path(),
    );
    dir
}

/// `check --device 01:00.0 --json`: the came-back finding.
fn came_back(root: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["check", "--device", "01:00.0", "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "device.came_back")
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

fn config(root: &Path) -> std::path::PathBuf {
    root.join(format!("sys/bus/pci/devices/{GPU}/config"))
}

#[test]
fn a_card_that_answers_passes_with_device() {
    let dir = host();
    let f = came_back(dir.path());
    assert_eq!(f["status"], "pass", "{f}");
    assert!(f["title"].as_str().unwrap().contains("answers"), "{f}");
}

#[test]
fn config_space_all_ones_is_a_card_that_did_not_come_back() {
    let dir = host();
    std::fs::write(config(dir.path()), vec![0xffu8; 256]).unwrap();
    let f = came_back(dir.path());
    assert_eq!(f["status"], "fail", "{f}");
    assert!(
        f["title"].as_str().unwrap().contains("reads all ones"),
        "{f}"
    );
    // Not an AMD or NVIDIA card: the plain way.
    let fix = f["fix"].as_str().unwrap_or_default();
    assert!(
        fix.contains("disable_idle_d3") && fix.contains("reset_method"),
        "{f}"
    );
    // Without --device it is said too (every GPU is looked at).
    let o = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["check", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("{GPU} does not answer")), "{text}");
}

#[test]
fn the_kernels_giving_up_is_said_with_the_amd_familys_fix() {
    let dir = host();
    let r = dir.path();
    // As an RX 5700 (Navi 10) that timed out after its FLR.
    std::fs::write(
        r.join(format!("sys/bus/pci/devices/{GPU}/vendor")),
        "0x1002\n",
    )
    .unwrap();
    std::fs::write(
        r.join(format!("sys/bus/pci/devices/{GPU}/device")),
        "0x731f\n",
    )
    .unwrap();
    let mut kmsg = std::fs::read_to_string(r.join("dev/kmsg")).unwrap_or_default();
    kmsg.push_str(&format!(
        "4,9001,812345678,-;vfio-pci {GPU}: not ready 1023ms after FLR; waiting\n3,9002,877345678,-;vfio-pci {GPU}: not ready 65535ms after FLR; giving up\n"
    ));
    std::fs::write(r.join("dev/kmsg"), kmsg).unwrap();
    let f = came_back(r);
    assert_eq!(f["status"], "fail", "{f}");
    let ev = f["evidence"].to_string();
    assert!(ev.contains("giving up"), "{f}");
    let fix = f["fix"].as_str().unwrap_or_default();
    assert!(
        fix.contains("Navi 10") && fix.contains("vendor-reset"),
        "{f}"
    );
    // An RDNA2 card: nothing on the host fixes it, said plainly.
    std::fs::write(
        r.join(format!("sys/bus/pci/devices/{GPU}/device")),
        "0x73bf\n",
    )
    .unwrap();
    let f = came_back(r);
    assert!(
        f["fix"]
            .as_str()
            .unwrap_or_default()
            .contains("nothing on the host fixes"),
        "{f}"
    );
}
