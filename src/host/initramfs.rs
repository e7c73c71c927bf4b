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
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// The largest image read (a distribution image is 30–150 MB).
const MAX_IMAGE: u64 = 1 << 30;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InitramfsInfo {
    /// The image read, as the host spells it.
    pub image: String,
    /// The image has a generic name (`initrd.img`, `initramfs-linux.img`):
    /// it may belong to another installed kernel than the running one.
    pub generic_name: bool,
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
        Ok(info) => InitramfsState::Read(InitramfsInfo {
            generic_name: !image.to_string().contains(release),
            ..info
        }),
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

/// How long a decompressor may take (xz or bzip2 on a big image are slow;
/// a hung one must not hang the scan).
const DECOMPRESS_TIMEOUT: Duration = Duration::from_secs(30);

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
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let (Some(mut stdin), Some(stdout)) = (stdin, stdout) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("{prog}: no pipes"));
    };
    let pid = child.id();
    let done = AtomicBool::new(false);
    let timed_out = AtomicBool::new(false);
    let entries = std::thread::scope(|s| {
        // Write and read at once: either side could fill the pipe.
        s.spawn(move || {
            let _ = stdin.write_all(input);
        });
        // A watchdog: kill the decompressor if it takes too long. It is only
        // ever signalled before it is reaped below (`done` is set first).
        s.spawn(|| {
            let start = Instant::now();
            while !done.load(Ordering::Acquire) {
                if start.elapsed() > DECOMPRESS_TIMEOUT {
                    timed_out.store(true, Ordering::Release);
                    if let Ok(pid) = i32::try_from(pid) {
                        // SAFETY: kill(2) on our own child, not yet reaped.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let entries = read_newc_stream(stdout, wanted);
        // `stdout` is closed here: a decompressor still writing gets EPIPE and
        // stops, so the writer above cannot block on a full pipe.
        done.store(true, Ordering::Release);
        entries
    });
    let status = child.wait().map_err(|e| format!("{prog}: {e}"))?;
    if timed_out.load(Ordering::Acquire) {
        return Err(format!(
            "{prog} took over {} s and was stopped",
            DECOMPRESS_TIMEOUT.as_secs()
        ));
    }
    match entries {
        Ok(e) if !e.is_empty() => Ok(e),
        Ok(_) => Err(format!("{prog} gave no archive ({status})")),
        Err(e) => Err(format!("{prog}: {e}")),
    }
}

/// What was read from an image, by (file, size, modification time): the app
/// scans again on every Rescan, and decompressing 100 MB each time is waste.
type Cache = Mutex<HashMap<(std::path::PathBuf, u64, Option<SystemTime>), InitramfsInfo>>;
static CACHE: OnceLock<Cache> = OnceLock::new();

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
    let file = root.resolve(image);
    let key = root
        .metadata(image)
        .ok()
        .map(|m| (file.clone(), m.len(), m.modified().ok()));
    let cached = key.as_ref().and_then(|k| {
        CACHE
            .get_or_init(Default::default)
            .lock()
            .ok()
            .and_then(|c| c.get(k).cloned())
    });
    let mut info = match cached {
        Some(hit) => hit,
        None => {
            let info = read_archive(root, image)?;
            if let (Some(k), Ok(mut c)) = (key, CACHE.get_or_init(Default::default).lock()) {
                c.insert(k, info.clone());
            }
            info
        }
    };
    // /lib/modules on a split-usr system, /usr/lib/modules on a merged one
    // (read every time: the cache is for the image only).
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

/// The image's archives: file count, vfio modules, modprobe.d lines.
fn read_archive(root: &HostRoot, image: &HostPath) -> Result<InitramfsInfo, String> {
    let bytes = root
        .read_bytes(image, MAX_IMAGE)
        .map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        // A snapshot keeps binary files as empty placeholders.
        return Err(format!(
            "{image} is empty (a captured host keeps no image contents)"
        ));
    }
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
    if entries.is_empty() {
        return Err(format!("{image}: no files in it"));
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
    Ok(info)
}

/// The image for the running kernel: the release's own names first, then
/// the generic ones (a dangling link does not count).
pub fn find_image(root: &HostRoot, release: &str) -> Option<HostPath> {
    candidates(release).into_iter().find(|p| root.is_file(p))
}
