//! The click on a host whose kernel-install builds unified kernel images
//! with ukify (Debian 13's `layout=uki`, issue 33): the parameters go into
//! /etc/kernel/cmdline, kernel-install builds the next boot's image again,
//! the old image is kept for undo, and the check reads the new image's
//! `.cmdline` section. A signed image is rebuilt only where ukify holds the
//! key; everywhere else the manual steps stay.

use crate::uki_read::fixture;
use std::path::Path;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::boot::{Loader, cmdline_change, detect_loader, next_boot};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::model::Verify;
use vfio_assistant::tuning::verify::entries_check;

pub(crate) const REL: &str = "6.12.57+deb13-amd64";
const OLDER: &str = "6.10.11+deb13-amd64";
pub(crate) const ESP: &str = "boot/efi/EFI/Linux";

/// The fixture with its `.uname` (same length) saying `release`.
fn with_uname(bytes: &[u8], release: &str) -> Vec<u8> {
    let at = bytes
        .windows(REL.len())
        .position(|w| w == REL.as_bytes())
        .expect("the fixture's .uname");
    assert_eq!(release.len(), REL.len());
    let mut out = bytes.to_vec();
    out[at..at + REL.len()].copy_from_slice(release.as_bytes());
    out
}

pub(crate) fn put(r: &Path, p: &str, bytes: &[u8]) {
    let p = r.join(p);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// Debian 13 booted by systemd-boot, kernel-install with `layout=uki` and
/// its 60-ukify plugin, the kernel in /boot, one UKI on the ESP.
pub(crate) fn debian13_uki(image: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, &format!("{ESP}/0123abcd-{REL}.efi"), &fixture(image));
    put(r, "etc/kernel/install.conf", b"layout=uki\n");
    put(
        r,
        "usr/lib/kernel/install.d/60-ukify.install",
        b"#!/usr/bin/python3\n",
    );
    put(
        r,
        "usr/lib/kernel/install.d/90-uki-copy.install",
        b"#!/bin/sh\n",
    );
    put(r, &format!("boot/vmlinuz-{REL}"), b"");
    for t in ["kernel-install", "bootctl"] {
        put(r, &format!("usr/bin/{t}"), b"#!/bin/sh\n");
        std::fs::set_permissions(
            r.join("usr/bin").join(t),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
    }
    put(
        r,
        "proc/cmdline",
        b"root=UUID=6d1f2c52-8a4e-4c55-9b0e-e2e0f5a0b001 ro quiet\n",
    );
    let mut li = vec![6u8, 0, 0, 0];
    for u in "systemd-boot 257.13-1~deb13u1\0".encode_utf16() {
        li.extend_from_slice(&u.to_le_bytes());
    }
    put(
        r,
        "sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f",
        &li,
    );
    dir
}

fn want() -> Vec<String> {
    vec!["iommu=pt".into(), "isolcpus=2-5".into()]
}

/// The default: the tuned image built as an entry of our own beside the
/// default one, booted once (`bootctl set-oneshot`); undo removes it.
#[test]
fn the_click_builds_an_image_of_our_own_and_boots_it_once() {
    let dir = debian13_uki("uki.efi");
    let r = dir.path();
    let f = gather(&HostRoot::at(r));
    let c = cmdline_change(&f, Loader::Uki, &want()).unwrap().unwrap();
    let ours = format!("/{ESP}/vfio-assistant-{REL}.efi");
    assert_eq!(c.files[0].path, "/etc/kernel/cmdline");
    assert_eq!(
        c.commands.iter().map(|s| s.argv()).collect::<Vec<_>>(),
        [
            vec![
                "kernel-install".to_string(),
                "--entry-token=literal:vfio-assistant".into(),
                "add".into(),
                REL.into(),
                format!("/boot/vmlinuz-{REL}")
            ],
            vec![
                "bootctl".to_string(),
                "set-oneshot".into(),
                format!("vfio-assistant-{REL}.efi")
            ]
        ]
    );
    assert!(
        c.undo_commands.is_empty(),
        "undo removes the image: {:?}",
        c.undo_commands
    );
    assert_eq!(
        c.artifacts
            .iter()
            .map(|a| a.path.as_str())
            .collect::<Vec<_>>(),
        [ours.as_str()]
    );
    assert_eq!(
        c.verify,
        [Verify::BootEntriesHave {
            files: vec![ours.clone()],
            tokens: vec!["isolcpus=2-5".into()],
        }]
    );
    vfio_assistant::tuning::targets::check_change(&c).expect("within the cmdline kind's allowlist");
    assert!(
        c.notes.iter().any(|n| n.contains("stays the default")),
        "{:?}",
        c.notes
    );
    // Once our image is there (after the apply), it is never taken for the
    // default one.
    put(
        r,
        &format!("{ESP}/vfio-assistant-{REL}.efi"),
        &with_uname(&fixture("uki.efi"), "6.99.99+deb13-amd64"),
    );
    let f = gather(&HostRoot::at(r));
    let n = next_boot(&f, Loader::Uki).unwrap();
    assert_eq!(
        n.entry.as_deref(),
        Some(format!("/{ESP}/0123abcd-{REL}.efi").as_str())
    );
}

/// Where kernel-install counts boots (/etc/kernel/tries) the image's name
/// changes as it is tried: the default image is built again in place, the
/// old one kept for undo.
#[test]
fn the_click_writes_kernel_cmdline_and_builds_the_next_boots_image_again() {
    let dir = debian13_uki("uki.efi");
    let r = dir.path();
    put(r, "etc/kernel/tries", b"3\n");
    let f = gather(&HostRoot::at(r));
    assert_eq!(detect_loader(&f).0, Loader::Uki);
    let uki = format!("/{ESP}/0123abcd-{REL}.efi");
    let c = cmdline_change(&f, Loader::Uki, &want())
        .expect("the click, not manual steps")
        .expect("a change");
    // /etc/kernel/cmdline did not exist: it starts from what the image
    // boots with now (not /proc/cmdline), with what it lacks added.
    assert_eq!(c.files.len(), 1);
    assert_eq!(c.files[0].path, "/etc/kernel/cmdline");
    assert_eq!(c.files[0].before, None);
    assert_eq!(
        c.files[0].after.as_deref(),
        Some(
            "root=UUID=6d1f2c52-8a4e-4c55-9b0e-e2e0f5a0b001 ro quiet intel_iommu=on iommu=pt vfio_pci.ids=10de:2684,10de:22ba isolcpus=2-5\n"
        )
    );
    assert_eq!(
        c.commands.iter().map(|s| s.argv()).collect::<Vec<_>>(),
        [vec![
            "kernel-install".to_string(),
            "add".into(),
            REL.into(),
            format!("/boot/vmlinuz-{REL}")
        ]]
    );
    assert_eq!(
        c.undo_commands.len(),
        1,
        "undo builds it from the restored file"
    );
    assert_eq!(
        c.artifacts
            .iter()
            .map(|a| a.path.as_str())
            .collect::<Vec<_>>(),
        [uki.as_str()],
        "the old image is kept for undo"
    );
    assert_eq!(
        c.verify,
        [Verify::BootEntriesHave {
            files: vec![uki.clone()],
            tokens: vec!["isolcpus=2-5".into()],
        }]
    );
    vfio_assistant::tuning::targets::check_change(&c).expect("within the cmdline kind's allowlist");
    assert!(
        c.notes.iter().any(|n| n.contains("only kernel image")),
        "{:?}",
        c.notes
    );
    // The check reads the image's .cmdline: this one lacks isolcpus, holds
    // iommu=pt.
    let root = HostRoot::at(r);
    let lacking = entries_check(&root, std::slice::from_ref(&uki), &want(), true);
    assert_eq!(lacking.len(), 1, "{lacking:?}");
    assert!(lacking[0].contains("lacks isolcpus=2-5"), "{lacking:?}");
    let holding = entries_check(&root, std::slice::from_ref(&uki), &want(), false);
    assert!(holding[0].contains("still holds iommu=pt"), "{holding:?}");
    // An image that cannot be read never passes the check.
    put(r, &format!("{ESP}/0123abcd-{REL}.efi"), b"MZ cut short");
    let bad = entries_check(&root, std::slice::from_ref(&uki), &want(), true);
    assert_eq!(bad.len(), 1, "{bad:?}");
}

#[test]
fn an_existing_kernel_cmdline_is_extended_and_nothing_is_done_twice() {
    let dir = debian13_uki("uki.efi");
    let r = dir.path();
    put(r, "etc/kernel/cmdline", b"root=UUID=x ro quiet iommu=pt\n");
    let f = gather(&HostRoot::at(r));
    let c = cmdline_change(&f, Loader::Uki, &want()).unwrap().unwrap();
    assert_eq!(
        c.files[0].after.as_deref(),
        Some("root=UUID=x ro quiet iommu=pt isolcpus=2-5\n")
    );
    // Everything there already, in the file and in the image: no change.
    put(
        r,
        "etc/kernel/cmdline",
        b"root=UUID=x ro quiet iommu=pt intel_iommu=on\n",
    );
    let f = gather(&HostRoot::at(r));
    let only_there = vec!["iommu=pt".to_string(), "intel_iommu=on".to_string()];
    assert_eq!(cmdline_change(&f, Loader::Uki, &only_there), Ok(None));
}

#[test]
fn the_next_boots_image_is_the_newest_kernels_or_the_one_loader_conf_names() {
    let dir = debian13_uki("uki.efi");
    let r = dir.path();
    put(
        r,
        &format!("{ESP}/0123abcd-{OLDER}.efi"),
        &with_uname(&fixture("uki.efi"), OLDER),
    );
    put(r, &format!("boot/vmlinuz-{OLDER}"), b"");
    let f = gather(&HostRoot::at(r));
    let n = next_boot(&f, Loader::Uki).unwrap();
    assert_eq!(n.release, REL, "{n:?}");
    assert!(n.source.contains("newest"), "{n:?}");
    let c = cmdline_change(&f, Loader::Uki, &want()).unwrap().unwrap();
    assert_eq!(c.commands[0].argv()[3], REL, "the newest kernel's image");
    // loader.conf's default (a glob) wins over the newest.
    put(
        r,
        "boot/efi/loader/loader.conf",
        b"timeout 3\ndefault *6.10.11*\n",
    );
    let f = gather(&HostRoot::at(r));
    let n = next_boot(&f, Loader::Uki).unwrap();
    assert_eq!(n.release, OLDER, "{n:?}");
    let c = cmdline_change(&f, Loader::Uki, &want()).unwrap().unwrap();
    assert_eq!(c.commands[0].argv()[3], OLDER);
}

#[test]
fn a_signed_image_is_rebuilt_only_where_ukify_holds_the_key() {
    let dir = debian13_uki("uki-signed.efi");
    let r = dir.path();
    let f = gather(&HostRoot::at(r));
    let m = cmdline_change(&f, Loader::Uki, &want()).unwrap_err();
    assert!(
        m.steps.iter().any(|s| s.contains("must be signed again")),
        "{:?}",
        m.steps
    );
    // An empty key setting is no key.
    put(r, "etc/kernel/uki.conf", b"[UKI]\nSecureBootPrivateKey=\n");
    let f = gather(&HostRoot::at(r));
    assert!(cmdline_change(&f, Loader::Uki, &want()).is_err());
    put(
        r,
        "etc/kernel/uki.conf",
        b"[UKI]\nSecureBootPrivateKey=/etc/kernel/secure-boot-private-key.pem\nSecureBootCertificate=/etc/kernel/secure-boot-certificate.pem\n",
    );
    let f = gather(&HostRoot::at(r));
    let c = cmdline_change(&f, Loader::Uki, &want()).unwrap().unwrap();
    assert!(
        c.commands[0].why.contains("signed with uki.conf's key"),
        "{:?}",
        c.commands
    );
}

#[test]
fn without_kernel_install_and_ukify_the_steps_stay_manual() {
    // mkinitcpio's UKI presets, dracut --uefi: no 60-ukify plugin.
    let dir = debian13_uki("uki.efi");
    let r = dir.path();
    std::fs::remove_file(r.join("usr/lib/kernel/install.d/60-ukify.install")).unwrap();
    let f = gather(&HostRoot::at(r));
    assert!(cmdline_change(&f, Loader::Uki, &want()).is_err());
}

/// kernel-install skips a plugin that /etc masks (a symlink to /dev/null,
/// or an empty file of its name): then nothing builds the image with ukify.
#[test]
fn a_ukify_plugin_masked_in_etc_is_no_plugin() {
    let dir = debian13_uki("uki.efi");
    let r = dir.path();
    std::fs::create_dir_all(r.join("etc/kernel/install.d")).unwrap();
    let mask = r.join("etc/kernel/install.d/60-ukify.install");
    std::os::unix::fs::symlink("/dev/null", &mask).unwrap();
    let f = gather(&HostRoot::at(r));
    assert!(
        cmdline_change(&f, Loader::Uki, &want()).is_err(),
        "a /dev/null mask"
    );
    std::fs::remove_file(&mask).unwrap();
    put(r, "etc/kernel/install.d/60-ukify.install", b"");
    let f = gather(&HostRoot::at(r));
    assert!(
        cmdline_change(&f, Loader::Uki, &want()).is_err(),
        "an empty file"
    );
    // /etc's own plugin of that name runs instead of /usr/lib's.
    put(
        r,
        "etc/kernel/install.d/60-ukify.install",
        b"#!/usr/bin/python3\n",
    );
    let f = gather(&HostRoot::at(r));
    assert!(
        cmdline_change(&f, Loader::Uki, &want()).is_ok(),
        "/etc's own plugin"
    );
}

/// The whole plan on a Debian 13 UKI desktop: the initramfs is rebuilt in
/// /boot only (Debian's hook kept from the default image by
/// KERNEL_INSTALL_BYPASS=1), and the only image built is ours, after it —
/// so the default image stays the old setup, whole, and a power cut at any
/// moment of the apply leaves it as it was.
#[test]
fn the_plan_leaves_the_default_image_alone_and_builds_ours_last() {
    let dir = crate::support::tuning::runtime_host();
    let r = dir.path();
    crate::support::tuning::distro(r, "debian12");
    let uki = debian13_uki("uki.efi");
    crate::support::hosts::copy_tree(uki.path(), r);
    put(
        r,
        "proc/sys/kernel/osrelease",
        format!("{REL}\n").as_bytes(),
    );
    put(r, "var/lib/dpkg/info/initramfs-tools.list", b"");
    put(r, &format!("lib/modules/{REL}/modules.dep"), b"");
    let root = HostRoot::at(r);
    let req = crate::support::boot_hosts::request();
    let p = vfio_assistant::tuning::plan::plan(
        &vfio_assistant::host::scan(&root).unwrap(),
        &gather(&root),
        &req,
    )
    .unwrap();
    vfio_assistant::tuning::targets::check_plan(&p).unwrap();
    let boot: Vec<(String, Vec<Vec<String>>, Vec<String>)> = p
        .changes
        .iter()
        .filter(|c| c.id == "vfio-boot" || c.id == "cmdline")
        .map(|c| {
            (
                c.id.to_string(),
                c.commands.iter().map(|s| s.argv()).collect(),
                c.artifacts.iter().map(|a| a.path.clone()).collect(),
            )
        })
        .collect();
    assert_eq!(boot.len(), 2, "{boot:#?}");
    assert_eq!(boot[0].0, "vfio-boot");
    assert_eq!(boot[0].1, [vec!["update-initramfs", "-u", "-k", REL]]);
    assert_eq!(
        boot[0].2,
        [format!("/boot/initrd.img-{REL}")],
        "the default image is no artifact: untouched"
    );
    let vb = p.changes.iter().find(|c| c.id == "vfio-boot").unwrap();
    assert_eq!(vb.commands[0].cmd.envs(), [("KERNEL_INSTALL_BYPASS", "1")]);
    assert_eq!(boot[1].0, "cmdline");
    assert_eq!(boot[1].1[0][1], "--entry-token=literal:vfio-assistant");
    assert_eq!(boot[1].2, [format!("/{ESP}/vfio-assistant-{REL}.efi")]);
}
