//! The unattended install's media, built for real: a Windows-like ISO
//! (UDF, made by genisoimage, with an install.wim made by wimlib and given
//! Windows' metadata) and a virtio-win-like ISO (ISO 9660 + Joliet, made by
//! xorriso), then the answer media read back with our own reader.

use super::iso::IsoImage;
use super::test_media::{virtio_iso, windows_iso};
use super::unattend::Secret;
use super::unattended::{InstallError, UnattendRequest, prepare};
use crate::domain::template::{DiskBus, Windows};
use crate::sysroot::HostRoot;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn host(dir: &Path) -> HostRoot {
    let etc = dir.join("host/etc/default");
    fs::create_dir_all(&etc).expect("mkdir");
    fs::write(etc.join("locale"), "LANG=de_DE.UTF-8\n").expect("write");
    fs::write(etc.join("keyboard"), "XKBLAYOUT=\"de\"\n").expect("write");
    fs::write(dir.join("host/etc/timezone"), "Europe/Berlin\n").expect("write");
    HostRoot::at(dir.join("host"))
}

fn request(dir: &Path, win: PathBuf, virtio: PathBuf) -> UnattendRequest {
    UnattendRequest {
        vm_name: "win11".into(),
        windows_iso: win,
        virtio_iso: virtio,
        user: "Ada".into(),
        password: Secret("correct horse".into()),
        edition: None,
        disk_bus: DiskBus::Virtio,
        gpu_ids: vec![(0x10de, 0x2484), (0x10de, 0x228b)],
        looking_glass_installer: None,
        out: Some(dir.join("out/win11-answer.iso")),
    }
}

/// Both discs made in `d` (the Windows one with `editions`, the virtio-win
/// one with `versions` and maybe its guest tools), an out folder, and the
/// request for them.
fn discs(
    d: &Path,
    editions: &[(&str, &str, u32)],
    versions: &[&str],
    tools: bool,
) -> UnattendRequest {
    let win = windows_iso(d, editions);
    let virtio = virtio_iso(d, versions, tools);
    fs::create_dir_all(d.join("out")).expect("mkdir");
    request(d, win, virtio)
}

/// Every file left in `dir` other than the inputs, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_answer_media_holds_the_answer_the_drivers_and_the_scripts() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut req = discs(
        d.path(),
        &[
            ("Windows 11 Home", "Core", 22631),
            ("Windows 11 Pro", "Professional", 22631),
        ],
        &["w10", "w11"],
        true,
    );
    let lg = d.path().join("looking-glass-host-setup.exe");
    fs::write(&lg, "MZ lg").expect("write");
    req.looking_glass_installer = Some(lg);
    let u = prepare(&host(d.path()), &req).expect("media built");
    assert_eq!(u.windows, Windows::Eleven);
    assert_eq!(
        (u.edition.name.as_str(), u.edition.index),
        ("Windows 11 Pro", 2)
    );
    assert!(u.notes.is_empty(), "{:?}", u.notes);
    let meta = fs::metadata(&u.media).expect("media");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // Read back with our own reader: what Windows Setup will find.
    let m = IsoImage::open(&u.media).expect("the media opens");
    assert_eq!(m.label(), "VFIOA_ANSWER");
    let answer =
        String::from_utf8(m.read("/autounattend.xml", 1 << 20).expect("answer")).expect("utf-8");
    assert!(
        answer.contains("<Value>2</Value>"),
        "the Pro edition's index"
    );
    assert!(answer.contains("0407:00000407") && answer.contains("W. Europe Standard Time"));
    assert!(answer.contains("correct horse"));
    for f in [
        "/$WinPEDriver$/viostor/viostor.inf",
        "/$WinPEDriver$/NetKVM/netkvm.inf",
        "/$WinPEDriver$/vioserial/vioser.inf",
        "/vfio-assistant/first-logon.ps1",
        "/vfio-assistant/msi.ps1",
        "/vfio-assistant/looking-glass-host-setup.exe",
    ] {
        assert!(m.exists(f), "{f} on the media");
    }
    // Windows 11's drivers, not Windows 10's; no SCSI or balloon driver for a virtio-blk VM.
    let inf = String::from_utf8(
        m.read("/$WinPEDriver$/viostor/viostor.inf", 4096)
            .expect("inf"),
    )
    .expect("utf-8");
    assert!(inf.contains("for w11"), "{inf}");
    assert!(!m.exists("/$WinPEDriver$/vioscsi") && !m.exists("/$WinPEDriver$/Balloon"));
    let msi =
        String::from_utf8(m.read("/vfio-assistant/msi.ps1", 1 << 16).expect("msi")).expect("utf-8");
    assert!(msi.contains("VEN_10DE&DEV_2484") && msi.contains("VEN_10DE&DEV_228B"));
    // The password is on the media alone: no staging folder is left beside it.
    let left = files_under(&d.path().join("out"));
    assert_eq!(
        left,
        std::slice::from_ref(&u.media),
        "only the media is left"
    );
}

#[test]
fn a_windows_10_iso_gets_windows_10_drivers_and_an_edition_by_name() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut req = discs(
        d.path(),
        &[
            ("Windows 10 Home", "Core", 19045),
            ("Windows 10 Pro", "Professional", 19045),
        ],
        &["w10", "w11"],
        true,
    );
    req.edition = Some("windows 10 home".into());
    req.disk_bus = DiskBus::Scsi;
    let u = prepare(&host(d.path()), &req).expect("media built");
    assert_eq!((u.windows, u.edition.index), (Windows::Ten, 1));
    let m = IsoImage::open(&u.media).expect("opens");
    let inf = String::from_utf8(
        m.read("/$WinPEDriver$/vioscsi/vioscsi.inf", 4096)
            .expect("inf"),
    )
    .expect("utf-8");
    assert!(inf.contains("for w10"), "{inf}");
    req.edition = Some("Windows 10 Education".into());
    match prepare(&host(d.path()), &req) {
        Err(InstallError::NoSuchEdition { has, .. }) => {
            assert_eq!(has, "Windows 10 Home, Windows 10 Pro")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn wrong_discs_are_refused_with_a_sentence_and_nothing_is_made() {
    let d = tempfile::tempdir().expect("tempdir");
    let win = windows_iso(d.path(), &[("Windows 11 Pro", "Professional", 22631)]);
    let old_virtio = virtio_iso(d.path(), &["w10"], false);
    fs::create_dir_all(d.path().join("out")).expect("mkdir");
    // A virtio-win disc from before Windows 11's drivers.
    let e = prepare(
        &host(d.path()),
        &request(d.path(), win.clone(), old_virtio.clone()),
    )
    .expect_err("refused");
    let said = e.to_string();
    assert!(
        said.contains("viostor\\w11\\amd64") && said.contains("0.1.215"),
        "{said}"
    );
    // A disc that is not Windows (the virtio-win disc given as the installer).
    let e = prepare(
        &host(d.path()),
        &request(d.path(), old_virtio.clone(), old_virtio.clone()),
    )
    .expect_err("refused");
    assert!(matches!(e, InstallError::WindowsIso { .. }), "{e}");
    assert!(e.to_string().contains("virtio-win.iso"), "{e}");
    // A bad account name, before any disc is read.
    let mut req = request(d.path(), win.clone(), old_virtio);
    req.user = "Administrator".into();
    assert!(matches!(
        prepare(&host(d.path()), &req),
        Err(InstallError::Answer(_))
    ));
    // An output folder that does not exist.
    let mut req = request(
        d.path(),
        win,
        virtio_iso(&d.path().join("v2"), &["w11"], true),
    );
    req.out = Some(d.path().join("nowhere/x.iso"));
    let e = prepare(&host(d.path()), &req).expect_err("refused");
    assert!(e.to_string().contains("nowhere"), "{e}");
    assert!(
        files_under(&d.path().join("out")).is_empty(),
        "nothing half-made"
    );
}

#[test]
fn a_virtio_disc_without_guest_tools_is_said() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut req = discs(
        d.path(),
        &[("Windows 11 Pro", "Professional", 22631)],
        &["w11"],
        false,
    );
    req.disk_bus = DiskBus::Sata;
    let u = prepare(&host(d.path()), &req).expect("built");
    assert!(
        u.notes
            .iter()
            .any(|n| n.contains("virtio-win-guest-tools.exe")),
        "{:?}",
        u.notes
    );
    let m = IsoImage::open(&u.media).expect("opens");
    assert!(
        !m.exists("/$WinPEDriver$/viostor"),
        "a SATA disk needs no storage driver"
    );
    assert!(m.exists("/$WinPEDriver$/NetKVM/netkvm.inf"));
}
