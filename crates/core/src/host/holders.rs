//! Who holds a device, found by the device itself — its major:minor, the
//! `st_rdev` of what a process has open — and never by a path:
//! * every process's open files (`/proc/PID/fd`: magic links that lead to
//!   the file itself, whatever mount namespace it was opened in, whatever
//!   name the node has there);
//! * every process's mappings (`/proc/PID/map_files`: a card's memory
//!   mapped, and its fd closed since — root only).
//!
//! A node a user made up in a namespace of their own (`unshare -rm`, a tmpfs
//! `/dev` with a file named `card1`) is not the card: it has none of the
//! card's device numbers (only root can make a device node), so it holds
//! nothing. The shared-GPU planner asks who holds the card
//! (`--shared-stop` takes only units seen holding it); the hooks do the
//! same in shell at the VM's start (tuning/hook.rs).
//!
//! What this cannot see: a buffer of the card's shared with another process
//! as a dma-buf (an `anon_inode:dmabuf` fd, no node), a mapping of a GEM
//! object backed by shmem (its file is not the node), the kernel's own users
//! (fbcon, another driver importing its buffers), a file descriptor in
//! flight in a unix socket, and processes outside this PID namespace.

use crate::sysroot::{HostPath, HostRoot};
use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

/// At most this many processes, open files and mappings a process are
/// looked at.
const MAX_PROCESSES: usize = 65_536;
const MAX_FDS: usize = 8_192;
const MAX_MAPS: usize = 65_536;

/// NVIDIA's character devices: `/dev/nvidiaN` (minor N), `nvidia-modeset`
/// (254) and `nvidiactl` (255) under major 195 (`NV_MAJOR_DEVICE_NUMBER`).
pub const NVIDIA_MAJOR: u32 = 195;
const NVIDIA_MODESET: u32 = 254;
const NVIDIA_CTL: u32 = 255;

/// A device number, major and minor, as sysfs's `dev` files say it
/// (`226:1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl DevNum {
    /// `226:1`.
    pub fn parse(s: &str) -> Option<DevNum> {
        let (a, b) = s.trim().split_once(':')?;
        Some(DevNum {
            major: a.parse().ok()?,
            minor: b.parse().ok()?,
        })
    }

    /// From a `stat`'s `st_rdev`.
    pub fn of_rdev(rdev: u64) -> DevNum {
        DevNum {
            major: rustix::fs::major(rdev),
            minor: rustix::fs::minor(rdev),
        }
    }
}

impl std::fmt::Display for DevNum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// The device numbers through which programs use the GPU at `gpu`: its
/// DRM card and render nodes (sysfs says their numbers), and for a card on
/// `nvidia` its own `/dev/nvidiaN` (the minor from the driver's
/// `/proc/driver/nvidia/gpus/ADDR/information`; every card's when that
/// cannot be read) with `nvidiactl` and `nvidia-modeset`, which every
/// NVIDIA card shares.
pub fn card_devices(root: &HostRoot, gpu: &str, nvidia: bool) -> Vec<DevNum> {
    let drm = HostPath::sys(&format!("bus/pci/devices/{gpu}/drm"));
    let mut out: Vec<DevNum> = root
        .list_dir(&drm)
        .unwrap_or_default()
        .iter()
        .filter(|n| n.starts_with("card") || n.starts_with("renderD"))
        .filter_map(|n| root.read_attr(&drm.join(n).join("dev")).ok())
        .filter_map(|d| DevNum::parse(&d))
        .collect();
    if nvidia {
        let info = root
            .read_text(&HostPath::proc(&format!(
                "driver/nvidia/gpus/{gpu}/information"
            )))
            .unwrap_or_default();
        let minor = info.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "Device Minor")
                .then(|| v.trim().parse::<u32>().ok())
                .flatten()
        });
        let minors: Vec<u32> = match minor {
            Some(m) => vec![m],
            None => (0..NVIDIA_MODESET).collect(),
        };
        out.extend(
            minors
                .into_iter()
                .chain([NVIDIA_MODESET, NVIDIA_CTL])
                .map(|minor| DevNum {
                    major: NVIDIA_MAJOR,
                    minor,
                }),
        );
    }
    out.sort();
    out.dedup();
    out
}

/// How a process holds the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldBy {
    /// An open file descriptor.
    Fd,
    /// A mapping (its descriptor may be closed since).
    Map,
}

/// A process that holds one of the devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its `comm` (any user names their own processes: data, never code).
    pub name: String,
    /// Its cgroup (`/system.slice/ollama.service`), cgroup v2's line.
    pub cgroup: String,
    /// The systemd unit or scope it runs in (`ollama.service`).
    pub unit: Option<String>,
    pub dev: DevNum,
    pub by: HeldBy,
}

impl Holder {
    /// A system service's unit (`/system.slice/…/NAME.service`): one the
    /// system's systemctl can stop. A user's own services and scopes are
    /// not.
    pub fn system_unit(&self) -> Option<&str> {
        self.unit
            .as_deref()
            .filter(|u| u.ends_with(".service") && self.cgroup.starts_with("/system.slice/"))
    }
}

/// What a look found: the holders, and how many processes could not be
/// looked into (another user's, when not root; a process that ended
/// meanwhile is not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holders {
    pub found: Vec<Holder>,
    pub unreadable: usize,
}

/// The cgroup v2 path of a process, from `/proc/PID/cgroup`.
fn cgroup_of(root: &HostRoot, pid: u32) -> String {
    let text = root
        .read_text(&HostPath::proc(&format!("{pid}/cgroup")))
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .or_else(|| text.lines().last().and_then(|l| l.rsplit(':').next()))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The device `path` leads to, when it is a character device.
fn char_dev(root: &HostRoot, path: &HostPath) -> Option<DevNum> {
    let m = root.metadata(path).ok()?;
    m.file_type()
        .is_char_device()
        .then(|| DevNum::of_rdev(m.rdev()))
}

/// The mappings of a process that may be a device's: the `map_files` name
/// of each distinct mapped file (`7f00-7f10`), with its `(dev, inode)` from
/// `maps` to look at each file once.
fn mapped_files(maps: &str) -> Vec<(String, (String, u64))> {
    let mut seen = BTreeSet::new();
    maps.lines()
        .take(MAX_MAPS)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let dev = f.nth(2)?;
            let inode: u64 = f.next()?.parse().ok()?;
            if inode == 0 || !seen.insert((dev.to_string(), inode)) {
                return None;
            }
            // map_files names drop maps' zero padding.
            let (a, b) = range.split_once('-')?;
            let trim = |h: &str| {
                let t = h.trim_start_matches('0');
                if t.is_empty() {
                    "0".to_string()
                } else {
                    t.to_string()
                }
            };
            Some((format!("{}-{}", trim(a), trim(b)), (dev.to_string(), inode)))
        })
        .collect()
}

/// Who has one of `devs` open or mapped, from every process in `/proc`.
pub fn holders(root: &HostRoot, devs: &[DevNum]) -> Holders {
    let mut out = Holders::default();
    if devs.is_empty() {
        return out;
    }
    // A mapped file is the same file in every process that maps it.
    let mut files: HashMap<(String, u64), Option<DevNum>> = HashMap::new();
    let pids = root.list_dir(&HostPath::proc("")).unwrap_or_default();
    for pid in pids
        .iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .take(MAX_PROCESSES)
    {
        let fd_dir = HostPath::proc(&format!("{pid}/fd"));
        let fds = match root.list_dir(&fd_dir) {
            Ok(f) => f,
            Err(e) => {
                if !e.is_not_found() {
                    out.unreadable += 1;
                }
                continue;
            }
        };
        let by_fd = fds
            .iter()
            .take(MAX_FDS)
            .filter_map(|fd| char_dev(root, &fd_dir.join(fd)))
            .find(|d| devs.contains(d))
            .map(|d| (d, HeldBy::Fd));
        let held = by_fd.or_else(|| {
            let maps = root
                .read_text(&HostPath::proc(&format!("{pid}/maps")))
                .ok()?;
            let map_dir = HostPath::proc(&format!("{pid}/map_files"));
            mapped_files(&maps).into_iter().find_map(|(name, key)| {
                let dev = *files
                    .entry(key)
                    .or_insert_with(|| char_dev(root, &map_dir.join(&name)));
                dev.filter(|d| devs.contains(d)).map(|d| (d, HeldBy::Map))
            })
        });
        let Some((dev, by)) = held else { continue };
        let cgroup = cgroup_of(root, pid);
        let unit = cgroup
            .rsplit('/')
            .find(|c| c.ends_with(".service") || c.ends_with(".scope"))
            .map(str::to_string);
        out.found.push(Holder {
            pid,
            name: root
                .read_attr(&HostPath::proc(&format!("{pid}/comm")))
                .unwrap_or_else(|_| "?".into()),
            cgroup,
            unit,
            dev,
            by,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_read_as_the_kernel_packs_them() {
        assert_eq!(
            DevNum::parse("226:128"),
            Some(DevNum {
                major: 226,
                minor: 128
            })
        );
        assert_eq!(DevNum::parse("x:1"), None);
        let d = DevNum {
            major: 226,
            minor: 300,
        };
        assert_eq!(DevNum::of_rdev(rustix::fs::makedev(226, 300)), d);
        assert_eq!(d.to_string(), "226:300");
    }

    #[test]
    fn each_mapped_file_is_looked_at_once_by_its_map_files_name() {
        let maps = "00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/x\n\
                    00651000-00652000 r--p 00051000 08:02 173521 /usr/bin/x\n\
                    7f00a000-7f00b000 rw-s 1000 00:05 77 /dev/dri/card1\n\
                    7ffd000-7ffe000 rw-p 00000000 00:00 0 [stack]\n";
        let m = mapped_files(maps);
        assert_eq!(
            m,
            [
                ("400000-452000".to_string(), ("08:02".to_string(), 173521)),
                ("7f00a000-7f00b000".to_string(), ("00:05".to_string(), 77)),
            ]
        );
    }
}
