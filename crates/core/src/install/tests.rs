//! Installer media built at test time with the real tools (genisoimage,
//! xorriso, wimlib-imagex: `scripts/setup.sh test` installs them), read back
//! through `install`: Windows-like UDF images (WIM and ESD), a virtio-win-like
//! ISO 9660 + Joliet disc, and broken or hostile ones.

mod hostile;
mod parsers;
mod virtio;
mod windows;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs a tool, failing the test with its output when it fails or is missing.
fn run(cmd: &mut Command) {
    let tool = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{tool} could not run ({e}); `scripts/setup.sh test` installs genisoimage, xorriso and wimtools")
    });
    assert!(
        out.status.success(),
        "{tool} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

/// One Windows image to put into a WIM.
struct Win<'a> {
    name: &'a str,
    build: u32,
    edition: &'a str,
    arch: u32,
    kind: &'a str,
    language: &'a str,
}

const WIN11_PRO: Win = Win {
    name: "Windows 11 Pro",
    build: 22631,
    edition: "Professional",
    arch: 9,
    kind: "Client",
    language: "en-US",
};
const WIN11_HOME: Win = Win {
    name: "Windows 11 Home",
    build: 22631,
    edition: "Core",
    arch: 9,
    kind: "Client",
    language: "en-US",
};

/// A WIM at `to` holding `images` (captured from a tiny tree, then given
/// their WINDOWS properties as Microsoft's media carry them).
fn make_wim(work: &Path, to: &Path, images: &[Win]) {
    let payload = work.join("payload");
    write(&payload.join("Windows/System32/config/SOFTWARE"), b"hive");
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    for (i, img) in images.iter().enumerate() {
        let verb = if i == 0 { "capture" } else { "append" };
        run(Command::new("wimlib-imagex")
            .arg(verb)
            .arg(&payload)
            .arg(to)
            .arg(img.name));
        let prop = |k: &str, v: String| format!("WINDOWS/{k}={v}");
        run(Command::new("wimlib-imagex")
            .arg("info")
            .arg(to)
            .arg((i + 1).to_string())
            .args([
                "--image-property",
                &prop("VERSION/BUILD", img.build.to_string()),
            ])
            .args(["--image-property", &prop("EDITIONID", img.edition.into())])
            .args([
                "--image-property",
                &prop("INSTALLATIONTYPE", img.kind.into()),
            ])
            .args(["--image-property", &prop("ARCH", img.arch.to_string())])
            .args([
                "--image-property",
                &prop("LANGUAGES/LANGUAGE", img.language.into()),
            ]));
    }
}

/// The tree of a Windows installer around an install image at
/// `sources/{name}`, as a folder (README.TXT at the top, like Microsoft's).
fn windows_tree(work: &Path, wim: &Path, name: &str) -> PathBuf {
    let cd = work.join("cd");
    write(
        &cd.join("README.TXT"),
        b"This disc contains a \"UDF\" file system.\r\n",
    );
    write(&cd.join("setup.exe"), b"MZ setup");
    write(&cd.join("efi/boot/bootx64.efi"), b"MZ efi");
    write(&cd.join("sources/boot.wim"), b"MSWIM\0\0\0 not really");
    std::fs::copy(wim, cd.join("sources").join(name)).unwrap();
    cd
}

/// A UDF + ISO 9660 image of `tree` by genisoimage; with `udf_only`, the
/// ISO 9660 part leaves `sources` out (as on Windows media, whose ISO 9660
/// part holds only README.TXT), so only UDF finds the install image.
fn genisoimage_udf(tree: &Path, out: &Path, label: &str, udf_only: bool) {
    let mut cmd = Command::new("genisoimage");
    cmd.args(["-quiet", "-udf", "-V", label, "-o"]).arg(out);
    if udf_only {
        cmd.args(["-hide", "sources", "-hide", "setup.exe"]);
    }
    run(cmd.arg(tree));
}

/// An ISO 9660 image of `tree` by xorriso's mkisofs emulation with `args`.
fn xorriso_iso(tree: &Path, out: &Path, args: &[&str]) {
    run(Command::new("xorriso")
        .args(["-as", "mkisofs", "-quiet"])
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(tree));
}

/// A Windows 11 installer image (two images in sources/install.wim) whose
/// install image only UDF can see.
fn windows11_iso(work: &Path) -> PathBuf {
    let wim = work.join("install.wim");
    make_wim(work, &wim, &[WIN11_PRO, WIN11_HOME]);
    let tree = windows_tree(work, &wim, "install.wim");
    let iso = work.join("win11.iso");
    genisoimage_udf(&tree, &iso, "CCCOMA_X64FRE_EN-US_DV9", true);
    iso
}

/// Where `needle` is in `hay`, every time.
fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

fn utf16be(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// Reseals a UDF descriptor after an edit: its CRC, then its tag checksum.
pub(super) fn reseal(desc: &mut [u8]) {
    let crc_len = usize::from(u16::from_le_bytes([desc[10], desc[11]]));
    let crc = crate::install::udf::crc_itu(&desc[16..16 + crc_len]);
    desc[8..10].copy_from_slice(&crc.to_le_bytes());
    desc[4] = 0;
    desc[4] = desc[..16].iter().fold(0u8, |a, b| a.wrapping_add(*b));
}
