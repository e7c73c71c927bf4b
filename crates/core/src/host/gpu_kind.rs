//! Integrated or discrete: which GPUs are the CPU's own graphics, told from
//! what the host shows, never from PCI order alone
//! (shared/research/gpu-choice-windows-gui-e2e.md §1):
//! * the CPU vendor's iGPU IDs — AMD's APU graphics (Raven Ridge to Granite
//!   Ridge and Strix) by device ID, named as the PCI ID Repository names
//!   them;
//! * Intel's graphics on the CPU's root bus (00:02.0); Intel's discrete Arc
//!   cards sit behind a root port like any other card;
//! * no PCIe link of its own (supporting evidence only: an AMD APU's
//!   graphics reports the internal bridge's link on some boards).
//!
//! Paravirtual display devices (virtio-gpu, QXL, VMware's and Hyper-V's)
//! have no hardware behind them: never a card for a VM. QEMU's standard
//! VGA (1234:1111) stays a discrete card: the booted test hosts use it as
//! one.

use super::pci::PciDevice;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuKind {
    Discrete,
    Integrated,
    Virtual,
}

impl GpuKind {
    pub fn word(self) -> &'static str {
        match self {
            GpuKind::Discrete => "discrete",
            GpuKind::Integrated => "integrated",
            GpuKind::Virtual => "virtual",
        }
    }
}

/// What a GPU is, and the evidence that decided it, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuClass {
    pub kind: GpuKind,
    /// "its ID 1002:164e is AMD's Raphael APU graphics", …
    pub because: String,
    /// The APU family, where the ID names one (Raphael, Phoenix1…).
    pub family: Option<&'static str>,
}

/// AMD's APU graphics by device ID (vendor 1002), with the family name the
/// PCI ID Repository gives it.
const AMD_APU_GRAPHICS: &[(u16, &str)] = &[
    (0x98e4, "Stoney"),
    (0x9874, "Carrizo (Wani)"),
    (0x15dd, "Raven Ridge"),
    (0x15d8, "Picasso/Raven 2"),
    (0x1636, "Renoir"),
    (0x1638, "Cezanne"),
    (0x164c, "Lucienne"),
    (0x15e7, "Barcelo"),
    (0x163f, "Van Gogh"),
    (0x164d, "Rembrandt"),
    (0x1681, "Rembrandt"),
    (0x1506, "Mendocino"),
    (0x164e, "Raphael"),
    (0x15bf, "Phoenix1"),
    (0x15c8, "Phoenix2"),
    (0x164f, "Phoenix"),
    (0x1900, "HawkPoint1"),
    (0x1901, "HawkPoint2"),
    (0x13c0, "Granite Ridge"),
    (0x150e, "Strix"),
    (0x1586, "Strix Halo"),
    (0x1114, "Krackan"),
    (0x1902, "Krackan2"),
];

/// Paravirtual display devices: (vendor, what it is).
const VIRTUAL: &[(u16, &str)] = &[
    (0x1af4, "a virtio GPU"),
    (0x1b36, "QEMU's QXL display"),
    (0x15ad, "VMware's SVGA display"),
    (0x1414, "Hyper-V's display"),
    (0x80ee, "VirtualBox's display"),
];

/// The AMD APU family of a GPU's ID, if it is one.
pub fn amd_apu_family(vendor: u16, device: u16) -> Option<&'static str> {
    (vendor == 0x1002)
        .then(|| AMD_APU_GRAPHICS.iter().find(|(id, _)| *id == device))
        .flatten()
        .map(|(_, name)| *name)
}

fn short(address: &str) -> &str {
    address.strip_prefix("0000:").unwrap_or(address)
}

/// Integrated, discrete or virtual, with the evidence. `cpu_vendor` is
/// cpuinfo's `vendor_id` (GenuineIntel, AuthenticAMD), when known.
pub fn classify(cpu_vendor: Option<&str>, d: &PciDevice) -> GpuClass {
    let vendor = d.vendor_id.0;
    let id = format!("{}:{}", d.vendor_id, d.device_id);
    if let Some((_, what)) = VIRTUAL.iter().find(|(v, _)| *v == vendor) {
        return GpuClass {
            kind: GpuKind::Virtual,
            because: format!("its ID {id} is {what}, with no hardware behind it"),
            family: None,
        };
    }
    let no_link = d.link.max_width.is_none() && d.link.max_speed_gts.is_none();
    let link_words = if no_link {
        ", and it has no PCIe link of its own"
    } else {
        ""
    };
    if let Some(family) = amd_apu_family(vendor, d.device_id.0) {
        let cpu = match cpu_vendor {
            Some("AuthenticAMD") => " on this AMD CPU",
            _ => "",
        };
        return GpuClass {
            kind: GpuKind::Integrated,
            because: format!("its ID {id} is AMD's {family} APU graphics{cpu}{link_words}"),
            family: Some(family),
        };
    }
    let on_root_bus = d.address.starts_with("0000:00:");
    if vendor == 0x8086 && on_root_bus {
        return GpuClass {
            kind: GpuKind::Integrated,
            because: format!(
                "Intel graphics at {} on the CPU's root bus, where Intel puts its integrated GPU{link_words}",
                short(&d.address)
            ),
            family: None,
        };
    }
    let because = match (d.link.max_speed_gts, d.link.max_width) {
        (Some(s), Some(w)) => format!("it has a PCIe link of its own ({s} GT/s x{w})"),
        _ if !on_root_bus => format!(
            "a card of its own on bus {} (its ID {id} is no CPU's graphics)",
            short(&d.address).split(':').next().unwrap_or("?")
        ),
        _ => format!("its ID {id} is no CPU's integrated graphics"),
    };
    GpuClass {
        kind: GpuKind::Discrete,
        because,
        family: None,
    }
}

/// How strong a card looks from sysfs: its PCIe link (speed × width) and
/// its largest prefetchable memory window (the VRAM it maps; the whole
/// memory with Resizable BAR on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Strength {
    /// Max link speed × max width, in GT/s; 0 when not shown.
    pub link_gts: f32,
    pub window_bytes: u64,
}

impl Strength {
    pub fn of(d: &PciDevice) -> Strength {
        let link_gts = match (d.link.max_speed_gts, d.link.max_width) {
            (Some(s), Some(w)) => s * w as f32,
            _ => 0.0,
        };
        let window_bytes = d
            .bars
            .iter()
            .filter(|b| !b.io && b.prefetchable)
            .map(|b| b.size_bytes)
            .max()
            .unwrap_or(0);
        Strength {
            link_gts,
            window_bytes,
        }
    }

    /// Stronger first: the link, then the memory window.
    pub fn cmp_desc(&self, other: &Strength) -> std::cmp::Ordering {
        other
            .link_gts
            .total_cmp(&self.link_gts)
            .then(other.window_bytes.cmp(&self.window_bytes))
    }

    /// "PCIe 16 GT/s x16, a 16 GiB memory window", as far as known.
    pub fn words(&self, d: &PciDevice) -> String {
        let mut parts = Vec::new();
        if let (Some(s), Some(w)) = (d.link.max_speed_gts, d.link.max_width) {
            parts.push(format!("PCIe {s} GT/s x{w}"));
        }
        if self.window_bytes > 0 {
            parts.push(format!(
                "a {} memory window",
                crate::units::human_kib(self.window_bytes / 1024)
            ));
        }
        parts.join(", ")
    }
}

/// Whether the CPU (cpuinfo's `model name`) has integrated graphics, from
/// its model number, with the reason; `None` where the name does not say.
/// Intel desktop Core i3-i9 (6th gen on) and Core Ultra have it unless the
/// suffix has F (or is an X-series HEDT part); AMD Ryzen 7000/9000 desktop
/// parts have it unless F, any G or mobile part has it, other Ryzen desktop
/// parts (1000-5000 without G, Threadripper) have none.
pub fn cpu_has_igpu(model_name: &str) -> Option<(bool, String)> {
    let words: Vec<&str> = model_name.split_whitespace().collect();
    let name = model_name.trim();
    if let Some(i) = words
        .iter()
        .position(|w| w.contains("Core(TM)") || *w == "Core")
    {
        let rest = &words[i + 1..];
        // "i7-13700K" or "Ultra 9 285K".
        let model = match rest {
            [w, ..] if w.starts_with('i') && w.contains('-') => w.split('-').nth(1)?,
            ["Ultra", _, m, ..] => m,
            _ => return None,
        };
        let digits: String = model.chars().take_while(char::is_ascii_digit).collect();
        let suffix = &model[digits.len()..];
        if digits.len() < 3 {
            return None;
        }
        return Some(if suffix.contains('F') {
            (
                false,
                format!("{name}: the F in its model number means no integrated graphics"),
            )
        } else if suffix.starts_with('X') {
            (
                false,
                format!("{name}: an X-series part has no integrated graphics"),
            )
        } else {
            (
                true,
                format!(
                    "{name} has integrated graphics (Intel UHD/Iris Xe/Arc; an F model would not)"
                ),
            )
        });
    }
    let r = words.iter().position(|w| *w == "Ryzen")?;
    if words
        .get(r + 1)
        .is_some_and(|w| w.starts_with("Threadripper"))
    {
        return Some((
            false,
            format!("{name}: Threadripper has no integrated graphics"),
        ));
    }
    let model = words.get(r + 2)?;
    let digits: String = model.chars().take_while(char::is_ascii_digit).collect();
    let suffix = &model[digits.len()..];
    let series = digits.chars().next()?.to_digit(10)?;
    if digits.len() != 4 {
        return None;
    }
    let mobile = ["U", "H", "HS", "HX"].iter().any(|s| suffix.starts_with(s));
    Some(if suffix.contains('F') {
        (
            false,
            format!("{name}: the F in its model number means no integrated graphics"),
        )
    } else if suffix.contains('G') || mobile {
        (
            true,
            format!("{name} is an APU: it has integrated graphics"),
        )
    } else if series == 7 || series == 9 {
        (
            true,
            format!(
                "{name}: Ryzen 7000 and 9000 desktop CPUs have integrated graphics (2 RDNA2 compute units) unless their model ends in F"
            ),
        )
    } else {
        (
            false,
            format!("{name}: a Ryzen desktop CPU without G has no integrated graphics"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_with_and_without_graphics() {
        let has = |n: &str| cpu_has_igpu(n).map(|(b, _)| b);
        assert_eq!(has("13th Gen Intel(R) Core(TM) i7-13700K"), Some(true));
        assert_eq!(has("13th Gen Intel(R) Core(TM) i9-13900KF"), Some(false));
        assert_eq!(has("12th Gen Intel(R) Core(TM) i5-12400F"), Some(false));
        assert_eq!(has("Intel(R) Core(TM) i7-14700K"), Some(true));
        assert_eq!(has("Intel(R) Core(TM) Ultra 9 285K"), Some(true));
        assert_eq!(
            has("Intel(R) Core(TM) i9-10980XE CPU @ 3.00GHz"),
            Some(false)
        );
        assert_eq!(has("AMD Ryzen 7 7800X3D 8-Core Processor"), Some(true));
        assert_eq!(has("AMD Ryzen 9 9950X 16-Core Processor"), Some(true));
        assert_eq!(has("AMD Ryzen 5 7500F 6-Core Processor"), Some(false));
        assert_eq!(has("AMD Ryzen 7 8700G w/ Radeon 780M Graphics"), Some(true));
        assert_eq!(has("AMD Ryzen 9 3900X 12-Core Processor"), Some(false));
        assert_eq!(has("AMD Ryzen 5 1600 Six-Core Processor"), Some(false));
        assert_eq!(
            has("AMD Ryzen Threadripper 3960X 24-Core Processor"),
            Some(false)
        );
        assert_eq!(
            has("AMD Ryzen 7 7840HS w/ Radeon 780M Graphics"),
            Some(true)
        );
        assert_eq!(has("QEMU Virtual CPU version 2.5+"), None);
        assert_eq!(has(""), None);
        assert_eq!(has("Ryzen"), None);
        assert_eq!(has("Core(TM) i-"), None);
    }

    #[test]
    fn apu_ids() {
        assert_eq!(amd_apu_family(0x1002, 0x164e), Some("Raphael"));
        assert_eq!(amd_apu_family(0x1002, 0x13c0), Some("Granite Ridge"));
        assert_eq!(amd_apu_family(0x1002, 0x744c), None);
        assert_eq!(amd_apu_family(0x10de, 0x164e), None);
    }
}
