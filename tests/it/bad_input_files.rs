//! Bad input to the files the CLI writes and reads: snapshot and ROM
//! outputs never clobbered or written through a link, and a snapshot file a
//! root wherever a folder is.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::bad_input::{damaged_host, mkfifo};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

/// The CLI, killed after `secs`: a hang fails the test.
fn cli_within(args: &[&std::ffi::OsStr], secs: u64) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(secs) {
            child.kill().unwrap();
            panic!("{args:?} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    (status.code(), text)
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

#[test]
fn snapshot_and_rom_outputs_are_never_clobbered_or_written_through() {
    let host = damaged_host();
    let dir = tempfile::tempdir().unwrap();
    let root = host.path().as_os_str();
    let out = dir.path().join("host.tar.gz");
    fs::write(&out, "an older snapshot").unwrap();
    let snap = |target: &Path, force: bool| {
        let mut a = vec![os("--root"), root, os("snapshot"), target.as_os_str()];
        if force {
            a.push(os("--force"));
        }
        cli_within(&a, 120)
    };
    let (code, text) = snap(&out, false);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("already exists; pass --force"), "{text}");
    assert_eq!(fs::read_to_string(&out).unwrap(), "an older snapshot");
    let (code, text) = snap(&out, true);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        fs::read(&out).unwrap().starts_with(&[0x1f, 0x8b]),
        "a gzip now"
    );

    // A FIFO or a link at the target: refused at once, even with --force.
    let fifo = dir.path().join("pipe.tar.gz");
    mkfifo(&fifo);
    let (code, text) = snap(&fifo, true);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("FIFO"), "{text}");
    let victim = dir.path().join("victim");
    fs::write(&victim, "keep").unwrap();
    let link_out = dir.path().join("link.tar.gz");
    symlink(&victim, &link_out).unwrap();
    let (code, text) = snap(&link_out, true);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("symbolic link"), "{text}");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");

    // rom: a FIFO as --file is refused; --save does not overwrite.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rom = manifest.join("tests/fixtures/roms/efi-virtio.rom");
    let (code, text) = cli_within(&[os("rom"), os("--file"), fifo.as_os_str()], 60);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("FIFO"), "{text}");
    let saved = dir.path().join("saved.rom");
    fs::write(&saved, "mine").unwrap();
    let args = [
        os("rom"),
        os("--file"),
        rom.as_os_str(),
        os("--save"),
        saved.as_os_str(),
    ];
    let (code, text) = cli_within(&args, 60);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("already exists; pass --force"), "{text}");
    assert_eq!(fs::read_to_string(&saved).unwrap(), "mine");
    let mut forced = args.to_vec();
    forced.push(os("--force"));
    let (code, text) = cli_within(&forced, 60);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(fs::read(&saved).unwrap(), fs::read(&rom).unwrap());
    let left: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".part"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn a_snapshot_file_is_a_root_wherever_a_folder_is() {
    let host = damaged_host();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("host.tar.gz");
    vfio_assistant::capture::capture(&HostRoot::at(host.path()), &archive, false).unwrap();

    let opened = vfio_assistant::sysroot::open_root(&archive).unwrap();
    assert!(opened.is_unpacked());
    let from_file = scan(opened.root()).unwrap();
    let from_dir = scan(&HostRoot::at(host.path())).unwrap();
    assert_eq!(from_file.pci_devices, from_dir.pci_devices);
    assert_eq!(from_file.topology, from_dir.topology);
    let unpacked = opened.root().base().to_path_buf();
    drop(opened);
    assert!(!unpacked.exists(), "the temporary folder goes with it");

    let json = |root: &Path| {
        let (code, text) = cli_within(
            &[os("scan"), os("--json"), os("--root"), root.as_os_str()],
            120,
        );
        (code, text)
    };
    let (code, text) = json(&archive);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("\"0000:01:00.0\""), "{text}");

    // What is neither a folder nor a snapshot: a clear error, at once.
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let (code, text) = json(&fifo);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("FIFO"), "{text}");
    let plain = dir.path().join("notes.txt");
    fs::write(&plain, "hello").unwrap();
    let (code, text) = json(&plain);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("neither a folder nor a gzip archive"),
        "{text}"
    );
}
