//! Kernel command line tokens as tokens, not text: a hyphen and an
//! underscore are the same in a parameter's name (kernel-parameters.rst:
//! "hyphens (dashes) and underscores are equivalent in parameter names"),
//! a token the line already has is not added twice, a `key=` the plan sets
//! replaces the old value of that key, and `$var` tokens (GRUB variables,
//! `$tuned_params`) are kept as written. Also the closed set of tokens the
//! tuning may write, each value checked, so nothing else can be smuggled in.

/// The name part of a token, normalised (`vfio_pci.ids` and `vfio-pci.ids`
/// are one key).
pub fn key_of(token: &str) -> String {
    let name = token.split_once('=').map_or(token, |(k, _)| k);
    name.replace('-', "_")
}

/// Split a command line into tokens (double quotes group, as the kernel
/// reads them; the quotes stay in the token).
pub fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                word.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// `line` with `add` merged in: a token already there (same key and value)
/// stays where it is; a key with another value is replaced in place; new
/// ones go at the end. `$var` tokens are never touched.
pub fn merge(line: &str, add: &[String]) -> String {
    let mut tokens = split(line);
    for a in add {
        let k = key_of(a);
        if tokens.iter().any(|t| t == a) {
            continue;
        }
        match tokens
            .iter()
            .position(|t| !t.starts_with('$') && key_of(t) == k)
        {
            Some(i) => tokens[i] = a.clone(),
            None => tokens.push(a.clone()),
        }
    }
    tokens.join(" ")
}

/// The tokens of `want` that `line` lacks as whole tokens (a key with
/// another value counts as lacking).
pub fn missing(line: &str, want: &[String]) -> Vec<String> {
    let have = split(line);
    want.iter()
        .filter(|w| {
            !have
                .iter()
                .any(|h| h == *w || (key_of(h) == key_of(w) && value_of(h) == value_of(w)))
        })
        .cloned()
        .collect()
}

fn value_of(token: &str) -> Option<&str> {
    token.split_once('=').map(|(_, v)| v)
}

/// Whether `token` is one the tuning may write: a known key with a value of
/// the right shape. No spaces, quotes, `$`, `;`, backticks or newlines.
pub fn allowed(token: &str) -> bool {
    if token.is_empty()
        || token
            .chars()
            .any(|c| c.is_whitespace() || "\"'$`;|&<>(){}\\".contains(c))
    {
        return false;
    }
    let (k, v) = match token.split_once('=') {
        Some((k, v)) => (k.replace('-', "_"), Some(v)),
        None => (token.replace('-', "_"), None),
    };
    let cpus = |v: &str| {
        !v.is_empty()
            && v.split(',').all(|p| {
                let p = p.strip_prefix("managed_irq,").unwrap_or(p);
                !p.is_empty() && p.split('-').all(|n| n.parse::<u32>().is_ok())
            })
    };
    let ids = |v: &str| {
        v.split(',').all(|id| {
            let mut parts = id.split(':');
            let hex4 = |s: Option<&str>| {
                s.is_some_and(|s| s.len() == 4 && s.chars().all(|c| c.is_ascii_hexdigit()))
            };
            hex4(parts.next()) && hex4(parts.next()) && parts.next().is_none()
        })
    };
    match (k.as_str(), v) {
        ("intel_iommu", Some("on")) | ("amd_iommu", Some("on")) | ("iommu", Some("pt")) => true,
        ("isolcpus", Some(v)) => {
            let v = v
                .strip_prefix("managed_irq,domain,")
                .or_else(|| v.strip_prefix("domain,managed_irq,"))
                .unwrap_or(v);
            cpus(v)
        }
        ("nohz_full" | "rcu_nocbs" | "irqaffinity", Some(v)) => cpus(v),
        ("hugepagesz" | "default_hugepagesz", Some(v)) => v == "1G" || v == "2M",
        ("hugepages", Some(v)) => v.parse::<u32>().is_ok_and(|n| n <= 1 << 20),
        ("vfio_pci.ids", Some(v)) => ids(v),
        ("vfio_assistant.bind", Some("1")) => true,
        ("rd.driver.pre", Some("vfio_pci" | "vfio-pci")) => true,
        ("initcall_blacklist", Some("sysfb_init")) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn merge_adds_once_replaces_values_and_keeps_variables() {
        assert_eq!(
            merge("quiet splash", &v(&["amd_iommu=on", "iommu=pt"])),
            "quiet splash amd_iommu=on iommu=pt"
        );
        assert_eq!(merge("quiet iommu=pt", &v(&["iommu=pt"])), "quiet iommu=pt");
        // A hyphen and an underscore are one name; the new value wins.
        assert_eq!(
            merge(
                "vfio-pci.ids=10de:1b06",
                &v(&["vfio_pci.ids=10de:1b06,10de:10ef"])
            ),
            "vfio_pci.ids=10de:1b06,10de:10ef"
        );
        assert_eq!(
            merge("$tuned_params quiet", &v(&["isolcpus=2-7"])),
            "$tuned_params quiet isolcpus=2-7"
        );
        assert_eq!(merge("", &v(&["iommu=pt"])), "iommu=pt");
        // Quotes group a value with spaces; it stays one token.
        assert_eq!(split("a \"b c\" d"), v(&["a", "\"b c\"", "d"]));
    }

    #[test]
    fn missing_compares_whole_tokens() {
        let want = v(&["iommu=pt", "isolcpus=2-7"]);
        assert_eq!(
            missing("quiet iommu=pt isolcpus=2-7", &want),
            Vec::<String>::new()
        );
        assert_eq!(missing("quiet iommu=ptx isolcpus=2-70", &want), want);
        // The tuned#268 join bug: two tokens run together are not there.
        assert_eq!(
            missing("console=ttyS0,115200n8iommu=pt", &v(&["iommu=pt"])),
            v(&["iommu=pt"])
        );
        assert!(missing("isolcpus=2-7", &v(&["isolcpus=2-7"])).is_empty());
    }

    #[test]
    fn only_known_tokens_with_sane_values() {
        for ok in [
            "intel_iommu=on",
            "amd_iommu=on",
            "iommu=pt",
            "isolcpus=managed_irq,domain,2-7,10-15",
            "nohz_full=2-7",
            "rcu_nocbs=2-7",
            "irqaffinity=0-1",
            "hugepagesz=1G",
            "default_hugepagesz=1G",
            "hugepages=16",
            "vfio-pci.ids=10de:1b06,10de:10ef",
        ] {
            assert!(allowed(ok), "{ok}");
        }
        for bad in [
            "quiet $(reboot)",
            "iommu=pt;reboot",
            "init=/bin/sh",
            "isolcpus=a-b",
            "vfio-pci.ids=10de:1b06 x",
            "hugepages=99999999999",
            "iommu=soft",
            "",
            "nohz_full=2-7\nreboot",
            "amd_iommu=`id`",
        ] {
            assert!(!allowed(bad), "{bad:?}");
        }
    }
}
