//! The virtio-win disc fetched with the user's consent, when no
//! distribution package put it on this machine: downloaded with curl into
//! a hidden file beside the target, its size followed for the progress,
//! checked against the SHA-256 its publisher puts beside it, and renamed
//! into place only then. A missing or different checksum, a failed or
//! cancelled download leaves nothing behind. It is never bundled.
//!
//! Upstream (Fedora's virtio-win builds) keeps the newest stable disc at a
//! fixed address; `Source::stable()` names it and its checksum file, and a
//! caller may name another pair (an internal mirror).

use sha2::{Digest, Sha256};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where to fetch from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub url: String,
    /// A file whose first 64-hex-digit word is the disc's SHA-256.
    pub checksum_url: String,
}

impl Source {
    /// Fedora's newest stable virtio-win disc and its checksum.
    pub fn stable() -> Source {
        let base = "https://fedorapeople.org/groups/virt/virtio-win/direct-downloads/stable-virtio";
        Source {
            url: format!("{base}/virtio-win.iso"),
            checksum_url: format!("{base}/virtio-win.iso.sha256"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("curl could not be started ({0}): install curl")]
    NoCurl(std::io::Error),
    #[error("{url} could not be fetched: {why}")]
    Fetch { url: String, why: String },
    #[error("{url} holds no SHA-256 (64 hex digits): the disc is not used unchecked")]
    NoChecksum { url: String },
    #[error(
        "the download's SHA-256 is {got}, but {url} says {want}: the file was damaged or changed on the way, and was deleted"
    )]
    Mismatch {
        url: String,
        want: String,
        got: String,
    },
    #[error("cancelled: nothing was kept")]
    Cancelled,
    #[error("{what} {path}: {err}")]
    Io {
        what: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
}

/// At most this much is read of a checksum file.
const MAX_CHECKSUM: u64 = 4096;
/// The largest disc accepted (virtio-win's is ~700 MiB).
const MAX_DISC: u64 = 4 << 30;

fn curl() -> Command {
    let mut c = Command::new(crate::syspath::program("curl"));
    crate::syspath::clean(&mut c);
    c.args([
        "--fail",
        "--location",
        "--silent",
        "--show-error",
        "--proto",
        "=https,http",
    ]);
    c
}

fn fetch_text(url: &str) -> Result<String, DownloadError> {
    let out = curl()
        .args([
            "--max-filesize",
            &MAX_CHECKSUM.to_string(),
            "--max-time",
            "60",
            "--",
            url,
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(DownloadError::NoCurl)?;
    if !out.status.success() {
        return Err(DownloadError::Fetch {
            url: url.into(),
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The first word of 64 hex digits, lower-cased.
pub fn checksum_in(text: &str) -> Option<String> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .find(|w| w.len() == 64)
        .map(str::to_ascii_lowercase)
}

/// The size the server announces, when it does.
fn announced_size(url: &str) -> Option<u64> {
    let out = curl()
        .args(["--head", "--max-time", "30", "--", url])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .next_back()
}

fn sha256_of(path: &Path) -> Result<String, DownloadError> {
    let io = |err| DownloadError::Io {
        what: "reading",
        path: path.to_path_buf(),
        err,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Fetch `src` to `to`. `progress(bytes, total)` is called about twice a
/// second; `cancel` stops it.
pub fn download(
    src: &Source,
    to: &Path,
    progress: &mut dyn FnMut(u64, Option<u64>),
    cancel: &AtomicBool,
) -> Result<PathBuf, DownloadError> {
    // The checksum first: without one the disc is not fetched at all.
    let want =
        checksum_in(&fetch_text(&src.checksum_url)?).ok_or_else(|| DownloadError::NoChecksum {
            url: src.checksum_url.clone(),
        })?;
    let dir = match to.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let part = tempfile::Builder::new()
        .prefix(".virtio-win-")
        .suffix(".part")
        .tempfile_in(dir)
        .map_err(|err| DownloadError::Io {
            what: "creating a file in",
            path: dir.to_path_buf(),
            err,
        })?;
    let total = announced_size(&src.url);
    let mut child = curl()
        .args(["--max-filesize", &MAX_DISC.to_string(), "--output"])
        .arg(part.path())
        .args(["--", &src.url])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(DownloadError::NoCurl)?;
    let status = loop {
        if cancel.load(Ordering::Relaxed) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(DownloadError::Cancelled);
        }
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => {
                return Err(DownloadError::Fetch {
                    url: src.url.clone(),
                    why: e.to_string(),
                });
            }
        }
        progress(
            std::fs::metadata(part.path()).map(|m| m.len()).unwrap_or(0),
            total,
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    if !status.success() {
        let mut why = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut why);
        }
        return Err(DownloadError::Fetch {
            url: src.url.clone(),
            why: why.trim().to_string(),
        });
    }
    let size = std::fs::metadata(part.path()).map(|m| m.len()).unwrap_or(0);
    progress(size, total.or(Some(size)));
    let got = sha256_of(part.path())?;
    if got != want {
        return Err(DownloadError::Mismatch {
            url: src.checksum_url.clone(),
            want,
            got,
        });
    }
    part.persist(to).map_err(|e| DownloadError::Io {
        what: "moving the download to",
        path: to.to_path_buf(),
        err: e.error,
    })?;
    Ok(to.to_path_buf())
}

#[cfg(test)]
mod tests;
