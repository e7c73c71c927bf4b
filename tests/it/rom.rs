//! Graphics card ROMs on real option ROMs (SeaBIOS's VGA BIOS: legacy only;
//! iPXE's virtio ROM: legacy + UEFI x64; see tests/fixtures/roms/SOURCE.md):
//! `rom --file`, `--save` cutting a flash-tool header off, a card's ROM read
//! from a captured root, `check --read-rom`, and a domain's `<rom file=…/>`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vfio_assistant::checks::model::Status;
use vfio_assistant::checks::vm::{VmLive, vm_findings};
use vfio_assistant::domain::xml::Document;
use vfio_assistant::host::scan;
use vfio_assistant::libvirt::DomainState;
use vfio_assistant::sysroot::HostRoot;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/roms")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A dump as nvflash / the TechPowerUp database give them: a header first.
fn with_header(rom: &Path, dir: &Path) -> PathBuf {
    let mut bytes = b"NVGI".to_vec();
    bytes.resize(0x9a0, 0);
    bytes.extend(std::fs::read(rom).unwrap());
    let p = dir.join("gtx1080ti-techpowerup.rom");
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn rom_files_judged_and_cleaned() {
    let vga = fixture("vgabios-stdvga.bin");
    let o = run(&["rom", "--file", vga.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("no UEFI x64 (GOP) driver"),
        "{}",
        text(&o)
    );

    let gop = fixture("efi-virtio.rom");
    let o = run(&["rom", "--file", gop.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["id"], "device.rom");
    assert_eq!(v["status"], "pass");

    let dir = tempfile::tempdir().unwrap();
    let dump = with_header(&gop, dir.path());
    let clean = dir.path().join("clean.rom");
    let o = run(&[
        "rom",
        "--file",
        dump.to_str().unwrap(),
        "--save",
        clean.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("tail -c +2465"), "{}", text(&o));
    assert!(
        text(&o).contains("2464 header bytes cut off"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(&clean).unwrap(), std::fs::read(&gop).unwrap());
    let o = run(&["rom", "--file", clean.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the saved copy is clean: {}",
        text(&o)
    );

    // Nothing usable: said, and nothing written.
    let junk = dir.path().join("page.html");
    std::fs::write(&junk, "<html>404</html>").unwrap();
    let out = dir.path().join("never.rom");
    let o = run(&[
        "rom",
        "--file",
        junk.to_str().unwrap(),
        "--save",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not saved"), "{}", text(&o));
    assert!(!out.exists());
    let o = run(&["rom", "--file", "/nonexistent.rom"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["rom"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("name a card"));
}

#[test]
fn a_cards_rom_from_a_captured_host() {
    let host = crate::support::hosts::good_host();
    // The GTX 1080 Ti at 0b:00.0 with a ROM that is not its own (iPXE's).
    let rom = host.path().join("sys/bus/pci/devices/0000:0b:00.0/rom");
    std::fs::copy(fixture("efi-virtio.rom"), &rom).unwrap();
    let root = host.path().to_str().unwrap();
    let o = run(&["--root", root, "rom", "0b:00.0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("another vendor's card"), "{}", text(&o));
    // check --read-rom: one finding per GPU; the GT 710 has no ROM file here.
    let o = run(&["--root", root, "check", "--read-rom", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let roms: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "device.rom")
        .collect();
    assert_eq!(roms.len(), 2, "{roms:#?}");
    let by = |a: &str| roms.iter().find(|f| f["device"] == a).unwrap();
    assert_eq!(by("0000:0b:00.0")["status"], "warn");
    assert_eq!(by("0000:0c:00.0")["status"], "unknown");
    // Without --read-rom no ROM is touched.
    let o = run(&["--root", root, "check", "--json"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("device.rom"));
}

#[test]
fn a_domains_rom_file_is_read() {
    let host = crate::support::hosts::good_host();
    let vbios = host.path().join("var/lib/libvirt/vbios");
    std::fs::create_dir_all(&vbios).unwrap();
    with_header(&fixture("efi-virtio.rom"), &vbios);
    let xml = "<domain type='kvm'><name>win11</name><devices>\
        <hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='0x0000' bus='0x0b' slot='0x00' function='0x0'/></source>\
        <rom file='/var/lib/libvirt/vbios/gtx1080ti-techpowerup.rom'/></hostdev>\
        </devices></domain>";
    let root = HostRoot::at(host.path());
    let snap = scan(&root).unwrap();
    let live = VmLive {
        name: "win11".into(),
        uri: "qemu:///system".into(),
        state: Ok(DomainState::Shutoff),
        qmp_status: None,
        xml: Some(Document::parse(xml).unwrap()),
        live_xml: None,
        hyperv_offered: None,
        rates: None,
        rates_problem: None,
        interrupts: None,
    };
    let f = vm_findings(&snap, &root, &live);
    let rom = f.iter().find(|x| x.id == "device.rom").unwrap();
    assert_eq!(rom.status, Status::Fail, "{rom:#?}");
    assert_eq!(rom.device.as_deref(), Some("0000:0b:00.0"));
    assert!(rom.title.contains("2464 bytes in front"), "{}", rom.title);
}
