//! A kernel update after the apply (issue 33): the new kernel's initramfs is
//! built by its postinst from the files the apply changed, so it carries
//! vfio-pci and our modprobe.d file too. Undo must rebuild it from the
//! restored files, not only put back the image the apply itself rebuilt.

use crate::support::boot_hosts::{
    REL, SD_REL, apply_once, env, grub_host, log, request, run_standin, sdboot_host,
};
use crate::support::hosts::put;
use vfio_assistant::host::initramfs::read_initramfs;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::{HostPath, HostRoot};
use vfio_assistant::tuning::apply::undo;
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::plan::plan;
use vfio_assistant::tuning::status::status;

const NEW: &str = "6.12.12+bpo-amd64";

fn image_holds_our_modprobe(dir: &std::path::Path, rel: &str) -> bool {
    holds_at(dir, &format!("/boot/initrd.img-{rel}"), rel)
}

fn holds_at(dir: &std::path::Path, image: &str, rel: &str) -> bool {
    let root = HostRoot::at(dir);
    read_initramfs(&root, &HostPath::from_absolute(image).unwrap(), rel)
        .unwrap()
        .modprobe_lines
        .iter()
        .any(|(p, _)| p.ends_with("modprobe.d/vfio-assistant.conf"))
}

/// Installs kernel `rel` as its package would after the apply: its modules
/// folder, its kernel, and the postinst's initramfs built from /etc as it
/// stands then.
fn install_kernel(dir: &std::path::Path, rel: &str) {
    std::thread::sleep(std::time::Duration::from_millis(1100));
    put(dir, &format!("lib/modules/{rel}/modules.dep"), "");
    put(dir, &format!("boot/vmlinuz-{rel}"), "");
    run_standin(dir, &["update-initramfs", "-u", "-k", rel]);
    run_standin(dir, &["update-grub"]);
}

#[test]
fn undo_after_a_kernel_update_rebuilds_the_new_kernels_image_too() {
    let dir = grub_host();
    let r = dir.path();
    put(r, &format!("lib/modules/{REL}/modules.dep"), "");
    let (o, _) = apply_once(r, &env(r));
    assert_eq!(o.state, EntryState::Applied);
    install_kernel(r, NEW);
    // The update carried the tuning: the new kernel's image holds it.
    assert!(image_holds_our_modprobe(r, NEW));
    let mark = log(r).len();
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None, "{u:?}");
    let after: Vec<String> = log(r)[mark..].to_vec();
    assert!(
        after
            .iter()
            .any(|x| x.starts_with(&format!("update-initramfs: wrote /boot/initrd.img-{NEW}"))),
        "the new kernel's image was not rebuilt: {after:#?}"
    );
    // Neither kernel's image keeps our file or vfio-pci.
    for rel in [REL, NEW] {
        assert!(
            !image_holds_our_modprobe(r, rel),
            "{rel} still holds our modprobe.d file"
        );
    }
    assert!(
        after.iter().any(|x| x == &format!("update-initramfs: wrote /boot/initrd.img-{NEW} (vfio_pci: no)")),
        "{after:#?}"
    );
    let st = status(&env(r));
    assert!(st.last().unwrap().leftovers.is_empty(), "{st:?}");
}

#[test]
fn two_kernels_the_next_boots_is_rebuilt_the_other_is_named_and_left_whole() {
    let dir = grub_host();
    let r = dir.path();
    // An older kernel, installed long before: its image untouched since.
    let old = "6.1.0-10-amd64";
    put(r, &format!("lib/modules/{old}/modules.dep"), "");
    put(r, &format!("boot/vmlinuz-{old}"), "");
    run_standin(r, &["update-initramfs", "-u", "-k", old]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // The plan names the kernel it rebuilds and the one it leaves.
    let root = HostRoot::at(r);
    let p = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    let notes: Vec<&String> = p.changes.iter().flat_map(|c| &c.notes).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with(&format!("Rebuilt: the initramfs of {REL}"))),
        "{notes:#?}"
    );
    // GRUB gives every entry the parameters: a boot into the old kernel is
    // the new setup (vfio-pci from the root file system), as the booted
    // two-kernels case saw — not "the old setup", which it once said.
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with(&format!("Not rebuilt: {old}"))
                && n.contains("still gets the new kernel parameters")),
        "{notes:#?}"
    );
    let (o, _) = apply_once(r, &env(r));
    assert_eq!(o.state, EntryState::Applied);
    // The old kernel's image is as it was: the old setup, whole.
    assert!(!image_holds_our_modprobe(r, old));
    let mark = log(r).len();
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None, "{u:?}");
    let after: Vec<String> = log(r)[mark..].to_vec();
    assert!(
        !after
            .iter()
            .any(|x| x.contains(&format!("initrd.img-{old}"))),
        "an image nobody rebuilt since was rebuilt: {after:#?}"
    );
}

#[test]
fn systemd_boot_after_a_kernel_update_gets_the_new_kernels_esp_image_rebuilt() {
    let dir = sdboot_host();
    let r = dir.path();
    put(r, &format!("lib/modules/{SD_REL}/modules.dep"), "");
    let (o, lines) = apply_once(r, &env(r));
    assert_eq!(o.state, EntryState::Applied, "{lines:#?}");
    // The update as Debian's kernel-install runs it: dracut builds the
    // image, kernel-install copies it to the ESP and writes the entry.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    put(r, &format!("lib/modules/{NEW}/modules.dep"), "");
    put(r, &format!("boot/vmlinuz-{NEW}"), "");
    let img = format!("/boot/initrd.img-{NEW}");
    run_standin(r, &["dracut", "-f", &img, NEW]);
    run_standin(
        r,
        &[
            "kernel-install",
            "add",
            NEW,
            &format!("/boot/vmlinuz-{NEW}"),
        ],
    );
    let esp = format!("/boot/efi/624d595f25b9403c9679457a72c2cbfe/{NEW}/initrd.img-{NEW}");
    assert!(holds_at(r, &esp, NEW), "the update carried the tuning");
    let mark = log(r).len();
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None, "{u:?}");
    let after: Vec<String> = log(r)[mark..].to_vec();
    let dracut = after
        .iter()
        .position(|x| x.starts_with(&format!("dracut: wrote {img}")));
    let ki = after
        .iter()
        .position(|x| x.starts_with("kernel-install:") && x.contains(NEW));
    assert!(
        matches!((dracut, ki), (Some(d), Some(k)) if d < k),
        "rebuilt, then put on the ESP: {after:#?}"
    );
    assert!(!holds_at(r, &esp, NEW), "the ESP's image of {NEW}");
    assert!(!holds_at(r, &img, NEW), "{img}");
}
