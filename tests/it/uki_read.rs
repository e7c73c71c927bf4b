//! A unified kernel image read as the firmware sees it (issue 33): the
//! command line a UKI boots with is the bytes of its `.cmdline` section, so
//! that is what a change to it is checked against. Real images: systemd's
//! EFI stub with sections added by objcopy, one signed by sbsign
//! (tests/fixtures/uki/SOURCE.md).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::path::Path;
use vfio_assistant::host::uki::{UkiError, read_uki};
use vfio_assistant::sysroot::{HostPath, HostRoot};

fn root_with(name: &str, bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("efi/EFI/Linux");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join(name), bytes).unwrap();
    dir
}

/// A UKI fixture's bytes (tests/fixtures/uki).
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/uki")
            .join(name),
    )
    .unwrap()
}

fn read(dir: &Path, name: &str) -> Result<vfio_assistant::host::uki::Uki, UkiError> {
    read_uki(
        &HostRoot::at(dir),
        &HostPath::from_absolute(&format!("/efi/EFI/Linux/{name}")).unwrap(),
    )
}

#[test]
fn the_command_line_and_kernel_inside_a_uki_are_read_from_its_sections() {
    let dir = root_with("debian-6.12.57+deb13-amd64.efi", &fixture("uki.efi"));
    let u = read(dir.path(), "debian-6.12.57+deb13-amd64.efi").unwrap();
    assert_eq!(
        u.cmdline.as_deref(),
        Some(
            "root=UUID=6d1f2c52-8a4e-4c55-9b0e-e2e0f5a0b001 ro quiet intel_iommu=on iommu=pt vfio_pci.ids=10de:2684,10de:22ba"
        )
    );
    assert_eq!(u.uname.as_deref(), Some("6.12.57+deb13-amd64"));
    assert!(!u.signed, "objcopy's image carries no signature");
}

#[test]
fn a_signed_uki_is_known_as_signed_and_reads_the_same() {
    let dir = root_with("signed.efi", &fixture("uki-signed.efi"));
    let u = read(dir.path(), "signed.efi").unwrap();
    assert!(u.signed);
    assert!(
        u.cmdline
            .unwrap()
            .ends_with("vfio_pci.ids=10de:2684,10de:22ba")
    );
}

#[test]
fn a_uki_cut_short_or_not_a_pe_image_is_a_clear_error() {
    let whole = fixture("uki.efi");
    // Cut inside the sections after the headers: the .cmdline would lie
    // past the end.
    let cut = &whole[..0x11600 + 8];
    let dir = root_with("cut.efi", cut);
    let e = read(dir.path(), "cut.efi").unwrap_err();
    assert!(
        matches!(e, UkiError::Section { ref section, .. } if section == ".cmdline"),
        "{e}"
    );
    let dir = root_with("text.efi", b"#!/bin/sh\necho not an image\n");
    let e = read(dir.path(), "text.efi").unwrap_err();
    assert!(e.to_string().contains("not a PE image"), "{e}");
    let dir = root_with("empty.efi", b"");
    assert!(read(dir.path(), "empty.efi").is_err());
    let dir = tempfile::tempdir().unwrap();
    let e = read(dir.path(), "missing.efi").unwrap_err();
    assert!(e.to_string().contains("not present"), "{e}");
}

/// A Debian 13 host whose kernel-install makes UKIs (`layout=uki`) on the
/// ESP at /boot/efi, booted by systemd-boot: the loader is told, and the
/// steps say what each UKI boots with now and what it lacks.
fn uki_host(image: &str) -> tempfile::TempDir {
    let dir = root_with("x", b"");
    let r = dir.path();
    std::fs::remove_dir_all(r.join("efi")).unwrap();
    let esp = r.join("boot/efi/EFI/Linux");
    std::fs::create_dir_all(&esp).unwrap();
    std::fs::write(esp.join("0123abcd-6.12.57+deb13-amd64.efi"), fixture(image)).unwrap();
    std::fs::create_dir_all(r.join("etc/kernel")).unwrap();
    std::fs::write(r.join("etc/kernel/install.conf"), "layout=uki\n").unwrap();
    let vars = r.join("sys/firmware/efi/efivars");
    std::fs::create_dir_all(&vars).unwrap();
    let mut li = vec![6u8, 0, 0, 0];
    for u in "systemd-boot 257.9-1~deb13u1\0".encode_utf16() {
        li.extend_from_slice(&u.to_le_bytes());
    }
    std::fs::write(
        vars.join("LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"),
        li,
    )
    .unwrap();
    dir
}

#[test]
fn the_uki_steps_say_what_each_image_boots_with_and_what_it_lacks() {
    use vfio_assistant::tuning::boot::{Loader, cmdline_change, detect_loader};
    let dir = uki_host("uki.efi");
    let f = vfio_assistant::tuning::facts::gather(&HostRoot::at(dir.path()));
    assert_eq!(detect_loader(&f).0, Loader::Uki);
    let want = vec!["iommu=pt".to_string(), "isolcpus=2-5".to_string()];
    let m = cmdline_change(&f, Loader::Uki, &want).unwrap_err();
    let now = m
        .steps
        .iter()
        .find(|s| s.starts_with("Now "))
        .expect("a step per UKI");
    assert!(
        now.contains(
            "/boot/efi/EFI/Linux/0123abcd-6.12.57+deb13-amd64.efi (kernel 6.12.57+deb13-amd64)"
        ) && now.contains("vfio_pci.ids=10de:2684,10de:22ba")
            && now.contains("lacking isolcpus=2-5")
            && !now.contains("lacking iommu=pt")
            && now.ends_with("unsigned"),
        "{now}"
    );
    assert!(
        !m.steps.iter().any(|s| s.contains("signed again")),
        "{:?}",
        m.steps
    );

    let dir = uki_host("uki-signed.efi");
    let f = vfio_assistant::tuning::facts::gather(&HostRoot::at(dir.path()));
    let m = cmdline_change(&f, Loader::Uki, &want).unwrap_err();
    assert!(
        m.steps.iter().any(|s| s.contains("; signed")),
        "{:?}",
        m.steps
    );
    assert!(
        m.steps.iter().any(|s| s.contains("must be signed again")),
        "a signed UKI is said to need its key again: {:?}",
        m.steps
    );
}
