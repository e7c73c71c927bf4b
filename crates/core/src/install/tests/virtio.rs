//! A virtio-win-like disc (ISO 9660 with Joliet and Rock Ridge, as the
//! real one is made): listed, looked up ignoring case, read and copied out.

use super::*;
use crate::install::iso::{Filesystem, IsoImage, MediaError};
use crate::install::windows_iso::inspect;

const VIOSTOR_INF: &[u8] = b"[Version]\r\nSignature=\"$WINDOWS NT$\"\r\nClass=SCSIAdapter\r\n";

fn virtio_tree(work: &Path) -> PathBuf {
    let tree = work.join("virtio");
    write(&tree.join("viostor/w11/amd64/viostor.inf"), VIOSTOR_INF);
    write(
        &tree.join("viostor/w11/amd64/viostor.sys"),
        &vec![0x5A; 70_000],
    );
    write(&tree.join("viostor/w10/amd64/viostor.inf"), VIOSTOR_INF);
    write(
        &tree.join("NetKVM/w10/amd64/netkvm.inf"),
        b"[Version]\r\nClass=Net\r\n",
    );
    write(&tree.join("NetKVM/w11/ARM64/netkvm.inf"), b"arm");
    write(&tree.join("virtio-win-guest-tools.exe"), b"MZ guest tools");
    write(&tree.join("guest-agent/qemu-ga-x86_64.msi"), b"msi");
    tree
}

fn virtio_iso(work: &Path, args: &[&str]) -> PathBuf {
    let tree = virtio_tree(work);
    let iso = work.join("virtio-win.iso");
    xorriso_iso(&tree, &iso, args);
    iso
}

#[test]
fn joliet_names_keep_their_case_and_are_found_ignoring_it() {
    let tmp = tempfile::tempdir().unwrap();
    let iso = virtio_iso(tmp.path(), &["-J", "-R", "-V", "virtio-win-0.1.266"]);
    let image = IsoImage::open(&iso).unwrap();
    assert_eq!(image.filesystem(), Filesystem::Joliet);
    assert_eq!(image.label(), "virtio-win-0.1.266");

    let names: Vec<String> = image
        .list("/")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        names,
        [
            "NetKVM",
            "guest-agent",
            "viostor",
            "virtio-win-guest-tools.exe"
        ]
    );
    let amd64 = image.list("/VIOSTOR/w11/AMD64").unwrap();
    assert_eq!(amd64.len(), 2);
    assert_eq!(
        (amd64[1].name.as_str(), amd64[1].size),
        ("viostor.sys", 70_000)
    );
    assert!(image.exists("/netkvm/W10/amd64/NETKVM.INF"));
    assert!(image.exists("/NetKVM/w11/arm64"));
    assert!(!image.exists("/NetKVM/w11/amd64"));
    assert!(!image.exists("/viostor/../NetKVM"));
    assert_eq!(
        image.read("/viostor/w11/amd64/viostor.inf", 4096).unwrap(),
        VIOSTOR_INF
    );
    assert!(matches!(
        image.read("/viostor/w11/amd64/viostor.sys", 1000),
        Err(MediaError::TooLarge { size: 70_000, .. })
    ));
    assert_eq!(
        image
            .read_at("/viostor/w11/amd64/viostor.sys", 69_990, 10)
            .unwrap(),
        [0x5A; 10]
    );

    let found = inspect(&iso).unwrap_err().to_string();
    assert!(
        found.contains("virtio-win driver disc \"virtio-win-0.1.266\""),
        "{found}"
    );
    assert!(
        found.contains("no sources/install.wim or install.esd"),
        "{found}"
    );
}

#[test]
fn a_driver_folder_is_copied_out_whole_or_not_at_all() {
    let tmp = tempfile::tempdir().unwrap();
    let iso = virtio_iso(tmp.path(), &["-J", "-R", "-V", "virtio-win-0.1.266"]);
    let image = IsoImage::open(&iso).unwrap();

    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let bytes = image.extract_dir("/VioStor", &out, 1 << 20).unwrap();
    assert_eq!(bytes, 2 * VIOSTOR_INF.len() as u64 + 70_000);
    assert_eq!(
        std::fs::read(out.join("w11/amd64/viostor.inf")).unwrap(),
        VIOSTOR_INF
    );
    assert_eq!(
        std::fs::read(out.join("w11/amd64/viostor.sys"))
            .unwrap()
            .len(),
        70_000
    );
    assert!(out.join("w10/amd64/viostor.inf").is_file());
    // Copying again over what is there is refused, not written through.
    assert!(matches!(
        image.extract_dir("/viostor", &out, 1 << 20),
        Err(MediaError::Io { .. })
    ));

    let small = tmp.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let too_much = image.extract_dir("/", &small, 10_000);
    assert!(
        matches!(too_much, Err(MediaError::TooLarge { max: 10_000, .. })),
        "{too_much:?}"
    );
    assert_eq!(
        std::fs::read_dir(&small).unwrap().count(),
        0,
        "nothing is written"
    );
    assert!(matches!(
        image.extract_dir("/virtio-win-guest-tools.exe", &small, 1 << 20),
        Err(MediaError::NotADirectory { .. })
    ));
}

#[test]
fn rock_ridge_and_plain_iso_9660_names_are_read_too() {
    let tmp = tempfile::tempdir().unwrap();
    let rr = virtio_iso(tmp.path(), &["-R", "-V", "virtio-win-0.1.266"]);
    let image = IsoImage::open(&rr).unwrap();
    assert_eq!(image.filesystem(), Filesystem::RockRidge);
    assert!(
        image
            .list("/")
            .unwrap()
            .iter()
            .any(|e| e.name == "virtio-win-guest-tools.exe")
    );
    assert_eq!(
        image.read("/NetKVM/w11/ARM64/netkvm.inf", 10).unwrap(),
        b"arm"
    );

    // xorriso always writes Rock Ridge; genisoimage without -R does not.
    let plain = tmp.path().join("plain.iso");
    run(Command::new("genisoimage")
        .args(["-quiet", "-V", "PLAIN", "-o"])
        .arg(&plain)
        .arg(tmp.path().join("virtio")));
    let image = IsoImage::open(&plain).unwrap();
    assert_eq!(image.filesystem(), Filesystem::Iso9660);
    assert_eq!(image.label(), "PLAIN");
    // 8.3 names in capitals, the ";1" version cut off; still found by any case.
    let names: Vec<String> = image
        .list("/viostor/w11/amd64")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["VIOSTOR.INF", "VIOSTOR.SYS"]);
    assert_eq!(
        image.read("/viostor/w11/amd64/viostor.inf", 4096).unwrap(),
        VIOSTOR_INF
    );
}
