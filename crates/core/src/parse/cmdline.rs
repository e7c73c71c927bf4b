//! The kernel command line (`/proc/cmdline`, or a bootloader's `options` line).

use serde::Serialize;

/// One word of the command line: `key` or `key=value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CmdlineParam {
    pub key: String,
    pub value: Option<String>,
}

/// A parsed command line; keeps every word in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Cmdline {
    pub raw: String,
    pub params: Vec<CmdlineParam>,
}

impl Cmdline {
    /// The value of the last `key=…` (the kernel takes the last one), if any.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|p| p.key == key)
            .and_then(|p| p.value.as_deref())
    }
    /// Is `key` present at all (with or without a value)?
    pub fn has(&self, key: &str) -> bool {
        self.params.iter().any(|p| p.key == key)
    }
}

/// Split like the kernel does: whitespace separates words, double quotes group.
pub fn parse_cmdline(text: &str) -> Cmdline {
    let mut params = Vec::new();
    let mut word = String::new();
    let mut in_quotes = false;
    let mut any = false;
    for ch in text.chars() {
        match ch {
            '"' => {
                in_quotes = !in_quotes;
                any = true;
            }
            c if c.is_whitespace() && !in_quotes => {
                if any {
                    params.push(split_word(&word));
                    word.clear();
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        params.push(split_word(&word));
    }
    Cmdline {
        raw: text.trim().to_string(),
        params,
    }
}

fn split_word(word: &str) -> CmdlineParam {
    match word.split_once('=') {
        Some((k, v)) => CmdlineParam {
            key: k.replace('-', "_"),
            value: Some(v.to_string()),
        },
        None => CmdlineParam {
            key: word.replace('-', "_"),
            value: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_vfio_cmdline() {
        let c = parse_cmdline(
            "BOOT_IMAGE=/vmlinuz-6.1.0 root=UUID=1234 ro quiet amd_iommu=on iommu=pt vfio-pci.ids=10de:1b81,10de:10f0 isolcpus=2-7 video=\"efifb:off\"\n",
        );
        assert_eq!(c.value("iommu"), Some("pt"));
        assert_eq!(c.value("vfio_pci.ids"), Some("10de:1b81,10de:10f0"));
        assert_eq!(c.value("video"), Some("efifb:off"));
        assert!(c.has("quiet"));
        assert_eq!(c.value("quiet"), None);
        assert_eq!(c.value("root"), Some("UUID=1234"));
    }

    #[test]
    fn last_value_wins_and_empty_is_empty() {
        let c = parse_cmdline("iommu=soft iommu=pt");
        assert_eq!(c.value("iommu"), Some("pt"));
        assert!(parse_cmdline("  \n").params.is_empty());
    }
}
