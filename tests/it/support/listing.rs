//! Test support: reads a real IOMMU-group / `lspci -nn` listing as captured from a
//! user's machine (`tests/fixtures/listings/*.txt`) and writes a minimal Linux sysfs
//! tree for it, so the real readers can run on that machine's groups.
//!
//! Standard library only. Neither function panics on any input: unknown lines are
//! skipped, and `write_sysfs` refuses (with an error naming the value) an address or
//! driver name that would not be a single path component.
//!
//! Forms understood (mixed freely in one text; lines starting with `#` are skipped):
//! * `IOMMU group N` / `IOMMU Group N:` / `IOMMU Group: N` headers, then device lines;
//! * `IOMMU Group N BB:DD.F class [cccc]: ... [vvvv:dddd]` (one device per line);
//! * dmesg `pci DDDD:BB:DD.F: Adding to iommu group N` (gives the group only);
//! * DMAR trees `Group Device: DDDD:BB:DD.F - class [cccc]: ...`;
//! * `Driver: x` (tree scripts) and `Kernel driver in use: x` (`lspci -k`) under a device;
//! * `lspci -v` blocks, whose `Flags: ..., IOMMU group N` line names the device above it.
//!
//! The current group is forgotten at any unindented line that is neither a group nor a
//! device line (a shell prompt, a banner), so a later `lspci -nnk` section does not
//! inherit the last group of an earlier listing. Information for one address is
//! merged: the first group seen wins, class and ids come from whichever line has them.
//! A device without `[vvvv:dddd]` ids anywhere is dropped (its `vendor` file could not
//! be written). A device with ids but no class gets 0xff00 ("unassigned class").

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

/// One PCI function as the listing describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedDevice {
    /// Full address, lower-case: `0000:01:00.0`.
    pub address: String,
    /// Base class and subclass, `0x0300` from `[0300]`.
    pub class_code: u16,
    pub vendor_id: u16,
    pub device_id: u16,
    pub revision: Option<u8>,
    pub group: Option<u32>,
    pub driver: Option<String>,
    /// The lspci description after the address (`VGA compatible controller [0300]: ...`).
    pub text: String,
}

/// Every device of a listing, sorted by address, each address once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub devices: Vec<ListedDevice>,
}

impl Listing {
    /// The device at `address` (`0000:01:00.0`).
    pub fn device(&self, address: &str) -> Option<&ListedDevice> {
        self.devices.iter().find(|d| d.address == address)
    }

    /// The members of IOMMU group `group`, sorted by address.
    pub fn group_members(&self, group: u32) -> Vec<&ListedDevice> {
        self.devices
            .iter()
            .filter(|d| d.group == Some(group))
            .collect()
    }
}

/// What the lines seen so far say about one address.
#[derive(Default)]
struct Partial {
    class_code: Option<u16>,
    ids: Option<(u16, u16)>,
    revision: Option<u8>,
    group: Option<u32>,
    driver: Option<String>,
    text: Option<String>,
}

/// Parses a listing in any of the forms described at the top of this file.
pub fn parse_listing(text: &str) -> Listing {
    let mut seen: BTreeMap<String, Partial> = BTreeMap::new();
    let mut current_group: Option<u32> = None;
    let mut last_device: Option<String> = None;

    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(driver) = driver_value(trimmed) {
            let unbound = last_device
                .as_ref()
                .and_then(|a| seen.get_mut(a))
                .filter(|e| e.driver.is_none());
            if let Some(entry) = unbound {
                entry.driver = driver;
            }
            continue;
        }
        let group_here = find_group(line);
        match find_address(line) {
            Some((address, end)) => {
                if group_here.is_some() {
                    current_group = group_here;
                }
                let entry = seen.entry(address.clone()).or_default();
                if entry.group.is_none() {
                    entry.group = group_here.or(current_group);
                }
                let description = line
                    .get(end..)
                    .unwrap_or("")
                    .trim_start_matches(|c: char| c == ':' || c == '-' || c.is_whitespace())
                    .trim_end();
                merge_description(entry, description);
                last_device = Some(address);
            }
            None => {
                if let Some(group) = group_here {
                    if trimmed.starts_with("Flags:") {
                        // `lspci -v`: the group of the device block above.
                        if let Some(entry) = last_device.as_ref().and_then(|a| seen.get_mut(a)) {
                            entry.group.get_or_insert(group);
                        }
                    } else {
                        current_group = Some(group);
                        last_device = None;
                    }
                } else if !line.starts_with(|c: char| c.is_whitespace()) {
                    // A prompt, a banner, a dmar unit: the group context ends here.
                    current_group = None;
                    last_device = None;
                }
            }
        }
    }

    let devices = seen
        .into_iter()
        .filter_map(|(address, p)| {
            let (vendor_id, device_id) = p.ids?;
            Some(ListedDevice {
                address,
                class_code: p.class_code.unwrap_or(0xff00),
                vendor_id,
                device_id,
                revision: p.revision,
                group: p.group,
                driver: p.driver,
                text: p.text.unwrap_or_default(),
            })
        })
        .collect();
    Listing { devices }
}

/// `Some(None)` for a driver line naming no usable driver (`Driver: none`).
fn driver_value(trimmed: &str) -> Option<Option<String>> {
    let rest = trimmed
        .strip_prefix("Driver:")
        .or_else(|| trimmed.strip_prefix("Kernel driver in use:"))?;
    let name = rest.split_whitespace().next().unwrap_or("");
    if name.eq_ignore_ascii_case("none") || !is_path_component(name) {
        return Some(None);
    }
    Some(Some(name.to_string()))
}

fn merge_description(entry: &mut Partial, description: &str) {
    let bytes = description.as_bytes();
    if entry.class_code.is_none() {
        entry.class_code = find_class(bytes);
    }
    if let (None, Some(ids)) = (entry.ids, find_ids(bytes)) {
        entry.ids = Some(ids);
        entry.text = Some(description.to_string());
    }
    if entry.revision.is_none() {
        entry.revision = find_revision(bytes);
    }
}

/// The group number of `IOMMU group N`, `IOMMU Group: N`, `... iommu group N`.
fn find_group(line: &str) -> Option<u32> {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let needle = b"iommu group";
    let mut start = 0;
    while let Some(pos) = find_bytes(bytes, needle, start) {
        let mut i = pos + needle.len();
        while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
            i += 1;
        }
        if bytes.get(i) == Some(&b':') {
            i += 1;
        }
        while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
            i += 1;
        }
        let digits_end = i + bytes
            .get(i..)
            .map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count());
        if let Some(number) = lower.get(i..digits_end).and_then(|d| d.parse::<u32>().ok()) {
            return Some(number);
        }
        start = pos + 1;
    }
    None
}

/// The first PCI address `[DDDD:]BB:DD.F` standing alone in `line`, normalised to
/// `dddd:bb:dd.f`, and the byte offset just past it.
fn find_address(line: &str) -> Option<(String, usize)> {
    let b = line.as_bytes();
    let before_ok = |i: usize| {
        i == 0
            || b.get(i - 1)
                .is_some_and(|c| c.is_ascii_whitespace() || b"[(,='\"".contains(c))
    };
    let after_ok = |i: usize| {
        b.get(i)
            .is_none_or(|c| c.is_ascii_whitespace() || b":)],;'\"".contains(c))
    };
    for i in 0..b.len() {
        if !before_ok(i) {
            continue;
        }
        // With a domain: dddd:bb:dd.f
        let long = (
            hex_at(b, i, 4),
            b.get(i + 4),
            bdf_at(b, i + 5),
            after_ok(i + 12),
        );
        if let (Some(domain), Some(b':'), Some((bus, dev, func)), true) = long {
            return Some((format!("{domain:04x}:{bus:02x}:{dev:02x}.{func}"), i + 12));
        }
        if let (Some((bus, dev, func)), true) = (bdf_at(b, i), after_ok(i + 7)) {
            return Some((format!("0000:{bus:02x}:{dev:02x}.{func}"), i + 7));
        }
    }
    None
}

/// `bb:dd.f` at `i` (device at most 0x1f, function 0-7).
fn bdf_at(b: &[u8], i: usize) -> Option<(u32, u32, u32)> {
    let bus = hex_at(b, i, 2)?;
    (b.get(i + 2) == Some(&b':')).then_some(())?;
    let dev = hex_at(b, i + 3, 2).filter(|d| *d <= 0x1f)?;
    (b.get(i + 5) == Some(&b'.')).then_some(())?;
    let func = b.get(i + 6).filter(|c| (b'0'..=b'7').contains(*c))?;
    Some((bus, dev, u32::from(func - b'0')))
}

/// Exactly `len` hex digits at `i`.
fn hex_at(b: &[u8], i: usize, len: usize) -> Option<u32> {
    let digits = b.get(i..i.checked_add(len)?)?;
    digits
        .iter()
        .try_fold(0u32, |acc, c| Some(acc * 16 + char::from(*c).to_digit(16)?))
}

/// `[cccc]:` — lspci -nn prints the class id right before the colon after the class name.
fn find_class(b: &[u8]) -> Option<u16> {
    (0..b.len()).find_map(|i| {
        if b.get(i) != Some(&b'[') || b.get(i + 5) != Some(&b']') || b.get(i + 6) != Some(&b':') {
            return None;
        }
        hex_at(b, i + 1, 4).and_then(|v| u16::try_from(v).ok())
    })
}

/// The last `[vvvv:dddd]` (subsystem ids live on their own, address-less lines).
fn find_ids(b: &[u8]) -> Option<(u16, u16)> {
    (0..b.len()).rev().find_map(|i| {
        if b.get(i) != Some(&b'[') || b.get(i + 5) != Some(&b':') || b.get(i + 10) != Some(&b']') {
            return None;
        }
        let vendor = u16::try_from(hex_at(b, i + 1, 4)?).ok()?;
        let device = u16::try_from(hex_at(b, i + 6, 4)?).ok()?;
        Some((vendor, device))
    })
}

/// `(rev a1)`.
fn find_revision(b: &[u8]) -> Option<u8> {
    let pos = find_bytes(b, b"(rev ", 0)?;
    let rev = hex_at(b, pos + 5, 2)?;
    (b.get(pos + 7) == Some(&b')')).then_some(())?;
    u8::try_from(rev).ok()
}

fn find_bytes(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn is_path_component(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"_-.+:@".contains(&c))
}

/// `dddd:bb:dd.f` in lower-case hex, nothing else.
fn is_full_address(address: &str) -> bool {
    let b = address.as_bytes();
    b.len() == 12
        && b.iter().all(|c| !c.is_ascii_uppercase())
        && hex_at(b, 0, 4).is_some()
        && b.get(4) == Some(&b':')
        && bdf_at(b, 5).is_some()
}

fn invalid(what: &str, value: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("listing has an unusable {what}: {value:?}"),
    )
}

#[cfg(unix)]
fn relink(target: &str, link: &Path) -> io::Result<()> {
    if fs::symlink_metadata(link).is_ok() {
        fs::remove_file(link)?;
    }
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn relink(_target: &str, link: &Path) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("no symlinks here: {}", link.display()),
    ))
}

/// Writes a minimal Linux sysfs tree for the listing under `root` (which exists):
/// `sys/devices/pci<domain>:00/<addr>/` with vendor, device, class, revision (if
/// known), subsystem_vendor/device (0), numa_node (-1), enable (1) and the links
/// `subsystem`, `iommu_group` (if grouped) and `driver` (if bound); the links
/// `sys/bus/pci/devices/<addr>`, `sys/kernel/iommu_groups/<N>/devices/<addr>` and
/// `sys/bus/pci/drivers/<driver>/<addr>`. All links are relative, as in real sysfs.
/// Devices sit flat under their domain's root: a listing does not show the bridges'
/// topology. `sys/bus/pci/{devices,drivers}` and `sys/kernel/iommu_groups` always exist.
pub fn write_sysfs(listing: &Listing, root: &Path) -> io::Result<()> {
    let sys = root.join("sys");
    for dir in ["bus/pci/devices", "bus/pci/drivers", "kernel/iommu_groups"] {
        fs::create_dir_all(sys.join(dir))?;
    }
    for device in &listing.devices {
        let address = device.address.as_str();
        if !is_full_address(address) {
            return Err(invalid("address", address));
        }
        let parent = format!("pci{}:00", address.get(..4).unwrap_or("0000"));
        let device_in_sys = format!("devices/{parent}/{address}");
        let dir = sys.join(&device_in_sys);
        fs::create_dir_all(&dir)?;
        let mut files = vec![
            ("vendor", format!("0x{:04x}\n", device.vendor_id)),
            ("device", format!("0x{:04x}\n", device.device_id)),
            (
                "class",
                format!("0x{:06x}\n", u32::from(device.class_code) << 8),
            ),
            ("subsystem_vendor", "0x0000\n".to_string()),
            ("subsystem_device", "0x0000\n".to_string()),
            ("numa_node", "-1\n".to_string()),
            ("enable", "1\n".to_string()),
        ];
        if let Some(revision) = device.revision {
            files.push(("revision", format!("0x{revision:02x}\n")));
        }
        for (name, contents) in files {
            fs::write(dir.join(name), contents)?;
        }
        relink("../../../bus/pci", &dir.join("subsystem"))?;
        relink(
            &format!("../../../{device_in_sys}"),
            &sys.join("bus/pci/devices").join(address),
        )?;
        if let Some(group) = device.group {
            let members = sys.join(format!("kernel/iommu_groups/{group}/devices"));
            fs::create_dir_all(&members)?;
            relink(
                &format!("../../../../{device_in_sys}"),
                &members.join(address),
            )?;
            relink(
                &format!("../../../kernel/iommu_groups/{group}"),
                &dir.join("iommu_group"),
            )?;
        }
        if let Some(driver) = &device.driver {
            if !is_path_component(driver) {
                return Err(invalid("driver name", driver));
            }
            let bound = sys.join("bus/pci/drivers").join(driver);
            fs::create_dir_all(&bound)?;
            relink(
                &format!("../../../../{device_in_sys}"),
                &bound.join(address),
            )?;
            relink(
                &format!("../../../bus/pci/drivers/{driver}"),
                &dir.join("driver"),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "listing_tests.rs"]
mod tests;
