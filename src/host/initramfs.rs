//! What the initramfs of the running kernel holds, for people who bind the GPU
//! to vfio-pci at boot: `options vfio-pci ids=…` and `softdep … pre: vfio-pci`
//! only work early if the image carries them (and vfio-pci itself), and the
//! image is only rebuilt when someone runs update-initramfs / dracut /
//! mkinitcpio. Editing /etc/modprobe.d and forgetting that is a classic.
//!
//! The image: uncompressed early archives (microcode) first, then the main
//! archive compressed with zstd, gzip, xz, lz4, bzip2 or lzo. The compressed
//! part goes through the distribution's own tool (`zstd -dc`, …), which is
//! installed wherever it built such an image.

use crate::parse::cpio::{CpioEntry, read_newc, read_newc_stream};
use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;
use std::io::Write;
use std::process::{Command, Stdio};

/// The largest image read (a distribution image is 30–150 MB).
const MAX_IMAGE: u64 = 1 << 30;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InitramfsInfo {
    /// The image read, as the host spells it.
    pub image: String,
    /// The main archive's compression (`zstd`, `gzip`…), None when plain.
    pub compression: Option<String>,
    pub files: usize,
    /// Paths of vfio modules in the image (`…/vfio-pci.ko.zst`).
    pub vfio_modules: Vec<String>,
    /// vfio-pci is built into the kernel (modules.builtin): no module needed.
    pub vfio_pci_builtin: bool,
    /// Non-comment lines that mention vfio, from the image's modprobe.d files:
    /// (file in the image, line).
    pub modprobe_lines: Vec<(String, String)>,
}

/// What the scan found out about the initramfs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum InitramfsState {
    /// No boot-time vfio binding in /etc/modprobe.d: nothing to compare.
    #[default]
    NotChecked,
    /// No image at the usual places (or the release is unknown).
    NotFound {
        looked: Vec<String>,
    },
    Unreadable {
        image: String,
        reason: String,
    },
    Read(InitramfsInfo),
}

/// Does the modprobe configuration bind anything to vfio-pci at boot?
pub fn binds_at_boot(lines: &[(String, String)]) -> bool {
    lines.iter().any(|(_, l)| {
        let l = l.replace('_', "-");
        (l.contains("vfio-pci") && l.contains("ids="))
            || (l.starts_with("softdep") && l.contains("vfio-pci"))
    })
}

/// Read the running kernel's image when boot-time binding is configured.
pub fn read_state(
    root: &HostRoot,
    release: Option<&str>,
    modprobe: &[(String, String)],
) -> InitramfsState {
    if !binds_at_boot(modprobe) {
        return InitramfsState::NotChecked;
    }
    let Some(release) = release else {
        return InitramfsState::NotFound { looked: Vec::new() };
    };
    let Some(image) = find_image(root, release) else {
        return InitramfsState::NotFound {
            looked: candidates(release)
                .iter()
                .map(ToString::to_string)
                .collect(),
        };
    };
    match read_initramfs(root, &image, release) {
        Ok(info) => InitramfsState::Read(info),
        Err(reason) => InitramfsState::Unreadable {
            image: image.to_string(),
            reason,
        },
    }
}

/// Where distributions put the image for kernel `release`.
pub fn candidates(release: &str) -> Vec<HostPath> {
    vec![
        HostPath::boot(&format!("initrd.img-{release}")),
        HostPath::boot(&format!("initramfs-{release}.img")),
        HostPath::boot(&format!("initrd-{release}")),
        HostPath::boot("initramfs-linux.img"),
        HostPath::boot("initrd.img"),
    ]
}

fn compression_of(b: &[u8]) -> Option<(&'static str, &'static [&'static str])> {
    let table: [(&[u8], &str, &[&str]); 7] = [
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd", &["zstd", "-dcq"]),
        (&[0x1f, 0x8b], "gzip", &["gzip", "-dc"]),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz", &["xz", "-dc"]),
        (&[0x02, 0x21, 0x4c, 0x18], "lz4", &["lz4", "-dcq"]),
        (b"BZh", "bzip2", &["bzip2", "-dc"]),
        (&[0x89, b'L', b'Z', b'O'], "lzo", &["lzop", "-dc"]),
        (&[0x5d, 0, 0], "lzma", &["xz", "--format=lzma", "-dc"]),
    ];
    table
        .into_iter()
        .find(|(magic, _, _)| b.starts_with(magic))
        .map(|(_, name, cmd)| (name, cmd))
}

/// The entries of the archive `cmd` decompresses from `input`, read as the
/// decompressor writes them (only the kept files are held in memory).
fn decompressed_entries(cmd: &[&str], input: &[u8]) -> Result<Vec<CpioEntry>, String> {
    let (prog, args) = cmd.split_first().ok_or("no command")?;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{prog} is needed to read this image: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let entries = std::thread::scope(|s| {
        // Write and read at once: either side could fill the pipe.
        s.spawn(move || {
            let _ = stdin.write_all(input);
        });
        let entries = read_newc_stream(stdout, wanted);
        // `stdout` is closed here: a decompressor still writing gets EPIPE and
        // stops, so the writer above cannot block on a full pipe.
        entries
    });
    let status = child.wait().map_err(|e| format!("{prog}: {e}"))?;
    match entries {
        Ok(e) if !e.is_empty() => Ok(e),
        Ok(_) => Err(format!("{prog} gave no archive ({status})")),
        Err(e) => Err(format!("{prog}: {e}")),
    }
}

fn wanted(name: &str) -> bool {
    name.ends_with(".conf") && name.contains("modprobe.d/")
}

/// Read `image` (through `root`), with the running kernel's `release` for
/// modules.builtin.
pub fn read_initramfs(
    root: &HostRoot,
    image: &HostPath,
    release: &str,
) -> Result<InitramfsInfo, String> {
    let bytes = root
        .read_bytes(image, MAX_IMAGE)
        .map_err(|e| e.to_string())?;
    let mut info = InitramfsInfo {
        image: image.to_string(),
        ..InitramfsInfo::default()
    };
    let (mut entries, rest) = read_newc(&bytes, wanted).map_err(|e| format!("{image}: {e}"))?;
    if rest < bytes.len() {
        let tail = &bytes[rest..];
        let (name, cmd) = compression_of(tail).ok_or_else(|| {
            format!("{image}: unknown data after the early archive at byte {rest}")
        })?;
        info.compression = Some(name.to_string());
        let more = decompressed_entries(cmd, tail).map_err(|e| format!("{image} ({name}): {e}"))?;
        entries.extend(more);
    }
    info.files = entries.len();
    for e in &entries {
        let base = e.name.rsplit('/').next().unwrap_or("");
        if base.starts_with("vfio") && base.contains(".ko") {
            info.vfio_modules.push(e.name.clone());
        }
        if let Some(data) = &e.data {
            for line in String::from_utf8_lossy(data).lines().map(str::trim) {
                if !line.starts_with('#') && line.contains("vfio") {
                    info.modprobe_lines.push((e.name.clone(), line.to_string()));
                }
            }
        }
    }
    // /lib/modules on a split-usr system, /usr/lib/modules on a merged one.
    let builtin = [
        Some(HostPath::usr(&format!(
            "lib/modules/{release}/modules.builtin"
        ))),
        HostPath::from_absolute(&format!("/lib/modules/{release}/modules.builtin")),
    ];
    info.vfio_pci_builtin = builtin.iter().flatten().any(|p| {
        root.read_text(p)
            .is_ok_and(|t| t.lines().any(|l| l.trim_end().ends_with("/vfio-pci.ko")))
    });
    Ok(info)
}

/// The image for the running kernel, when one of the usual paths exists.
pub fn find_image(root: &HostRoot, release: &str) -> Option<HostPath> {
    candidates(release).into_iter().find(|p| root.exists(p))
}
