//! The initramfs check on images built the way distributions build them: the
//! real GNU `cpio -o -H newc` writes the archives, the real `zstd`/`gzip`/`xz`
//! compress the main one, an uncompressed microcode archive goes first (as
//! Debian's initramfs-tools and Fedora's dracut do). The tools are required
//! in CI (scripts/setup.sh installs cpio and zstd) and skipped elsewhere with
//! a message.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{base_host, put};
use std::path::Path;
use std::process::{Command, Stdio};
use vfio_assistant::checks::model::Status;
use vfio_assistant::checks::run_checks;
use vfio_assistant::host::initramfs::InitramfsState;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

const RELEASE: &str = "6.1.0-27-amd64";
pub(crate) const VFIO_CONF: &str =
    "options vfio-pci ids=10de:1b80,10de:10f0\nsoftdep nouveau pre: vfio-pci\n";

pub(crate) fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is required in CI (scripts/setup.sh test installs it)"
        );
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

/// `find . | cpio -o -H newc` in `dir`: the archive bytes.
fn cpio_of(dir: &Path) -> Vec<u8> {
    let out = Command::new("sh")
        .arg("-c")
        .arg("find . | LC_ALL=C sort | cpio -o -H newc --quiet")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn compress(cmd: &[&str], data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let w = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    w.join().unwrap();
    out.stdout
}

/// An image: an early microcode archive, then the main archive holding
/// `conf` as etc/modprobe.d/vfio.conf and the vfio modules (unless not).
pub(crate) fn image(conf: Option<&str>, with_vfio_pci: bool, compressor: &[&str]) -> Vec<u8> {
    let early = tempfile::tempdir().unwrap();
    put(
        early.path(),
        "kernel/x86/microcode/AuthenticAMD.bin",
        "microcode",
    );
    let main = tempfile::tempdir().unwrap();
    let m = format!("usr/lib/modules/{RELEASE}/kernel/drivers/vfio");
    put(main.path(), &format!("{m}/vfio.ko"), "module");
    put(main.path(), &format!("{m}/vfio_iommu_type1.ko"), "module");
    if with_vfio_pci {
        put(main.path(), &format!("{m}/pci/vfio-pci.ko"), "module");
    }
    put(
        main.path(),
        "usr/lib/modprobe.d/systemd.conf",
        "options bonding max_bonds=0\n",
    );
    if let Some(c) = conf {
        put(main.path(), "etc/modprobe.d/vfio.conf", c);
    }
    put(main.path(), "init", "#!/bin/sh\n");
    let mut img = cpio_of(early.path());
    img.extend(compress(compressor, &cpio_of(main.path())));
    img
}

/// The X570 host with vfio.conf in /etc/modprobe.d and `img` as its initramfs.
pub(crate) fn host_with(img: Option<&[u8]>, conf: Option<&str>) -> tempfile::TempDir {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    put(
        dir.path(),
        "proc/sys/kernel/osrelease",
        &format!("{RELEASE}\n"),
    );
    if let Some(c) = conf {
        put(dir.path(), "etc/modprobe.d/vfio.conf", c);
    }
    if let Some(img) = img {
        let p = dir.path().join(format!("boot/initrd.img-{RELEASE}"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, img).unwrap();
    }
    dir
}

fn finding(dir: &Path) -> Option<vfio_assistant::checks::model::Finding> {
    let snap = scan(&HostRoot::at(dir)).unwrap();
    run_checks(&snap, None)
        .into_iter()
        .find(|f| f.id == "boot.initramfs_vfio")
}

#[test]
fn an_image_rebuilt_after_the_change_passes() {
    if !have("cpio") || !have("zstd") {
        return;
    }
    let img = image(Some(VFIO_CONF), true, &["zstd", "-q", "-c"]);
    let dir = host_with(Some(&img), Some(VFIO_CONF));
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let InitramfsState::Read(info) = &snap.system.initramfs else {
        panic!("{:?}", snap.system.initramfs);
    };
    assert_eq!(info.compression.as_deref(), Some("zstd"));
    assert!(
        info.vfio_modules
            .iter()
            .any(|m| m.ends_with("pci/vfio-pci.ko")),
        "{info:?}"
    );
    assert_eq!(info.modprobe_lines.len(), 2, "{info:?}");
    let f = finding(dir.path()).unwrap();
    assert_eq!(f.status, Status::Pass, "{f:#?}");
    assert!(
        f.evidence
            .iter()
            .any(|e| e.source.contains("(in the image)"))
    );
}

#[test]
fn an_image_older_than_the_settings_fails_with_the_rebuild() {
    if !have("cpio") || !have("gzip") {
        return;
    }
    // The image was built with only the first card's ids, before the audio
    // function was added; gzip as older Ubuntu images are.
    let old = "options vfio-pci ids=10de:1b80\n";
    let img = image(Some(old), true, &["gzip", "-c"]);
    let f = finding(host_with(Some(&img), Some(VFIO_CONF)).path()).unwrap();
    assert_eq!(f.status, Status::Fail, "{f:#?}");
    assert!(f.title.contains("are not in the initramfs"), "{}", f.title);
    assert!(f.fix.as_deref().unwrap().contains("update-initramfs -u"));
    // No vfio.conf in the image at all: same verdict.
    let img = image(None, true, &["gzip", "-c"]);
    let f = finding(host_with(Some(&img), Some(VFIO_CONF)).path()).unwrap();
    assert_eq!(f.status, Status::Fail);
}

#[test]
fn the_module_must_be_there_unless_built_in() {
    if !have("cpio") || !have("xz") {
        return;
    }
    let img = image(Some(VFIO_CONF), false, &["xz", "-c", "--check=crc32"]);
    let dir = host_with(Some(&img), Some(VFIO_CONF));
    let f = finding(dir.path()).unwrap();
    assert_eq!(f.status, Status::Fail, "{f:#?}");
    assert!(f.title.contains("not the vfio-pci module"));
    // Fedora builds vfio-pci into the kernel: no module needed, but then
    // modprobe.d options never reach it; only the kernel command line does.
    put(
        dir.path(),
        &format!("usr/lib/modules/{RELEASE}/modules.builtin"),
        "kernel/drivers/vfio/vfio.ko\nkernel/drivers/vfio/pci/vfio-pci.ko\n",
    );
    put(
        dir.path(),
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n",
    );
    let f = finding(dir.path()).unwrap();
    assert_eq!(f.status, Status::Warn, "{f:#?}");
    assert!(f.title.contains("does not reach it"), "{}", f.title);
    put(
        dir.path(),
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet vfio-pci.ids=10de:1b80,10de:10f0\n",
    );
    let f = finding(dir.path()).unwrap();
    assert_eq!(f.status, Status::Pass, "{f:#?}");
}

#[test]
fn no_binding_no_image_and_a_broken_image() {
    // Nothing bound at boot (libvirt's managed rebinding): no finding.
    let dir = host_with(None, None);
    assert!(finding(dir.path()).is_none());
    // Bound at boot but no image where distributions put it.
    let dir = host_with(None, Some(VFIO_CONF));
    let f = finding(dir.path()).unwrap();
    assert_eq!(f.status, Status::Unknown);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.value.contains(&format!("initrd.img-{RELEASE}")))
    );
    // Garbage where the image should be: unknown with the reason, no panic.
    let dir = host_with(Some(b"\x7fELF not an initramfs at all"), Some(VFIO_CONF));
    let f = finding(dir.path()).unwrap();
    assert_eq!(f.status, Status::Unknown, "{f:#?}");
    assert!(
        f.evidence.iter().any(|e| e.value.contains("unknown data")),
        "{f:#?}"
    );
    // A cut-off image: still a reason.
    if have("cpio") && have("zstd") {
        let img = image(Some(VFIO_CONF), true, &["zstd", "-q", "-c"]);
        let dir = host_with(Some(&img[..img.len() / 2]), Some(VFIO_CONF));
        let f = finding(dir.path()).unwrap();
        assert_eq!(
            f.status,
            Status::Unknown,
            "a cut-off image is not judged: {f:#?}"
        );
    }
    // A captured host keeps the image as an empty placeholder: not judged.
    let dir = host_with(Some(b""), Some(VFIO_CONF));
    let f = finding(dir.path()).unwrap();
    assert_eq!(f.status, Status::Unknown, "{f:#?}");
    assert!(
        f.evidence.iter().any(|e| e.value.contains("is empty")),
        "{f:#?}"
    );
}

fn initramfs_state(dir: &Path) -> InitramfsState {
    scan(&HostRoot::at(dir)).unwrap().system.initramfs
}

#[test]
fn a_gzip_bomb_is_too_large_to_inspect_quickly_and_once() {
    // 512 MiB of zeros, gzip'd to well under 1 MiB: before, every scan spent
    // 30 s in `gzip -dc` until the watchdog stopped it.
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..512 {
        gz.write_all(&zeros).unwrap();
    }
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    let dir = host_with(Some(&bomb), Some(VFIO_CONF));
    let start = std::time::Instant::now();
    let state = initramfs_state(dir.path());
    let first = start.elapsed();
    let InitramfsState::Unreadable { reason, .. } = &state else {
        panic!("{state:?}");
    };
    assert!(reason.contains("too large to inspect"), "{reason}");
    assert!(first < std::time::Duration::from_secs(20), "{first:?}");
    // The answer is kept: the next scan does not unpack it again.
    let start = std::time::Instant::now();
    assert_eq!(initramfs_state(dir.path()), state);
    assert!(
        start.elapsed() < first,
        "{:?} then {:?}",
        first,
        start.elapsed()
    );
    let f = finding(dir.path()).unwrap();
    assert_eq!(f.status, Status::Unknown, "{f:#?}");
}

#[test]
fn an_image_over_the_size_cap_is_not_read_at_all() {
    let dir = host_with(None, Some(VFIO_CONF));
    let p = dir.path().join(format!("boot/initrd.img-{RELEASE}"));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(1 << 30).unwrap(); // 1 GiB of holes
    let start = std::time::Instant::now();
    let state = initramfs_state(dir.path());
    let InitramfsState::Unreadable { reason, .. } = &state else {
        panic!("{state:?}");
    };
    assert!(
        reason.contains("too large to inspect (1024 MiB"),
        "{reason}"
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn gzip_members_back_to_back_and_padding_after_them_are_read() {
    // What a gzip'd image looks like when built in pieces: two members, then
    // zero padding (the kernel and `gzip -dc` accept both). Made here with
    // flate2 so no tool is needed.
    use std::io::Write;
    if !have("cpio") {
        return;
    }
    let main = tempfile::tempdir().unwrap();
    put(main.path(), "etc/modprobe.d/vfio.conf", VFIO_CONF);
    put(
        main.path(),
        &format!("usr/lib/modules/{RELEASE}/kernel/drivers/vfio/pci/vfio-pci.ko"),
        "module",
    );
    let archive = cpio_of(main.path());
    let (a, b) = archive.split_at(archive.len() / 2);
    let mut img = Vec::new();
    for part in [a, b] {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(part).unwrap();
        img.extend(gz.finish().unwrap());
    }
    img.resize(img.len() + 4096, 0);
    let dir = host_with(Some(&img), Some(VFIO_CONF));
    let InitramfsState::Read(info) = initramfs_state(dir.path()) else {
        panic!("not read");
    };
    assert_eq!(info.compression.as_deref(), Some("gzip"));
    assert_eq!(info.modprobe_lines.len(), 2, "{info:?}");
    assert!(info.vfio_modules.iter().any(|m| m.ends_with("vfio-pci.ko")));
}
