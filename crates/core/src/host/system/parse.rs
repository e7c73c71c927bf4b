//! Pure readers of the host's text files that the checks need: the kernel
//! log's topical lines, the framebuffers in `/proc/iomem`, memory
//! fragmentation (`/proc/buddyinfo`), the command line `/etc/default/grub`
//! sets.

use serde::Serialize;

/// Kernel log lines worth keeping (everything else is dropped).
const KMSG_TOPICS: &[&str] = &[
    "DMAR",
    "AMD-Vi",
    "IOMMU",
    "iommu",
    "kvm",
    "KVM",
    "vfio",
    "VFIO",
    "RMRR",
    "remapping",
    "disabled by bios",
    "BAR ",
    "efifb",
    "simpledrm",
    "vesafb",
    "BOOTFB",
    "ACS",
    "split lock",
    // A function that did not come back from a reset or a power state
    // (pci_dev_wait, pci_set_power_state).
    "not ready",
    "power state",
    "D3cold",
];

/// Pure: keep the topical messages of a kmsg dump (`prio,seq,usec,flags;msg`)
/// or plain dmesg text.
pub fn parse_kmsg(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with(' ')) // kmsg continuation lines (KEY=value)
        .map(|l| match l.split_once(';') {
            Some((head, msg)) if head.split(',').count() >= 3 => msg,
            _ => l,
        })
        .filter(|m| KMSG_TOPICS.iter().any(|t| m.contains(t)))
        .take(2000)
        .map(str::to_string)
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IomemRange {
    pub start: u64,
    pub end: u64,
    pub name: String,
}

/// Pure: framebuffer ranges from `/proc/iomem` (zeros when not root), read
/// with procfs-core's reader; a file it cannot read gives none (the ranges
/// are evidence for a finding, not the finding).
pub fn parse_iomem_framebuffers(text: &str) -> Vec<IomemRange> {
    use procfs_core::FromBufRead;
    const FRAMEBUFFERS: [&str; 6] = [
        "efifb",
        "simpledrm",
        "BOOTFB",
        "vesafb",
        "simplefb",
        "simple-framebuffer",
    ];
    let Ok(map) = procfs_core::Iomem::from_buf_read(text.as_bytes()) else {
        return Vec::new();
    };
    map.0
        .into_iter()
        .filter(|(_, m)| FRAMEBUFFERS.iter().any(|k| m.name.contains(k)))
        .map(|(_, m)| IomemRange {
            start: m.address.0,
            end: m.address.1,
            name: m.name.trim().to_string(),
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuddyZone {
    pub node: u32,
    pub zone: String,
    /// Free blocks of order 0, 1, 2… (4 KiB << order).
    pub free_blocks: Vec<u64>,
}

/// Pure: `/proc/buddyinfo`.
pub fn parse_buddyinfo(text: &str) -> Vec<BuddyZone> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Node ")?;
            let (node, rest) = rest.split_once(',')?;
            let rest = rest.trim().strip_prefix("zone")?;
            let mut f = rest.split_whitespace();
            let zone = f.next()?.to_string();
            let free_blocks = f.map(|n| n.parse().ok()).collect::<Option<Vec<u64>>>()?;
            Some(BuddyZone {
                node: node.trim().parse().ok()?,
                zone,
                free_blocks,
            })
        })
        .collect()
}

/// Pure: the kernel command line a `/etc/default/grub` sets.
pub fn grub_cmdline(text: &str) -> Option<String> {
    let mut parts = Vec::new();
    for key in ["GRUB_CMDLINE_LINUX_DEFAULT", "GRUB_CMDLINE_LINUX"] {
        // The last assignment wins, as the shell would have it.
        if let Some(v) = text
            .lines()
            .map(str::trim)
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .next_back()
        {
            parts.push(v.trim().trim_matches('"').trim_matches('\'').to_string());
        }
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}
