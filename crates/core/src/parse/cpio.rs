//! The initramfs archive format: "newc" cpio (magic `070701`, or `070702` with
//! checksums), as the kernel unpacks it. An image is one or more archives
//! back to back, each ending in a `TRAILER!!!` entry and padded with zeros:
//! distributions put an uncompressed early archive first (CPU microcode) and
//! the compressed main one after it. This reads the uncompressed archives at
//! the start of `bytes` and says where the rest begins.

use super::ParseError;

/// One file in the archive; its data only when the caller asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpioEntry {
    /// As stored: relative, e.g. `etc/modprobe.d/vfio.conf`.
    pub name: String,
    pub mode: u32,
    pub size: usize,
    pub data: Option<Vec<u8>>,
}

impl CpioEntry {
    pub fn is_file(&self) -> bool {
        self.mode & 0o170000 == 0o100000
    }
}

const HEADER: usize = 110;

/// Field `i` of the header that starts at byte `at` (for the messages).
fn hex_field(h: &[u8], i: usize, at: u64) -> Result<usize, ParseError> {
    let f = h
        .get(6 + i * 8..6 + (i + 1) * 8)
        .ok_or_else(|| ParseError::new(format!("cpio header at byte {at} cut short")))?;
    let s = std::str::from_utf8(f)
        .map_err(|_| ParseError::new(format!("cpio header at byte {at}: field {i} is not text")))?;
    usize::from_str_radix(s, 16).map_err(|_| {
        ParseError::new(format!(
            "cpio header at byte {at}: field {i} {s:?} is not hex"
        ))
    })
}

/// The entries of the newc archives at the start of `bytes` (stopping at the
/// first byte that is neither zero padding nor another archive), and the
/// offset where that non-cpio rest begins (`bytes.len()` when there is none).
/// `keep(name)` says which files' data to copy out.
pub fn read_newc(
    bytes: &[u8],
    keep: impl Fn(&str) -> bool,
) -> Result<(Vec<CpioEntry>, usize), ParseError> {
    // One reader, one set of limits: the stream reader over the slice.
    let (entries, rest) = read_stream(bytes, keep, true)?;
    let rest = rest.map_or(bytes.len(), |r| {
        usize::try_from(r).map_or(bytes.len(), |r| r.min(bytes.len()))
    });
    Ok((entries, rest))
}

/// What a stream of archives may hold before it counts as hostile: the
/// names and kept data of the entries are held in memory.
const MAX_ENTRIES: usize = 1_000_000;
const MAX_NAME_BYTES: usize = 64 << 20;
const MAX_KEPT_BYTES: usize = 16 << 20;
/// The largest single file whose data is kept (a modprobe.d file is tiny).
const MAX_KEPT_FILE: usize = 1 << 20;

/// `read_newc` over a stream (a decompressor's output): only the kept files'
/// data is held, the rest is skipped as it passes, so a 300 MB initramfs
/// costs a few KiB of memory (at most a million entries, 64 MiB of names).
/// Reads to the end of the stream. A stream that ends without a
/// `TRAILER!!!` after its last entry was cut off (a damaged image, a
/// decompressor that died): an error, not a short list.
pub fn read_newc_stream(
    r: impl std::io::BufRead,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<CpioEntry>, ParseError> {
    read_stream(r, keep, false).map(|(entries, _)| entries)
}

/// The uncompressed archives at the start of a stream (an initramfs image
/// read from its file), and the offset where the rest (the compressed main
/// archive) begins: the stream is read past that point, so seek back to it.
pub fn read_newc_prefix(
    r: impl std::io::BufRead,
    keep: impl Fn(&str) -> bool,
) -> Result<(Vec<CpioEntry>, u64), ParseError> {
    let (entries, rest) = read_stream(r, keep, true)?;
    Ok((entries, rest.unwrap_or(0)))
}

/// Read as many bytes as there are into `buf`: fewer only at the end.
fn read_full(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The stream reader. `prefix`: stop at the first thing that is not an
/// archive and return where it starts, instead of calling it an error.
fn read_stream(
    mut r: impl std::io::BufRead,
    keep: impl Fn(&str) -> bool,
    prefix: bool,
) -> Result<(Vec<CpioEntry>, Option<u64>), ParseError> {
    use std::io::Read;
    let io = |e: std::io::Error| ParseError::new(format!("reading the archive: {e}"));
    let mut out = Vec::new();
    let (mut name_bytes_held, mut kept_bytes) = (0usize, 0usize);
    // Bytes consumed so far, for the 4-byte alignment and the messages.
    let mut pos: u64 = 0;
    // Whether the last thing read was an archive's end.
    let mut ended = true;
    let skip = |r: &mut dyn Read, n: u64, pos: &mut u64| -> Result<(), ParseError> {
        let copied = std::io::copy(&mut r.take(n), &mut std::io::sink()).map_err(io)?;
        *pos += copied;
        if copied < n {
            return Err(ParseError::new(format!(
                "the archive ends inside an entry at byte {pos}"
            )));
        }
        Ok(())
    };
    let cut_off = |pos: u64| {
        ParseError::new(format!(
            "the archive stops at byte {pos} without its end marker (cut off?)"
        ))
    };
    loop {
        // Zero padding (skipped a buffer at a time), then a header or the end.
        loop {
            let buf = r.fill_buf().map_err(io)?;
            if buf.is_empty() {
                return if ended {
                    Ok((out, prefix.then_some(pos)))
                } else {
                    Err(cut_off(pos))
                };
            }
            let zeros = buf.iter().take_while(|b| **b == 0).count();
            let done = zeros < buf.len();
            r.consume(zeros);
            pos += zeros as u64;
            if done {
                break;
            }
        }
        let at = pos;
        let mut h = [0u8; HEADER];
        let got = read_full(&mut r, &mut h).map_err(io)?;
        pos += got as u64;
        let magic = got >= 6 && (&h[..6] == b"070701" || &h[..6] == b"070702");
        if magic && got < HEADER {
            return Err(ParseError::new(format!(
                "the archive ends inside the header at byte {at}"
            )));
        }
        if !magic {
            return match (prefix, ended) {
                (true, true) => Ok((out, Some(at))),
                (true, false) => Err(cut_off(at)),
                (false, _) if got < 6 => Err(ParseError::new(format!(
                    "the archive ends inside the header at byte {at}"
                ))),
                (false, _) => Err(ParseError::new(format!(
                    "no cpio header at byte {at} of the decompressed archive"
                ))),
            };
        }
        let mode = u32::try_from(hex_field(&h, 1, at)?).unwrap_or(0);
        let size = hex_field(&h, 6, at)?;
        let name_len = hex_field(&h, 11, at)?;
        if name_len > 4096 {
            return Err(ParseError::new(format!(
                "cpio header at byte {at}: a name of {name_len} bytes"
            )));
        }
        let mut name_bytes = vec![0u8; name_len];
        r.read_exact(&mut name_bytes).map_err(|_| {
            ParseError::new(format!("the archive ends inside the name at byte {pos}"))
        })?;
        pos += name_len as u64;
        let pad = (4 - pos % 4) % 4;
        skip(&mut r, pad, &mut pos)?;
        let name = String::from_utf8_lossy(name_bytes.strip_suffix(&[0]).unwrap_or(&name_bytes))
            .into_owned();
        let name = name
            .trim_start_matches("./")
            .trim_start_matches('/')
            .to_string();
        let wanted = name != "TRAILER!!!"
            && keep(&name)
            && size <= MAX_KEPT_FILE
            && kept_bytes + size <= MAX_KEPT_BYTES;
        let data = if wanted {
            let mut d = vec![0u8; size];
            r.read_exact(&mut d)
                .map_err(|_| ParseError::new(format!("the archive ends inside {name}")))?;
            pos += size as u64;
            kept_bytes += size;
            Some(d)
        } else {
            skip(&mut r, size as u64, &mut pos)?;
            None
        };
        let pad = (4 - pos % 4) % 4;
        skip(&mut r, pad, &mut pos)?;
        ended = name == "TRAILER!!!";
        if ended {
            continue;
        }
        name_bytes_held += name.len();
        if out.len() >= MAX_ENTRIES || name_bytes_held > MAX_NAME_BYTES {
            return Err(ParseError::new(format!(
                "more than {} files (or {} MiB of names): too many to inspect",
                out.len(),
                MAX_NAME_BYTES >> 20
            )));
        }
        out.push(CpioEntry {
            name,
            mode,
            size,
            data,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One newc entry, as GNU cpio writes it (ino, uid… zero here).
    fn entry(name: &str, mode: u32, data: &[u8]) -> Vec<u8> {
        let mut v = format!(
            "070701{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}",
            1,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        )
        .into_bytes();
        v.extend_from_slice(name.as_bytes());
        v.push(0);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v.extend_from_slice(data);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn two_archives_then_the_rest() {
        let mut img = entry("kernel/x86/microcode/GenuineIntel.bin", 0o100644, b"ucode");
        img.extend(entry("TRAILER!!!", 0, b""));
        img.resize(512, 0);
        img.extend(entry(
            "etc/modprobe.d/vfio.conf",
            0o100644,
            b"options vfio-pci ids=10de:1b80\n",
        ));
        img.extend(entry("usr/lib/modules", 0o040755, b""));
        img.extend(entry("TRAILER!!!", 0, b""));
        let rest = img.len();
        img.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3]);
        let (entries, end) = read_newc(&img, |n| n.ends_with(".conf")).unwrap();
        assert_eq!(end, rest);
        assert_eq!(entries.len(), 3);
        assert!(entries[0].data.is_none());
        assert_eq!(
            entries[1].data.as_deref(),
            Some(&b"options vfio-pci ids=10de:1b80\n"[..])
        );
        assert!(entries[1].is_file() && !entries[2].is_file());
    }

    #[test]
    fn the_stream_reader_agrees() {
        let mut img = entry(
            "etc/modprobe.d/vfio.conf",
            0o100644,
            b"options vfio-pci ids=10de:1b80\n",
        );
        img.extend(entry(
            "usr/lib/modules/6.1/vfio-pci.ko",
            0o100644,
            &[7u8; 5000],
        ));
        img.extend(entry("TRAILER!!!", 0, b""));
        let first_end = img.len();
        img.resize(img.len() + 300, 0);
        img.extend(entry("init", 0o100755, b"#!/bin/sh"));
        img.extend(entry("TRAILER!!!", 0, b""));
        let keep = |n: &str| n.ends_with(".conf");
        let (whole, _) = read_newc(&img, keep).unwrap();
        let streamed = read_newc_stream(&img[..], keep).unwrap();
        assert_eq!(whole, streamed);
        assert_eq!(streamed.len(), 3);
        // Cut anywhere before the last end marker: an error, never a panic
        // or a silently short list.
        let last_end = img.len() - entry("TRAILER!!!", 0, b"").len();
        for cut in (1..last_end).step_by(37) {
            // Between the two archives the first one is whole: that is fine.
            let between = (first_end..=first_end + 300).contains(&cut);
            assert_eq!(
                read_newc_stream(&img[..cut], keep).is_err(),
                !between,
                "cut at {cut}"
            );
        }
        assert!(read_newc_stream(&b"garbage"[..], keep).is_err());
    }

    #[test]
    fn the_prefix_reader_stops_where_the_compressed_part_starts() {
        let mut img = entry("kernel/x86/microcode/AuthenticAMD.bin", 0o100644, b"ucode");
        img.extend(entry("TRAILER!!!", 0, b""));
        img.resize(1024, 0);
        let rest = img.len();
        img.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0]);
        let keep = |_: &str| false;
        // A small buffer: the header and the rest straddle buffer ends.
        let r = std::io::BufReader::with_capacity(7, &img[..]);
        let (entries, at) = read_newc_prefix(r, keep).unwrap();
        assert_eq!((entries.len(), at), (1, rest as u64));
        assert_eq!(read_newc(&img, keep).unwrap().1, rest);
        // No early archive at all: the rest starts at 0; only an archive: at its end.
        assert_eq!(
            read_newc_prefix(&b"\x28\xb5\x2f\xfd"[..], keep).unwrap().1,
            0
        );
        assert_eq!(read_newc_prefix(&img[..rest], keep).unwrap().1, rest as u64);
        // Cut inside the early archive: an error.
        assert!(read_newc_prefix(&img[..60], keep).is_err());
    }

    /// A buffered reader (8 KiB at a time) that counts how often it is
    /// asked for its buffer.
    struct Counted<'a> {
        inner: &'a [u8],
        reads: usize,
    }

    impl std::io::Read for Counted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            self.inner.read(buf)
        }
    }

    impl std::io::BufRead for Counted<'_> {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            self.reads += 1;
            Ok(&self.inner[..self.inner.len().min(8192)])
        }
        fn consume(&mut self, n: usize) {
            self.inner = &self.inner[n.min(self.inner.len())..];
        }
    }

    /// Zero padding is skipped a buffer at a time, not a byte or a header
    /// at a time: counted in reads (a timed test would measure the
    /// machine's load, not the code).
    #[test]
    fn megabytes_of_zero_padding_are_skipped_a_buffer_at_a_time() {
        let mut img = vec![0u8; 64 << 20];
        img.extend(entry("init", 0o100755, b"#!/bin/sh"));
        img.extend(entry("TRAILER!!!", 0, b""));
        let mut r = Counted {
            inner: &img[..],
            reads: 0,
        };
        let got = read_newc_stream(&mut r, |_| false).unwrap();
        assert_eq!(got.len(), 1);
        // 64 MiB of padding in looks of 8 KiB each (and a few for the
        // entries), not one per byte or per header's length.
        assert!(r.reads <= (64 << 20) / 8192 + 64, "{} reads", r.reads);
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        let good = entry("etc/a.conf", 0o100644, b"hello");
        for cut in [10, 50, 115, 126] {
            let r = read_newc(&good[..cut], |_| true);
            assert!(
                r.is_err() || r.as_ref().is_ok_and(|(e, _)| e.is_empty()),
                "{cut}: {r:?}"
            );
        }
        let mut bad = good.clone();
        bad[20] = b'Z';
        assert!(read_newc(&bad, |_| true).is_err());
        assert_eq!(
            read_newc(b"not cpio at all", |_| true).unwrap(),
            (vec![], 0)
        );
        assert_eq!(read_newc(b"", |_| true).unwrap(), (vec![], 0));
    }
}
