//! Shared GPU, the desktop's side: keep the compositor off the lent card,
//! so that handing it to the VM never tears the session down (no
//! compositor gives up a card it drives; shared/research/lend-gpu.md §1).
//! Per compositor, from what the host has installed:
//! * GNOME (mutter ≥ 40.2): the udev tag `mutter-device-ignore` on the
//!   card's DRM node — on the `drm` device, never the PCI one (mutter reads
//!   it there only);
//! * KDE (KWin): `KWIN_DRM_DEVICES`, wlroots (Sway, labwc, river, Wayfire):
//!   `WLR_DRM_DEVICES`, Hyprland: `AQ_DRM_DEVICES` — each a list of the
//!   cards it may use, given the desktop's card alone by a stable name of
//!   ours (`/dev/dri/vfio-assistant-desktop-card`, a udev symlink: the
//!   by-path names hold colons, which those lists split on, and cardN
//!   numbers change between boots), in a systemd environment.d file (what
//!   a systemd-started session reads);
//! * Xorg: `AutoAddGPU "false"`, so the card never becomes a GPU screen.
//!   No `Device` section is written: a wrong one leaves the desktop black.
//!
//! Render offload still reaches the card while the VM is off: programs open
//! its render node themselves (`DRI_PRIME=pci-0000_0b_00_0`, `prime-run`).
//! The udev rule is written and `udevadm trigger` run at once, and the
//! symlink checked, before the environment file names it: a compositor told
//! to use a card that is not there would not start.

use super::command::Cmd;
use super::facts::TuneFacts;
use super::kinds::{ChangeId, Ctx, Kind, PlanError, Planned};
use super::model::{Change, CommandStep, Effect, FileChange, Verify};
use super::paths::{
    DESKTOP_CARD, SHARED_GPU_ENVIRONMENT as ENVIRONMENT, SHARED_GPU_UDEV as UDEV,
    SHARED_GPU_XORG as XORG,
};
use crate::host::HostSnapshot;

/// The compositors this host has installed (program names as in /usr/bin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compositor {
    Mutter,
    Kwin,
    Wlroots,
    Hyprland,
    Xorg,
}

impl Compositor {
    /// The programs that say it is installed.
    fn programs(self) -> &'static [&'static str] {
        match self {
            Compositor::Mutter => &["gnome-shell"],
            Compositor::Kwin => &["kwin_wayland", "kwin_x11"],
            Compositor::Wlroots => &["sway", "labwc", "river", "wayfire"],
            Compositor::Hyprland => &["Hyprland"],
            Compositor::Xorg => &["Xorg"],
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Compositor::Mutter => "GNOME (mutter)",
            Compositor::Kwin => "KDE Plasma (KWin)",
            Compositor::Wlroots => "wlroots (Sway, labwc, river, Wayfire)",
            Compositor::Hyprland => "Hyprland",
            Compositor::Xorg => "Xorg",
        }
    }

    pub const ALL: [Compositor; 5] = [
        Compositor::Mutter,
        Compositor::Kwin,
        Compositor::Wlroots,
        Compositor::Hyprland,
        Compositor::Xorg,
    ];
}

pub fn installed(f: &TuneFacts) -> Vec<Compositor> {
    Compositor::ALL
        .into_iter()
        .filter(|c| c.programs().iter().any(|p| f.has_tool(p)))
        .collect()
}

pub(crate) fn plan(cx: &Ctx, out: &mut Planned) -> Result<(), PlanError> {
    if !cx.req.shared_gpu {
        return Ok(());
    }
    let card = super::devices::card_functions(cx.snap, cx.req)?;
    let Some(gpu) = card.first() else {
        return Ok(()); // the hook's planner says what is missing
    };
    let Some(desktop) = desktop_card(cx.snap, &card) else {
        return Ok(());
    };
    let which = installed(cx.facts);
    let lists = which.iter().any(|c| {
        matches!(
            c,
            Compositor::Kwin | Compositor::Wlroots | Compositor::Hyprland
        )
    });
    // Other cards the desktop may drive too: the lists name only one.
    let more: Vec<String> = cx
        .snap
        .gpus()
        .map(|e| e.device.address.clone())
        .filter(|a| !card.contains(a) && *a != desktop)
        .collect();
    out.changes
        .extend(shared_desktop(cx.facts, gpu, &desktop, &which).map(|mut c| {
            if lists && !more.is_empty() {
                c.notes.push(format!(
                    "This host has more GPUs for the desktop ({}): KDE, wlroots and Hyprland are told to use {desktop} only, so a monitor on another goes dark at the next login: keep the monitors on {desktop} (naming several desktop cards is not done yet).",
                    more.join(", ")
                ));
            }
            c
        }));
    Ok(())
}

/// The card the desktop keeps: the boot GPU, else the first other GPU.
fn desktop_card(snap: &HostSnapshot, lent: &[String]) -> Option<String> {
    let others: Vec<&crate::host::PciEntry> = snap
        .gpus()
        .filter(|e| !lent.contains(&e.device.address))
        .collect();
    others
        .iter()
        .find(|e| e.device.boot_vga == Some(true))
        .or(others.first())
        .map(|e| e.device.address.clone())
}

fn udev_rule(gpu: &str, desktop: &str) -> String {
    format!(
        r#"# Written by vfio-assistant (tune, change shared-gpu-desktop). Shared GPU:
# {gpu} is lent to the VM while it runs, so the desktop must not drive it.
# GNOME's mutter skips a card whose DRM node carries this tag (mutter >= 40.2).
SUBSYSTEM=="drm", KERNEL=="card[0-9]*", KERNELS=="{gpu}", TAG+="mutter-device-ignore"
# The desktop's own card by a stable name, for KWIN_DRM_DEVICES,
# WLR_DRM_DEVICES and AQ_DRM_DEVICES (by-path names hold colons).
SUBSYSTEM=="drm", KERNEL=="card[0-9]*", KERNELS=="{desktop}", SYMLINK+="dri/vfio-assistant-desktop-card"
"#
    )
}

fn environment(gpu: &str, which: &[Compositor]) -> String {
    let mut s = format!(
        "# Written by vfio-assistant (tune, change shared-gpu-desktop). Shared GPU:\n# the compositor drives only the desktop's card, never {gpu} (lent to the VM).\n"
    );
    for c in which {
        let var = match c {
            Compositor::Kwin => "KWIN_DRM_DEVICES",
            Compositor::Wlroots => "WLR_DRM_DEVICES",
            Compositor::Hyprland => "AQ_DRM_DEVICES",
            _ => continue,
        };
        s.push_str(&format!("{var}={DESKTOP_CARD}\n"));
    }
    s
}

const XORG_TEXT: &str = r#"# Written by vfio-assistant (tune, change shared-gpu-desktop). Shared GPU:
# a card Xorg did not start on never becomes a GPU screen of its own, so the
# lent card is not held by the X server.
Section "ServerFlags"
    Option "AutoAddGPU" "false"
EndSection
"#;

/// DRI_PRIME's name for a card (`pci-0000_0b_00_0`).
pub fn dri_prime(addr: &str) -> String {
    format!("pci-{}", addr.replace([':', '.'], "_"))
}

/// The desktop's settings for lending `gpu` while it keeps `desktop`,
/// for the compositors `which`; `None` when they already say so.
pub fn shared_desktop(
    f: &TuneFacts,
    gpu: &str,
    desktop: &str,
    which: &[Compositor],
) -> Option<Change> {
    let mut files = vec![file(f, UDEV, udev_rule(gpu, desktop))];
    let env_vars = which.iter().any(|c| {
        matches!(
            c,
            Compositor::Kwin | Compositor::Wlroots | Compositor::Hyprland
        )
    });
    if env_vars {
        files.push(file(f, ENVIRONMENT, environment(gpu, which)));
    }
    if which.contains(&Compositor::Xorg) {
        files.push(file(f, XORG, XORG_TEXT.to_string()));
    }
    files.retain(|c| c.before != c.after);
    if files.is_empty() {
        return None;
    }
    let mut notes: Vec<String> = which
        .iter()
        .map(|c| match c {
            Compositor::Mutter => format!("GNOME: the udev tag mutter-device-ignore on {gpu}'s DRM node (mutter 40.2 and newer read it at start)."),
            Compositor::Kwin => format!("KDE Plasma: KWIN_DRM_DEVICES={DESKTOP_CARD} in {ENVIRONMENT} (read by a Plasma session started by systemd, the default since Plasma 5.25)."),
            Compositor::Wlroots => format!("wlroots: WLR_DRM_DEVICES={DESKTOP_CARD} in {ENVIRONMENT}; a compositor started from a TTY's shell does not read it: export it in that shell's profile."),
            Compositor::Hyprland => format!("Hyprland: AQ_DRM_DEVICES={DESKTOP_CARD} in {ENVIRONMENT} (uwsm users: put it in ~/.config/uwsm/env too)."),
            Compositor::Xorg => format!("Xorg: AutoAddGPU off ({XORG}), so {gpu} never becomes a GPU screen; NVIDIA's render offload on Xorg needs that screen, so on Xorg use the card from Wayland or for compute only."),
        })
        .collect();
    if which.is_empty() {
        notes.push("No compositor this knows was found (GNOME, KDE, wlroots, Hyprland, Xorg): only the udev tag is written; if yours drives every card, tell it to use only the desktop's.".into());
    }
    notes.push(format!("The settings take effect at the next login (or reboot). While the VM is off, programs still reach {gpu} for rendering and compute: DRI_PRIME={} (Mesa), prime-run or __NV_PRIME_RENDER_OFFLOAD=1 (NVIDIA), CUDA as usual.", dri_prime(gpu)));
    Some(Change {
        id: ChangeId::of(Kind::SharedGpuDesktop),
        title: format!("Keep the desktop off {gpu} (it drives {desktop} only)"),
        why: format!(
            "A compositor that drives {gpu} never lets it go: lending the card to the VM would tear the session down, or the start would hang. Told to leave it alone, the desktop runs on {desktop}, and {gpu} can go to the VM and come back while you stay logged in."
        ),
        effect: Effect::AfterReboot,
        files,
        commands: vec![CommandStep::new(
            Cmd::UdevadmTriggerDrm,
            "applies the rule to the cards now, so the desktop card's name exists before anything names it",
        )],
        undo_commands: vec![CommandStep::new(
            Cmd::UdevadmTriggerDrm,
            "takes the tag and the name away again",
        )],
        verify: if env_vars {
            vec![Verify::Exists {
                path: DESKTOP_CARD.into(),
            }]
        } else {
            Vec::new()
        },
        notes,
        ..Change::default()
    })
}

fn file(f: &TuneFacts, path: &str, after: String) -> FileChange {
    FileChange {
        path: path.into(),
        before: f.file(path).map(str::to_string),
        after: Some(after),
    }
}
