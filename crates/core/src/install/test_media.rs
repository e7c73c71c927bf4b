//! Installer media for tests, made with the real tools (wimlib's
//! `wimlib-imagex`, genisoimage, xorriso; `scripts/setup.sh test` installs
//! them): a Windows-like installer (UDF, an install.wim carrying Windows'
//! image metadata) and a virtio-win-like driver disc (ISO 9660 + Joliet).
//! Built only for tests (`cfg(test)` or the `test-hooks` feature), so the
//! app's integration tests make the same discs as the core's.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test fixtures fail loudly

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .expect("the tool runs (scripts/setup.sh test installs it)");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Windows installer ISO with editions (name, edition id, build).
pub fn windows_iso(dir: &Path, editions: &[(&str, &str, u32)]) -> PathBuf {
    windows_iso_with(dir, editions, None)
}

/// The same, bootable by UEFI the way Microsoft's discs are: an El Torito
/// EFI image (`efi/microsoft/boot/efisys.bin`, a FAT image made with
/// dosfstools and mtools) whose `\EFI\BOOT\BOOTX64.EFI` is `loader`.
pub fn bootable_windows_iso(dir: &Path, editions: &[(&str, &str, u32)], loader: &Path) -> PathBuf {
    windows_iso_with(dir, editions, Some(loader))
}

fn windows_iso_with(dir: &Path, editions: &[(&str, &str, u32)], loader: Option<&Path>) -> PathBuf {
    let tree = dir.join("win");
    let payload = dir.join("payload");
    fs::create_dir_all(tree.join("sources")).expect("mkdir");
    fs::create_dir_all(&payload).expect("mkdir");
    fs::write(payload.join("hello.txt"), "hi").expect("write");
    fs::write(tree.join("setup.exe"), "MZ").expect("write");
    let wim = tree.join("sources/install.wim");
    for (i, (name, id, build)) in editions.iter().enumerate() {
        let verb = if i == 0 { "capture" } else { "append" };
        run(Command::new("wimlib-imagex")
            .arg(verb)
            .arg(&payload)
            .arg(&wim)
            .arg(name));
        run(Command::new("wimlib-imagex")
            .arg("info")
            .arg(&wim)
            .arg((i + 1).to_string())
            .args([
                "--image-property",
                &format!("WINDOWS/EDITIONID={id}"),
                "--image-property",
                &format!("WINDOWS/VERSION/BUILD={build}"),
                "--image-property",
                "WINDOWS/ARCH=9",
                "--image-property",
                "WINDOWS/INSTALLATIONTYPE=Client",
                "--image-property",
                "WINDOWS/LANGUAGES/LANGUAGE=en-US",
            ]));
    }
    let iso = dir.join("Win.iso");
    let mut cmd = Command::new("genisoimage");
    cmd.args(["-quiet", "-udf", "-V", "CCCOMA_X64FRE_EN-US_DV9"]);
    if let Some(loader) = loader {
        let boot = tree.join("efi/microsoft/boot");
        fs::create_dir_all(&boot).expect("mkdir");
        let img = boot.join("efisys.bin");
        run(Command::new("mkfs.vfat").arg("-C").arg(&img).arg("2880"));
        run(Command::new("mmd")
            .arg("-i")
            .arg(&img)
            .args(["::/EFI", "::/EFI/BOOT"]));
        run(Command::new("mcopy")
            .arg("-i")
            .arg(&img)
            .arg(loader)
            .arg("::/EFI/BOOT/BOOTX64.EFI"));
        cmd.args(["-e", "efi/microsoft/boot/efisys.bin", "-no-emul-boot"]);
    }
    run(cmd.arg("-o").arg(&iso).arg(&tree));
    iso
}

/// A virtio-win ISO with the folders of `versions` ("w10", "w11").
pub fn virtio_iso(dir: &Path, versions: &[&str], tools: bool) -> PathBuf {
    let tree = dir.join("virtio");
    for v in versions {
        for (drv, inf) in [
            ("viostor", "viostor.inf"),
            ("vioscsi", "vioscsi.inf"),
            ("NetKVM", "netkvm.inf"),
            ("vioserial", "vioser.inf"),
            ("Balloon", "balloon.inf"),
        ] {
            let d = tree.join(drv).join(v).join("amd64");
            fs::create_dir_all(&d).expect("mkdir");
            fs::write(d.join(inf), format!("; {drv} for {v}\n")).expect("write");
            fs::write(d.join(format!("{drv}.sys")), "driver").expect("write");
        }
    }
    if tools {
        fs::write(tree.join("virtio-win-guest-tools.exe"), "MZ tools").expect("write");
    }
    let iso = dir.join("virtio-win.iso");
    run(Command::new("xorriso")
        .args([
            "-as",
            "mkisofs",
            "-quiet",
            "-J",
            "-r",
            "-V",
            "virtio-win-0.1.266",
            "-o",
        ])
        .arg(&iso)
        .arg(&tree));
    iso
}
