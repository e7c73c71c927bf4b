//! The image's compressed part unpacked, bounded: gzip here (every member,
//! as `gzip -dc` reads them), the rest through the distribution's own tool
//! from the system's folders, stopped after `DECOMPRESS_TIMEOUT`; either way
//! at most `unpacked_cap` bytes, read as a stream.

use super::{TOO_LARGE, wanted};
use crate::parse::cpio::{CpioEntry, read_newc_stream};
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The most the compressed part may unpack to: 16 times its size and 64 MiB
/// more (real images unpack to 2–5 times), at most 2 GiB.
pub(super) fn unpacked_cap(compressed: u64) -> u64 {
    compressed
        .saturating_mul(16)
        .saturating_add(64 << 20)
        .min(2 << 30)
}

/// Why the compressed part did not unpack.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unpacking {
    #[error("{prog} is needed to read this image: {message}")]
    NoProgram { prog: String, message: String },
    #[error("{prog}: no pipes")]
    NoPipes { prog: String },
    #[error("{prog} took over {} s and was stopped", DECOMPRESS_TIMEOUT.as_secs())]
    TimedOut { prog: String },
    #[error("{prog} gave no archive ({status})")]
    NoArchive { prog: String, status: String },
    #[error("no archive in it")]
    NoGzipArchive,
    /// The decompressor's output, or gzip's, was no archive we read (or
    /// unpacked past the cap).
    #[error("{0}")]
    Stream(String),
}

/// A reader that fails once more than `limit` bytes came through it.
struct Capped<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::other(format!(
                "unpacks to more than {} MiB: {TOO_LARGE} (a real image unpacks to a few times its size)",
                self.limit >> 20
            ))
        })?;
        Ok(n)
    }
}

/// The gzip members one after another (as `gzip -dc` reads them), zero
/// padding between them skipped, anything else after them ignored.
struct GzMembers<R: BufRead> {
    current: Option<flate2::bufread::GzDecoder<R>>,
    between: Option<R>,
}

impl<R: BufRead> Read for GzMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(d) = &mut self.current {
                let n = d.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.between = self
                    .current
                    .take()
                    .map(flate2::bufread::GzDecoder::into_inner);
            }
            let Some(mut r) = self.between.take() else {
                return Ok(0);
            };
            loop {
                let b = r.fill_buf()?;
                let zeros = b.iter().take_while(|x| **x == 0).count();
                if zeros == 0 {
                    break;
                }
                r.consume(zeros);
            }
            if !r.fill_buf()?.starts_with(&[0x1f, 0x8b]) {
                return Ok(0);
            }
            self.current = Some(flate2::bufread::GzDecoder::new(r));
        }
    }
}

pub(super) fn compression_of(b: &[u8]) -> Option<(&'static str, &'static [&'static str])> {
    let table: [(&[u8], &str, &[&str]); 7] = [
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd", &["zstd", "-dcq"]),
        (&[0x1f, 0x8b], "gzip", &[]), // read here, no tool
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
/// decompressor writes them (only the kept files are held in memory), at
/// most `cap` bytes of it.
pub(super) fn decompressed_entries(
    cmd: &[&str],
    input: impl Read + Send,
    cap: u64,
) -> Result<Vec<CpioEntry>, Unpacking> {
    let Some((prog, args)) = cmd.split_first() else {
        return Err(Unpacking::Stream("no decompressor named".into()));
    };
    // From the system's folders with a clean environment: the scan runs as
    // whoever asked, and as root in the helper; a `zstd` first on their
    // PATH is never the one run.
    let mut child = crate::syspath::command(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Unpacking::NoProgram {
            prog: prog.to_string(),
            message: e.to_string(),
        })?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let (Some(mut stdin), Some(stdout)) = (stdin, stdout) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Unpacking::NoPipes {
            prog: prog.to_string(),
        });
    };
    let pid = child.id();
    let done = AtomicBool::new(false);
    let timed_out = AtomicBool::new(false);
    let entries = std::thread::scope(|s| {
        // Write and read at once: either side could fill the pipe.
        s.spawn(move || {
            let mut input = input;
            let _ = std::io::copy(&mut input, &mut stdin);
        });
        // A watchdog: kill the decompressor if it takes too long. It is only
        // ever signalled before it is reaped below (`done` is set first).
        s.spawn(|| {
            let start = Instant::now();
            while !done.load(Ordering::Acquire) {
                if start.elapsed() > DECOMPRESS_TIMEOUT {
                    timed_out.store(true, Ordering::Release);
                    // Our own child, not yet reaped: its pid is still its.
                    if let Some(pid) = i32::try_from(pid)
                        .ok()
                        .and_then(rustix::process::Pid::from_raw)
                    {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let capped = Capped {
            inner: stdout,
            left: cap,
            limit: cap,
        };
        let entries = read_newc_stream(BufReader::with_capacity(1 << 16, capped), wanted);
        // `stdout` is closed here: a decompressor still writing gets EPIPE and
        // stops, so the writer above cannot block on a full pipe.
        done.store(true, Ordering::Release);
        entries
    });
    // Past the cap the decompressor may still be writing: stop it.
    if entries.is_err() {
        let _ = child.kill();
    }
    let status = child
        .wait()
        .map_err(|e| Unpacking::Stream(format!("{prog}: {e}")))?;
    if timed_out.load(Ordering::Acquire) {
        return Err(Unpacking::TimedOut {
            prog: prog.to_string(),
        });
    }
    match entries {
        Ok(e) if !e.is_empty() => Ok(e),
        Ok(_) => Err(Unpacking::NoArchive {
            prog: prog.to_string(),
            status: status.to_string(),
        }),
        Err(e) => Err(Unpacking::Stream(format!("{prog}: {e}"))),
    }
}

/// The entries of a gzip-compressed archive, unpacked here, at most `cap` bytes.
pub(super) fn gunzipped_entries(
    input: impl BufRead,
    cap: u64,
) -> Result<Vec<CpioEntry>, Unpacking> {
    let members = GzMembers {
        current: Some(flate2::bufread::GzDecoder::new(input)),
        between: None,
    };
    let capped = Capped {
        inner: members,
        left: cap,
        limit: cap,
    };
    match read_newc_stream(BufReader::with_capacity(1 << 16, capped), wanted) {
        Ok(e) if !e.is_empty() => Ok(e),
        Ok(_) => Err(Unpacking::NoGzipArchive),
        Err(e) => Err(Unpacking::Stream(e.to_string())),
    }
}
