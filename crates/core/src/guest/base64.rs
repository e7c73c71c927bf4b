//! Standard base64 (RFC 4648 §4, `=` padding), as qemu-ga encodes
//! `guest-exec-status`'s `out-data` and `err-data`: decoded with a cap, so a
//! guest that sends a mountain of output costs a bounded amount of memory.

/// Decode `text` (whitespace ignored); `None` when it is not base64. At most
/// `cap` bytes come back; `truncated` says when there were more.
pub(crate) fn decode(text: &str, cap: usize) -> Option<(Vec<u8>, bool)> {
    let mut out = Vec::with_capacity((text.len() / 4 * 3).min(cap));
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    let mut padding = 0usize;
    let mut truncated = false;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding += 1;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        // Data after padding is not base64.
        if padding > 0 {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            let byte = u8::try_from((acc >> bits) & 0xff).unwrap_or(0);
            if out.len() < cap {
                out.push(byte);
            } else {
                truncated = true;
            }
        }
    }
    if padding > 2 || bits >= 6 {
        return None;
    }
    Some((out, truncated))
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn decodes_what_qemu_ga_sends() {
        // qemu-ga's reply to `echo hi` (seen from a real qemu-ga here).
        assert_eq!(decode("aGkK", 100), Some((b"hi\n".to_vec(), false)));
        assert_eq!(decode("aGk=", 100), Some((b"hi".to_vec(), false)));
        assert_eq!(decode("aA==", 100), Some((b"h".to_vec(), false)));
        assert_eq!(decode("", 100), Some((Vec::new(), false)));
    }

    #[test]
    fn caps_and_refuses() {
        assert_eq!(decode("aGkK", 2), Some((b"hi".to_vec(), true)));
        assert_eq!(decode("a?kK", 100), None);
        assert_eq!(decode("aG=k", 100), None);
        assert_eq!(decode("a", 100), None);
    }
}
