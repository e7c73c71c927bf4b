//! The kernel the next boot starts, on every loader (issue 40), and the
//! initramfs the boot-time binding rebuilds for it: Fedora after `dnf
//! upgrade` and before the reboot (GRUB with BLS, saved_entry naming the
//! new kernel while the old one runs), a pending grub2-reboot, grubby's
//! newest-first order without a saved entry, kernelstub's newest kernel
//! with its initrd, and a loader whose choice cannot be read with two
//! kernels installed — where the binding is refused with a sentence, never
//! a rebuild of the wrong image or none in silence. Trees from
//! tests/fixtures/nextboot (each with its SOURCE).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::put;
use crate::support::tuning::runtime_host;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::command::Cmd;
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::model::{Plan, Request};
use vfio_assistant::tuning::plan::plan;

const OLD: &str = "6.11.4-301.fc41.x86_64";
const NEW: &str = "6.12.5-200.fc41.x86_64";

fn tools(r: &Path, tools: &[&str]) {
    for t in tools {
        put(r, &format!("usr/bin/{t}"), "");
        std::fs::set_permissions(
            r.join("usr/bin").join(t),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
}

fn fixture(r: &Path, name: &str) {
    let _ = std::fs::remove_file(r.join("etc/default/grub"));
    crate::support::tree::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/nextboot")
            .join(name),
        r,
    );
}

/// Fedora 41 after `dnf upgrade`: 6.11.4 runs, 6.12.5 is installed and
/// saved as GRUB's default.
fn fedora() -> tempfile::TempDir {
    let dir = runtime_host();
    let r = dir.path();
    fixture(r, "fedora-grub-bls");
    tools(r, &["grubby", "dracut", "grub2-mkconfig"]);
    for k in [OLD, NEW] {
        put(r, &format!("boot/vmlinuz-{k}"), "");
        put(r, &format!("boot/initramfs-{k}.img"), "");
    }
    put(
        r,
        "proc/cmdline",
        &format!(
            "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{OLD} root=UUID=ac268e11-1319-4ac9-9155-cbad003d9baf ro rootflags=subvol=root rhgb quiet\n"
        ),
    );
    put(r, "proc/sys/kernel/osrelease", &format!("{OLD}\n"));
    dir
}

fn request() -> Request {
    Request {
        gpus: vec!["0b:00.0".parse().unwrap()],
        ..Request::default()
    }
}

fn the_plan(r: &Path) -> Plan {
    let root = HostRoot::at(r);
    plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap()
}

/// The releases whose image the plan rebuilds, in order.
fn rebuilt(p: &Plan) -> Vec<String> {
    p.changes
        .iter()
        .filter(|c| c.id == "vfio-boot")
        .flat_map(|c| &c.commands)
        .filter_map(|s| match &s.cmd {
            Cmd::Dracut { release, .. } | Cmd::UpdateInitramfs { release } => {
                Some(release.as_str().to_string())
            }
            _ => None,
        })
        .collect()
}

fn notes(p: &Plan) -> String {
    p.changes
        .iter()
        .flat_map(|c| c.notes.iter())
        .chain(p.notes.iter())
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn fedora_after_an_update_rebuilds_the_kernel_grub_starts_next() {
    let dir = fedora();
    let r = dir.path();
    let p = the_plan(r);
    assert_eq!(p.boot.loader, "grub-bls", "{:?}", p.boot);
    assert_eq!(
        rebuilt(&p),
        vec![NEW.to_string(), OLD.to_string()],
        "{}",
        notes(&p)
    );
    let n = notes(&p);
    assert!(
        n.contains(&format!("the initramfs of {NEW}")) && n.contains("saved_entry"),
        "{n}"
    );

    // grub2-reboot into the old kernel pending: that one boots next.
    std::fs::copy(
        r.join("boot/grub2/grubenv.after-grub2-reboot"),
        r.join("boot/grub2/grubenv"),
    )
    .unwrap();
    let p = the_plan(r);
    assert_eq!(
        rebuilt(&p).first().map(String::as_str),
        Some(OLD),
        "{}",
        notes(&p)
    );
    assert!(notes(&p).contains("next_entry"), "{}", notes(&p));

    // No saved entry: GRUB's blscfg and grubby take the newest.
    put(
        r,
        "boot/grub2/grubenv",
        "# GRUB Environment Block\nmenu_auto_hide=1\n",
    );
    let p = the_plan(r);
    assert_eq!(
        rebuilt(&p).first().map(String::as_str),
        Some(NEW),
        "{}",
        notes(&p)
    );
}

#[test]
fn kernelstub_rebuilds_the_newest_kernel_with_its_initrd() {
    let dir = runtime_host();
    let r = dir.path();
    fixture(r, "kernelstub");
    tools(r, &["kernelstub", "update-initramfs"]);
    put(r, "var/lib/dpkg/info/initramfs-tools.list", "");
    put(r, "proc/sys/kernel/osrelease", "5.8.0-7625-generic\n");
    put(
        r,
        "proc/cmdline",
        "initrd=\\EFI\\Pop_OS-0\\initrd.img root=UUID=0 ro quiet splash\n",
    );
    let p = the_plan(r);
    assert_eq!(p.boot.loader, "kernelstub", "{:?}", p.boot);
    assert_eq!(
        rebuilt(&p),
        vec![
            "5.8.0-7630-generic".to_string(),
            "5.8.0-7625-generic".to_string()
        ],
        "{}",
        notes(&p)
    );
}

#[test]
fn debian_grub_with_a_saved_default_rebuilds_that_kernel() {
    let dir = crate::support::tuning::tuning_host();
    let r = dir.path();
    let (a, b) = ("6.1.0-18-amd64", "6.1.0-9-amd64");
    for k in [a, b] {
        put(r, &format!("boot/vmlinuz-{k}"), "");
        put(r, &format!("boot/initrd.img-{k}"), "");
    }
    put(r, "proc/sys/kernel/osrelease", &format!("{a}\n"));
    put(
        r,
        "proc/cmdline",
        &format!("BOOT_IMAGE=/boot/vmlinuz-{a} root=UUID=u ro quiet\n"),
    );
    put(r, "etc/default/grub.d/50-saved.cfg", "GRUB_DEFAULT=saved\n");
    put(
        r,
        "boot/grub/grub.cfg",
        &format!(
            "menuentry 'Debian GNU/Linux' $menuentry_id_option 'gnulinux-simple-u' {{\n linux /boot/vmlinuz-{a} root=UUID=u ro quiet\n}}\nsubmenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-u' {{\n menuentry 'Debian GNU/Linux, with Linux {b}' $menuentry_id_option 'gnulinux-{b}-advanced-u' {{\n  linux /boot/vmlinuz-{b} root=UUID=u ro quiet\n }}\n}}\n"
        ),
    );
    put(
        r,
        "boot/grub/grubenv",
        &format!(
            "# GRUB Environment Block\nsaved_entry=gnulinux-advanced-u>gnulinux-{b}-advanced-u\n"
        ),
    );
    let p = the_plan(r);
    assert_eq!(
        rebuilt(&p),
        vec![b.to_string(), a.to_string()],
        "{}",
        notes(&p)
    );
}

#[test]
fn a_loader_whose_choice_cannot_be_read_is_refused_with_a_sentence() {
    // GRUB booted, but no grub.cfg to read (a /boot the capture lacks),
    // two kernels installed: the binding is not set up, and said.
    let dir = crate::support::tuning::tuning_host();
    let r = dir.path();
    for k in ["6.1.0-18-amd64", "6.1.0-9-amd64"] {
        put(r, &format!("boot/vmlinuz-{k}"), "");
    }
    let _ = std::fs::remove_file(r.join("boot/grub/grub.cfg"));
    put(r, "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
    put(
        r,
        "proc/cmdline",
        "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=u ro quiet\n",
    );
    let p = the_plan(r);
    assert!(
        p.changes.iter().all(|c| c.id != "vfio-boot"),
        "{:?}",
        p.changes
            .iter()
            .map(|c| c.id.to_string())
            .collect::<Vec<_>>()
    );
    let n = notes(&p);
    assert!(
        n.contains("not set up at boot") && n.contains("6.1.0-9-amd64"),
        "{n}"
    );
    let cmdline = p
        .changes
        .iter()
        .find(|c| c.id == "cmdline")
        .map(|c| c.title.clone())
        .unwrap_or_default();
    assert!(!cmdline.contains("vfio_pci.ids"), "{cmdline}");
}
