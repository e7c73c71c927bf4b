//! Making the VM usable once its GPU is passed through — how the user sees,
//! types and hears (shared/research/playable-vm.md) — as typed edits on the
//! lossless domain document, each with why:
//! * keyboard and mouse by libvirt's native evdev passthrough (`<input
//!   type='evdev'>`: grab both, a toggle to switch back to the host, key
//!   repeat), plus virtio keyboard and mouse for after the guest's vioinput
//!   driver; an old `qemu:arg -object input-linux` recipe is migrated to it
//!   (with the native element libvirt handles the cgroup and labels itself);
//! * USB devices by vendor and product, `startupPolicy='optional'` so a
//!   device that is unplugged does not stop the VM's start;
//! * a screen without a second monitor, Looking Glass: the shared memory
//!   sized from the resolution (W×H×4×2 + 10 MiB up to a power of two, ×2
//!   for HDR), through the kvmfr module's `/dev/kvmfr0` when it is set up,
//!   else `<shmem>` (ivshmem-plain); SPICE where the client reaches it, for
//!   input, clipboard and sound (`playable/looking_glass.rs`);
//! * sound: an ich9 HDA device on the audio backend this host's QEMU and
//!   libvirt offer (PipeWire needs QEMU ≥ 8.1 and libvirt ≥ 9.10, else
//!   PulseAudio), pointed at the desktop user's session socket, at 48 kHz.

use super::tune::Edit;
use super::xml::{Document, Element};
use serde::Serialize;

mod looking_glass;
pub use looking_glass::{ClientSetup, SpiceAt};

/// grabToggle: the keys that switch keyboard and mouse between VM and host.
pub const GRAB_TOGGLES: &[&str] = &[
    "ctrl-ctrl",
    "alt-alt",
    "shift-shift",
    "meta-meta",
    "scrolllock",
    "ctrl-scrolllock",
];

/// Looking Glass as the user wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LookingGlass {
    pub width: u32,
    pub height: u32,
    pub hdr: bool,
    /// Through the kvmfr module's `/dev/kvmfr0` (set up by the tuning's
    /// `kvmfr` change) instead of a file in /dev/shm.
    pub kvmfr: bool,
}

/// The shared memory Looking Glass needs, in MiB: two frames of 4 bytes a
/// pixel (8 with HDR) plus 10 MiB, rounded up to a power of two
/// (gnif/LookingGlass doc/install_libvirt.rst: 32 for 1080p, 64 for 1440p,
/// 128 for 4K). Too small cuts the picture.
pub fn looking_glass_mib(width: u32, height: u32, hdr: bool) -> u64 {
    let bpp: u64 = if hdr { 8 } else { 4 };
    let bytes = u64::from(width) * u64::from(height) * bpp * 2 + 10 * 1024 * 1024;
    bytes.div_ceil(1024 * 1024).next_power_of_two()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AudioBackend {
    Pipewire,
    Pulseaudio,
    Jack,
    /// Into the SPICE connection: the Looking Glass client (B6 and later)
    /// plays it, and the system QEMU needs no way into the user's session.
    Spice,
}

impl AudioBackend {
    pub fn libvirt_type(self) -> &'static str {
        match self {
            AudioBackend::Pipewire => "pipewire",
            AudioBackend::Pulseaudio => "pulseaudio",
            AudioBackend::Jack => "jack",
            AudioBackend::Spice => "spice",
        }
    }
}

/// The backend this host offers: with Looking Glass, SPICE (its client
/// plays the sound, nothing to open into the desktop session); else
/// PipeWire when QEMU (≥ 8.1) and libvirt (≥ 9.10) both know it, else
/// PulseAudio (which PipeWire desktops also answer through pipewire-pulse).
/// Versions as libvirt reports them (major × 1 000 000 + minor × 1000 +
/// micro).
pub fn audio_backend(
    qemu_version: Option<u64>,
    libvirt_version: Option<u64>,
    looking_glass: bool,
) -> AudioBackend {
    if looking_glass {
        return AudioBackend::Spice;
    }
    match (qemu_version, libvirt_version) {
        (Some(q), Some(l)) if q >= 8_001_000 && l >= 9_010_000 => AudioBackend::Pipewire,
        _ => AudioBackend::Pulseaudio,
    }
}

/// Sound as the user wants it: the backend and the desktop user's runtime
/// folder (`/run/user/1000`), where the session's sockets are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sound {
    pub backend: AudioBackend,
    pub runtime_dir: String,
}

/// A USB device by its IDs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsbId {
    pub vendor: u16,
    pub product: u16,
}

/// `vvvv:pppp` (hex) as `lsusb` shows it.
pub fn parse_usb_id(s: &str) -> Result<UsbId, crate::parse::ParseError> {
    let (v, p) = s.trim().split_once(':').ok_or_else(|| {
        crate::parse::ParseError(format!(
            "{s:?}: give VENDOR:PRODUCT in hex, as lsusb shows them (046d:c52b)"
        ))
    })?;
    let h = |x: &str| {
        (x.len() == 4)
            .then(|| u16::from_str_radix(x, 16).ok())
            .flatten()
            .ok_or_else(|| crate::parse::ParseError(format!("{s:?}: {x:?} is not four hex digits")))
    };
    Ok(UsbId {
        vendor: h(v)?,
        product: h(p)?,
    })
}

/// The desktop user's runtime folder, where their session's sound server
/// listens: the user who ran sudo or pkexec, else this process's.
pub fn session_runtime_dir() -> String {
    let uid = ["SUDO_UID", "PKEXEC_UID"]
        .iter()
        .find_map(|k| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok()))
        .unwrap_or_else(|| rustix::process::getuid().as_raw());
    format!("/run/user/{uid}")
}

/// Everything that makes the VM usable; each part optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Playable {
    pub evdev_keyboard: Option<String>,
    pub evdev_mouse: Option<String>,
    /// One of `GRAB_TOGGLES` (default ctrl-ctrl: both Ctrl keys).
    pub grab_toggle: Option<String>,
    pub looking_glass: Option<LookingGlass>,
    pub sound: Option<Sound>,
    pub usb: Vec<UsbId>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlayError {
    #[error(
        "{0}: not an evdev device (libvirt takes only /dev/input/…event… nodes, best the stable /dev/input/by-id/…-event-kbd names)"
    )]
    NotEvdev(String),
    #[error("grab toggle {0:?}: libvirt takes one of {1}")]
    Toggle(String, String),
    #[error("Looking Glass at {0}x{1}: give a resolution between 640x480 and 7680x4320")]
    Resolution(u32, u32),
    #[error("the document has no <devices>")]
    NoDevices,
    #[error(
        "sound through SPICE needs a SPICE display, and this domain has none (--no-spice, or removed): add Looking Glass (its client plays SPICE's sound), keep SPICE, or pick --sound pipewire or pulseaudio"
    )]
    SpiceSoundWithoutSpice,
}

fn edit(path: &str, what: String, why: &str) -> Edit {
    Edit {
        path: path.into(),
        what,
        why: why.into(),
    }
}

fn el(name: &str, attrs: &[(&str, &str)]) -> Element {
    let mut e = Element::new(name);
    for (k, v) in attrs {
        e.set_attr(k, v);
    }
    e
}

fn evdev_path_ok(p: &str) -> bool {
    p.starts_with("/dev/input/")
        && p.rsplit('/').next().is_some_and(|n| n.contains("event"))
        && !p.contains("..")
}

/// Check the choices before anything is written.
pub fn validate(p: &Playable) -> Result<(), PlayError> {
    for d in p.evdev_keyboard.iter().chain(&p.evdev_mouse) {
        if !evdev_path_ok(d) {
            return Err(PlayError::NotEvdev(d.clone()));
        }
    }
    if let Some(t) = &p.grab_toggle
        && !GRAB_TOGGLES.contains(&t.as_str())
    {
        return Err(PlayError::Toggle(t.clone(), GRAB_TOGGLES.join(", ")));
    }
    if let Some(lg) = &p.looking_glass
        && !(640..=7680).contains(&lg.width) | !(480..=4320).contains(&lg.height)
    {
        return Err(PlayError::Resolution(lg.width, lg.height));
    }
    Ok(())
}

/// Apply `p` to the domain: each part replaces what the domain had for it
/// (old evdev inputs, an input-linux recipe, an earlier shmem, sound card),
/// everything else stays as it was.
pub fn apply_playable(doc: &mut Document, p: &Playable) -> Result<Vec<Edit>, PlayError> {
    validate(p)?;
    let mut edits = Vec::new();
    if p.evdev_keyboard.is_some() || p.evdev_mouse.is_some() {
        edits.extend(input_linux_migrated(doc));
        edits.extend(evdev(doc, p)?);
    }
    for id in &p.usb {
        edits.extend(usb(doc, id)?);
    }
    if let Some(lg) = &p.looking_glass {
        edits.extend(looking_glass::apply(doc, lg)?);
    }
    if let Some(s) = &p.sound {
        edits.extend(sound(doc, s)?);
    }
    doc.indent_new_elements();
    Ok(edits)
}

fn devices(doc: &mut Document) -> Result<&mut Element, PlayError> {
    doc.root
        .child_or_insert("devices")
        .ok_or(PlayError::NoDevices)
}

fn evdev(doc: &mut Document, p: &Playable) -> Result<Vec<Edit>, PlayError> {
    let toggle = p.grab_toggle.as_deref().unwrap_or("ctrl-ctrl");
    let d = devices(doc)?;
    d.remove_children_where(|e| e.name == "input" && e.attr("type") == Some("evdev"));
    let mut edits = Vec::new();
    if let Some(kbd) = &p.evdev_keyboard {
        let mut input = el("input", &[("type", "evdev")]);
        input.append_child(el(
            "source",
            &[
                ("dev", kbd),
                ("grab", "all"),
                ("grabToggle", toggle),
                ("repeat", "on"),
            ],
        ));
        d.append_child(input);
        edits.push(edit("devices/input", format!("keyboard {kbd} by evdev, {toggle} switches"), "The keyboard goes to the VM as itself (no USB hand-over, no lag); pressing both toggle keys gives keyboard and mouse back to the host and again to the VM. grab='all' takes every node of it, repeat='on' keeps key repeat in the guest."));
    }
    if let Some(mouse) = &p.evdev_mouse {
        let mut input = el("input", &[("type", "evdev")]);
        input.append_child(el("source", &[("dev", mouse)]));
        d.append_child(input);
        edits.push(edit(
            "devices/input",
            format!("mouse {mouse} by evdev"),
            "The mouse follows the keyboard's toggle: one grab for both.",
        ));
    }
    edits.extend(virtio_inputs(d, "Once Windows has the virtio-win vioinput driver, evdev input reaches it through this paravirtual device instead of emulated PS/2: lower latency, no lost keys."));
    Ok(edits)
}

/// A virtio keyboard and mouse, each added when the domain has none.
fn virtio_inputs(d: &mut Element, why: &str) -> Vec<Edit> {
    let mut edits = Vec::new();
    for kind in ["keyboard", "mouse"] {
        let has = d.elements().any(|e| {
            e.name == "input" && e.attr("type") == Some(kind) && e.attr("bus") == Some("virtio")
        });
        if !has {
            d.append_child(el("input", &[("type", kind), ("bus", "virtio")]));
            edits.push(edit("devices/input", format!("virtio {kind}"), why));
        }
    }
    edits
}

/// An old `-object input-linux,evdev=…` recipe in `<qemu:commandline>`
/// removed (the native element replaces it; it needed cgroup_device_acl).
fn input_linux_migrated(doc: &mut Document) -> Vec<Edit> {
    let Some(cmd) = doc.root.child_mut("qemu:commandline") else {
        return Vec::new();
    };
    let args: Vec<String> = cmd
        .elements()
        .filter(|e| e.name == "qemu:arg")
        .map(|e| e.attr("value").unwrap_or("").to_string())
        .collect();
    // Each `input-linux,…` value, and the `-object` before it.
    let mut keep = vec![true; args.len()];
    for (i, a) in args.iter().enumerate() {
        if a.contains("input-linux") {
            keep[i] = false;
            if i > 0 && args[i - 1] == "-object" {
                keep[i - 1] = false;
            }
        }
    }
    let removed = keep.iter().filter(|k| !**k).count();
    if removed == 0 {
        return Vec::new();
    }
    let n = std::cell::Cell::new(0usize);
    cmd.remove_children_where(|e| {
        if e.name != "qemu:arg" {
            return false;
        }
        let k = keep.get(n.get()).copied().unwrap_or(true);
        n.set(n.get() + 1);
        !k
    });
    if !cmd
        .elements()
        .any(|e| e.name == "qemu:arg" || e.name == "qemu:env")
    {
        doc.root.remove_children("qemu:commandline");
    }
    vec![edit(
        "qemu:commandline",
        format!("input-linux recipe removed ({removed} arguments)"),
        "The evdev devices are now libvirt's own <input type='evdev'> elements: libvirt gives QEMU access to them itself, so the cgroup_device_acl and AppArmor edits the old recipe needed are not.",
    )]
}

fn usb(doc: &mut Document, id: &UsbId) -> Result<Vec<Edit>, PlayError> {
    let v = format!("0x{:04x}", id.vendor);
    let p = format!("0x{:04x}", id.product);
    let d = devices(doc)?;
    let same = |e: &Element| {
        e.name == "hostdev"
            && e.attr("type") == Some("usb")
            && e.child("source").is_some_and(|s| {
                s.child("vendor").and_then(|x| x.attr("id")) == Some(v.as_str())
                    && s.child("product").and_then(|x| x.attr("id")) == Some(p.as_str())
            })
    };
    if d.elements().any(same) {
        return Ok(Vec::new());
    }
    let mut h = el(
        "hostdev",
        &[("mode", "subsystem"), ("type", "usb"), ("managed", "yes")],
    );
    let mut s = el("source", &[("startupPolicy", "optional")]);
    s.append_child(el("vendor", &[("id", &v)]));
    s.append_child(el("product", &[("id", &p)]));
    h.append_child(s);
    d.append_child(h);
    Ok(vec![edit(
        "devices/hostdev",
        format!("USB device {:04x}:{:04x}", id.vendor, id.product),
        "Passed by its IDs, startupPolicy='optional': when it is unplugged the VM still starts without it. Replugged while the VM runs it stays with the host until the next start (libvirt follows IDs, not ports).",
    )])
}

fn sound(doc: &mut Document, s: &Sound) -> Result<Vec<Edit>, PlayError> {
    let d = devices(doc)?;
    // QEMU's SPICE audio plays into a SPICE server's playback channel:
    // without a SPICE display there is no server and no client to hear it.
    if s.backend == AudioBackend::Spice
        && !d
            .elements()
            .any(|e| e.name == "graphics" && e.attr("type") == Some("spice"))
    {
        return Err(PlayError::SpiceSoundWithoutSpice);
    }
    d.remove_children("sound");
    d.remove_children("audio");
    let mut snd = el("sound", &[("model", "ich9")]);
    snd.append_child(el("audio", &[("id", "1")]));
    d.append_child(snd);
    let mut audio = el("audio", &[("id", "1"), ("type", s.backend.libvirt_type())]);
    match s.backend {
        AudioBackend::Pipewire => audio.set_attr("runtimeDir", &s.runtime_dir),
        AudioBackend::Pulseaudio => {
            audio.set_attr("serverName", &format!("{}/pulse/native", s.runtime_dir));
        }
        AudioBackend::Jack | AudioBackend::Spice => {}
    }
    for dir in ["input", "output"] {
        let mut x = el(dir, &[("mixingEngine", "yes"), ("fixedSettings", "yes")]);
        x.append_child(el(
            "settings",
            &[("frequency", "48000"), ("channels", "2"), ("format", "s16")],
        ));
        audio.append_child(x);
    }
    d.append_child(audio);
    let to = match s.backend {
        AudioBackend::Spice => "SPICE, played by the Looking Glass client".to_string(),
        b => format!("{} ({})", b.libvirt_type(), s.runtime_dir),
    };
    let through = match s.backend {
        AudioBackend::Spice => {
            "into SPICE, which the Looking Glass client plays on this host (Looking Glass's guide: <audio type='spice'>),"
        }
        _ => "played through your desktop's sound server",
    };
    Ok(vec![edit(
        "devices/sound",
        format!("ich9 sound on {to}"),
        &format!(
            "An Intel HD Audio device Windows drives itself, {through} at 48 kHz end to end (a rate changed on the way crackles). A monitor on the GPU has its HDMI/DisplayPort audio already (the card's audio function is passed with it): this is for headphones and speakers on the host."
        ),
    )])
}

#[cfg(test)]
mod tests;
