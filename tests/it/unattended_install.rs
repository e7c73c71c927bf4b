//! "Install Windows for me", as far as it can go without Windows (no
//! Windows ISO can be fetched here): `domain new --unattended` reads a
//! Windows-like installer (UDF, a real install.wim with Windows' metadata,
//! an El Torito EFI image as Microsoft's discs have) and a virtio-win-like
//! disc, builds the answer media, and writes a domain with three CDs. On
//! qemu:///system the domain is defined and started, the start presses
//! Enter through "Press any key", QEMU has all three media in, and OVMF
//! with Secure Boot reads the installer's EFI image and checks its
//! signature (its serial log says so). `domain install-done` then takes
//! the CDs out and deletes the answer media.
//!
//! This machine's KVM is nested and cannot run OVMF from flash (the
//! preflight falls back to SeaBIOS here), so the firmware run uses the same
//! domain under QEMU's software emulation (`type='qemu'`), with the
//! template's UEFI + Secure Boot firmware and a serial log added.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::vm::{Cleanup, make_test_disk, system, test_name};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use vfio_assistant::domain::xml::{Document, Element};
use vfio_assistant::install::progress::answer_of;
use vfio_assistant::install::test_media::{bootable_windows_iso, virtio_iso};
use vfio_assistant::libvirt::Hypervisor;
use vfio_assistant::report::lifecycle::start;
use vfio_assistant::sysroot::HostRoot;

const PASSWORD: &str = "unattended-test-pw";

/// A folder QEMU's user can read: libvirt's images when we may write there.
fn media_dir(name: &str) -> PathBuf {
    let disk = crate::support::vm::test_disk_path(name);
    let dir = disk.parent().unwrap().join(format!("{name}-media"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn cli(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The domain as written, run by TCG with UEFI + Secure Boot and a serial log.
fn under_tcg(xml: &str, serial: &Path) -> String {
    let mut doc = Document::parse(xml).unwrap();
    doc.root.set_attr("type", "qemu");
    let os = Document::parse(
        "<os firmware='efi'><type arch='x86_64' machine='q35'>hvm</type><firmware><feature enabled='yes' name='secure-boot'/><feature enabled='yes' name='enrolled-keys'/></firmware></os>",
    )
    .unwrap()
    .root;
    let features = Document::parse("<features><acpi/><smm state='on'/></features>")
        .unwrap()
        .root;
    doc.root.remove_children_where(|e| {
        ["os", "features", "cpu", "clock", "cputune"].contains(&e.name.as_str())
    });
    doc.root.append_child(os);
    doc.root.append_child(features);
    let devices = doc.root.child_mut("devices").unwrap();
    let mut s = Element::new("serial");
    s.set_attr("type", "file");
    let mut src = Element::new("source");
    src.set_attr("path", &serial.display().to_string());
    s.append_child(src);
    devices.append_child(s);
    doc.serialize()
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> Option<String>) -> String {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "{what} within {secs} s");
        std::thread::sleep(Duration::from_secs(2));
    }
}

#[test]
fn the_unattended_install_is_defined_started_read_by_ovmf_and_finished() {
    let Some(hv) = system() else { return };
    let name = test_name("unattended");
    let _guard = Cleanup(&hv, name.clone());
    let dir = media_dir(&name);
    let loader = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/uki/uki.efi");
    let win = bootable_windows_iso(
        &dir,
        &[
            ("Windows 11 Home", "Core", 26100),
            ("Windows 11 Pro", "Professional", 26100),
        ],
        &loader,
    );
    let virtio = virtio_iso(&dir, &["w10", "w11"], true);
    let disk = make_test_disk(&name);
    let answer = dir.join("Win-answer.iso");
    let (code, xml, err) = cli(
        &[
            "domain",
            "new",
            "--name",
            &name,
            "--vcpus",
            "1",
            "--memory",
            "512M",
            "--disk",
            disk.to_str().unwrap(),
            "--iso",
            win.to_str().unwrap(),
            "--virtio-iso",
            virtio.to_str().unwrap(),
            "--unattended",
            "--user",
            "Ada",
            "--password-file",
            "-",
            "--answer-media",
            answer.to_str().unwrap(),
            "--network",
            "none",
            "--no-pin",
            "--connect",
            "qemu:///system",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("for Windows 11 Pro (build 26100)"), "{err}");
    assert!(
        !xml.contains(PASSWORD) && !err.contains(PASSWORD),
        "the password stays off the XML and the terminal"
    );
    assert_eq!(
        answer_of(&xml).as_deref(),
        answer.to_str(),
        "the install is marked in the metadata"
    );
    for iso in [&win, &virtio, &answer] {
        assert!(
            xml.contains(&format!("<source file='{}'/>", iso.display())),
            "{} is a CD",
            iso.display()
        );
    }
    // Only the answer media holds the password, and only its owner reads it.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&answer).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let serial = dir.join("serial.log");
    hv.define(&under_tcg(&xml, &serial)).unwrap();
    let o = start(&hv, &HostRoot::live(), &name);
    assert!(o.started, "{:?} {:?}", o.message, o.causes);
    let pressed = o
        .install_keys
        .clone()
        .expect("the install's start presses keys");
    assert!(matches!(pressed, Ok(n) if n > 0), "{pressed:?}");
    // QEMU has the three media in.
    let blocks = hv.qmp(&name, r#"{"execute":"query-block"}"#).unwrap();
    for iso in [&win, &virtio, &answer] {
        assert!(
            blocks.contains(iso.to_str().unwrap()),
            "{} inserted: {blocks}",
            iso.display()
        );
    }
    // OVMF reads the installer's El Torito EFI image and Secure Boot checks
    // it (our stand-in loader is not signed by Microsoft, so it is denied).
    let log = wait_for("OVMF trying the installer CD", 300, || {
        let text =
            String::from_utf8_lossy(&std::fs::read(&serial).unwrap_or_default()).into_owned();
        text.contains("DVD-ROM")
            .then_some(text)
            .filter(|t| t.contains("Access Denied"))
    });
    let line = log
        .lines()
        .find(|l| l.contains("DVD-ROM") && l.contains("Access Denied"))
        .unwrap();
    eprintln!("OVMF's serial log: {}", line.trim());

    let (code, out, err) = cli(
        &[
            "domain",
            "install-done",
            &name,
            "--connect",
            "qemu:///system",
            "--json",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["cds_removed"], 3, "{out}");
    assert_eq!(v["answer_deleted"].as_str(), answer.to_str(), "{out}");
    assert!(!answer.exists(), "the answer media is gone");
    let after = hv.domain_xml(&name).unwrap();
    assert!(
        !after.contains("device='cdrom'") && !after.contains("device=\"cdrom\""),
        "{after}"
    );
    assert!(answer_of(&after).is_none(), "{after}");
    let (code, out, _) = cli(
        &[
            "domain",
            "install-done",
            &name,
            "--connect",
            "qemu:///system",
        ],
        "",
    );
    assert_eq!(code, 1, "a second time there is nothing to finish: {out}");
    let _ = hv.destroy(&name);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full disk where the answer media goes (a 128 KiB tmpfs in a private
/// mount namespace, through `unshare`): `domain new --unattended` says
/// xorriso's own reason and leaves nothing there, no staging folder, no
/// half-written media holding the password.
#[test]
fn a_full_disk_is_said_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let win = vfio_assistant::install::test_media::windows_iso(
        dir.path(),
        &[("Windows 11 Pro", "Professional", 26100)],
    );
    let virtio = virtio_iso(dir.path(), &["w11"], true);
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let bin = env!("CARGO_BIN_EXE_vfio-assistant");
    let script = format!(
        "mount -t tmpfs -o size=128k tmpfs '{s}' && echo pw | '{bin}' domain new --name full --vcpus 1 --memory 512M --disk /var/lib/libvirt/images/full.qcow2 --iso '{w}' --virtio-iso '{v}' --unattended --user Ada --password-file - --answer-media '{s}/a.iso' --no-pin --no-trial --connect test:///default; echo \"exit $?\"; ls -A '{s}'",
        s = small.display(),
        w = win.display(),
        v = virtio.display(),
    );
    let out = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "unshare (util-linux) runs: {stdout}{said}"
    );
    let mut lines = stdout.lines();
    let exit = lines.next().unwrap_or_default();
    assert!(exit == "exit 1" || exit == "exit 2", "{stdout}{said}");
    assert!(
        said.contains("exceeds free space"),
        "xorriso's reason: {said}"
    );
    assert_eq!(
        said.matches("xorriso could not write").count(),
        1,
        "said once: {said}"
    );
    let left: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
    assert!(left.is_empty(), "nothing left: {left:?}");
}
