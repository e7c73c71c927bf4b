//! Sizes in words (a leaf: the checks, the pin planner and both faces use
//! it, and it uses nothing of ours).

/// KiB as a short human size.
pub fn human_kib(kib: u64) -> String {
    if kib >= 1024 * 1024 && kib.is_multiple_of(1024 * 1024) {
        format!("{} GiB", kib / (1024 * 1024))
    } else if kib >= 1024 * 1024 {
        format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0))
    } else if kib >= 1024 {
        let mib = kib as f64 / 1024.0;
        if mib.fract() == 0.0 {
            format!("{mib:.0} MiB")
        } else {
            format!("{mib:.1} MiB")
        }
    } else {
        format!("{kib} KiB")
    }
}

/// `n` and the word, plural when `n` is not 1: "1 warning", "2 warnings"
/// (`word` takes an s; say the irregular ones yourself).
pub fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_sizes_have_no_decimals() {
        assert_eq!(human_kib(16 * 1024 * 1024), "16 GiB");
        assert_eq!(human_kib(1536 * 1024), "1.5 GiB");
        assert_eq!(human_kib(2048), "2 MiB");
        assert_eq!(human_kib(1536), "1.5 MiB");
        assert_eq!(human_kib(4), "4 KiB");
    }
}
