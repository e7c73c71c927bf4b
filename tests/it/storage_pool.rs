//! The wizard's "Create the image" on a fresh libvirt (issue 42's window
//! journey, as an ordinary user): there is no `default` pool yet, and the
//! user cannot write /var/lib/libvirt/images. The image is made by libvirt
//! in a `default` pool made as virt-manager makes it (a folder, built,
//! started, autostarted), never by qemu-img as the user.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use vfio_assistant::libvirt::Hypervisor;
use vfio_assistant::report::storage::{create_qcow2, images_folder};

#[test]
fn a_fresh_libvirt_gets_its_default_pool_and_the_image_in_it() {
    let Some(hv) = crate::support::vm::system() else {
        return;
    };
    if hv.pool("default").is_ok() {
        eprintln!("skipped: this libvirt has a 'default' pool already (a fresh one has none)");
        return;
    }
    let (folder, pool) = images_folder(Some(&hv));
    assert_eq!((folder.as_str(), pool), ("/var/lib/libvirt/images", None));
    let path = format!("{folder}/vfioa-test-{}.qcow2", std::process::id());
    let made = create_qcow2(Some(&hv), &path, 1);
    let p = hv.pool("default");
    // Put back as it was before asserting: no pool, no image.
    let _ = std::fs::remove_file(&path);
    let _ = std::process::Command::new("virsh")
        .args(["-c", "qemu:///system", "pool-destroy", "default"])
        .output();
    let _ = std::process::Command::new("virsh")
        .args(["-c", "qemu:///system", "pool-undefine", "default"])
        .output();
    assert_eq!(made.unwrap(), path);
    let p = p.unwrap();
    assert!(p.active, "{p:?}");
    assert_eq!(p.path.as_deref(), Some("/var/lib/libvirt/images"));
}
