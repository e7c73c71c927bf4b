//! Host changes that make the VM usable (domain/playable.rs writes the
//! domain's side): Looking Glass's shared memory and sound for a QEMU that
//! runs as libvirt's own user.
//! * `looking-glass-shm`: a tmpfiles.d rule that creates
//!   `/dev/shm/looking-glass` owned by the desktop user and the kvm group,
//!   0660 — the Looking Glass project's own rule — so both the client (the
//!   user) and QEMU (libvirt-qemu, in kvm) can open it; created now too.
//! * `kvmfr`: the kvmfr module (the project's recommended way) loaded at
//!   boot with `static_size_mb`, its device given to the user by a udev
//!   rule, and `/dev/kvmfr0` added to libvirt's `cgroup_device_acl` (the
//!   defaults kept, the qemu-conf change) so QEMU may open it; where
//!   AppArmor confines QEMU (libvirt's `libvirt-qemu` abstraction is
//!   there: Debian, Ubuntu, SUSE), the guide's `/dev/kvmfr0 rw,` in the
//!   local abstraction, the file's other lines kept. A kvmfr loaded now
//!   with another size is unloaded and loaded again when nobody holds it
//!   (its reference count says so; the kernel refuses `modprobe -r` while
//!   a VM or the client has /dev/kvmfr0 open, so unloading is never
//!   unsafe, only refused) and left, with a note, when someone does. Only
//!   where the module is installed (its DKMS package): else the manual
//!   steps.
//! * `qemu-conf`: libvirt's qemu.conf, `/dev/kvmfr0` added to
//!   `cgroup_device_acl` for kvmfr, and — only when asked by name
//!   (`Request::qemu_as_user`, `--qemu-as-me`) — `user = "USER"` so a
//!   system QEMU can reach the desktop user's sound server (PulseAudio and
//!   PipeWire listen in the user's runtime folder, which no other user may
//!   enter). Said plainly in the change's title: every VM of the system
//!   libvirt then runs as that user, its disks handed to that user. The
//!   helper refuses it through the sudoers line (helper.rs).
//!
//! The desktop user comes from who asked (pkexec's PKEXEC_UID, sudo's
//! SUDO_UID; `Request::desktop_user` with `--root`), checked against the
//! host's own /etc/passwd.

use super::command::{Cmd, Module, Unit, UnitVerb};
use super::facts::TuneFacts;
use super::kinds::{ChangeId, Ctx, Kind, PlanError};
use super::model::{Change, CommandStep, Effect, FileChange, Manual};
use super::paths::{
    APPARMOR_LIBVIRT, APPARMOR_LOCAL, KVMFR_LOAD, KVMFR_MODPROBE, KVMFR_REFCNT, KVMFR_UDEV,
    LG_TMPFILES, QEMU_CONF,
};
use crate::tuning::paths;

/// Plans the `looking-glass-shm` kind (its line in `kinds::planner`).
pub(crate) fn plan_looking_glass_shm(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    if looking_glass_mib(cx)?.is_some() && !cx.req.kvmfr {
        out.changes
            .extend(looking_glass_shm(cx.facts, desktop_user(cx)?));
    }
    Ok(())
}

/// Plans the `kvmfr` kind (its line in `kinds::planner`).
pub(crate) fn plan_kvmfr(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    if let Some(mib) = looking_glass_mib(cx)?
        && cx.req.kvmfr
    {
        match kvmfr(cx.facts, desktop_user(cx)?, mib) {
            Ok(c) => out.changes.extend(c),
            Err(m) => out.manual.push(m),
        }
    }
    Ok(())
}

/// Plans the `qemu-conf` kind (its line in `kinds::planner`).
pub(crate) fn plan_qemu_conf(
    cx: &crate::tuning::kinds::Ctx,
    out: &mut crate::tuning::kinds::Planned,
) -> Result<(), crate::tuning::kinds::PlanError> {
    let kvmfr_used = cx.req.kvmfr && looking_glass_mib(cx)?.is_some() && cx.facts.kvmfr_module;
    if kvmfr_used || cx.req.qemu_as_user {
        out.changes.extend(qemu_conf(
            cx.facts,
            desktop_user(cx)?,
            kvmfr_used,
            cx.req.qemu_as_user,
        ));
    }
    Ok(())
}

/// The desktop user Looking Glass and sound are set up for, checked.
fn desktop_user<'a>(cx: &Ctx<'a>) -> Result<&'a str, PlanError> {
    let user = cx.req.desktop_user.as_deref().map(str::trim).unwrap_or("");
    if !valid_user(user) || !cx.facts.is_person(user) {
        return Err(PlanError::User(format!(
            "{user:?} is not a user of this host (Looking Glass and QEMU's user are set up for the desktop's user: --user NAME)"
        )));
    }
    Ok(user)
}

/// Looking Glass's shared memory asked for, checked (and the user with it).
fn looking_glass_mib(cx: &Ctx) -> Result<Option<u64>, PlanError> {
    let Some(mib) = cx.req.looking_glass_mib else {
        return Ok(None);
    };
    desktop_user(cx)?;
    if !(16..=1024).contains(&mib) {
        return Err(PlanError::User(format!(
            "{mib} MiB of shared memory for Looking Glass: 16 to 1024 MiB (it follows the resolution)"
        )));
    }
    Ok(Some(mib))
}
/// The line Looking Glass's guide adds for QEMU.
const APPARMOR_KVMFR: &str = "/dev/kvmfr0 rw,";

/// libvirt's own default `cgroup_device_acl` (qemu.conf's commented list).
const DEFAULT_ACL: &[&str] = &[
    paths::DEV_NULL,
    "/dev/full",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/ptmx",
    "/dev/kvm",
];

/// A user name we put into config files: what useradd takes.
pub fn valid_user(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-".contains(&b))
}

fn cmd(c: Cmd, why: &str) -> CommandStep {
    CommandStep::new(c, why)
}

/// The libvirt daemon that reads qemu.conf and runs the hooks.
pub(super) fn daemon(f: &TuneFacts) -> Unit {
    if f.markers.contains(paths::RUN_LIBVIRT_VIRTQEMUD_SOCK) {
        Unit::Virtqemud
    } else {
        Unit::Libvirtd
    }
}

fn file_change(f: &TuneFacts, path: &str, after: String) -> Option<FileChange> {
    let before = f.file(path).map(str::to_string);
    (before.as_deref() != Some(after.as_str())).then(|| FileChange {
        path: path.into(),
        before,
        after: Some(after),
    })
}

/// The values of an uncommented `key = [ … ]` list in qemu.conf.
fn conf_list(text: &str, key: &str) -> Option<Vec<String>> {
    let start = text
        .lines()
        .position(|l| l.trim_start().starts_with(key) && l.contains('='))?;
    let mut body = String::new();
    for l in text.lines().skip(start) {
        body.push_str(l);
        body.push('\n');
        if l.contains(']') {
            break;
        }
    }
    Some(
        body.split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// qemu.conf with `key` set to `value` (its own lines replaced where an
/// uncommented setting is, appended with a comment of ours where not).
pub fn set_conf(text: &str, key: &str, value: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    let mut done = false;
    while let Some(l) = lines.next() {
        let t = l.trim_start();
        let is_key = t.starts_with(key) && t[key.len()..].trim_start().starts_with('=');
        if is_key && !done {
            // A list may span lines up to its `]`.
            if l.contains('[') && !l.contains(']') {
                for more in lines.by_ref() {
                    if more.contains(']') {
                        break;
                    }
                }
            }
            out.push_str(&format!("{key} = {value}\n"));
            done = true;
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    if !done {
        out.push_str(&format!(
            "\n# Written by vfio-assistant (tune). Undo: `sudo vfio-assistant tune undo ID` (`tune list` names it).\n{key} = {value}\n"
        ));
    }
    out
}

/// The change that gives `/dev/shm/looking-glass` to the user and QEMU.
pub fn looking_glass_shm(f: &TuneFacts, user: &str) -> Option<Change> {
    let after = format!(
        "# Written by vfio-assistant (tune): Looking Glass's shared memory, for the client\n# ({user}) and QEMU (the kvm group). Undo: `sudo vfio-assistant tune undo ID` (`tune list` names it).\nf /dev/shm/looking-glass 0660 {user} kvm -\n"
    );
    let fc = file_change(f, LG_TMPFILES, after)?;
    Some(Change {
        id: ChangeId::of(Kind::LookingGlassShm),
        title: format!("/dev/shm/looking-glass for {user} and QEMU (tmpfiles.d)"),
        why: "The Looking Glass client (you) and QEMU (libvirt's user, in the kvm group) share the frames through this file; created by QEMU it would be QEMU's alone and the client could not open it. The rule makes it at every boot with the right owner, as the Looking Glass project's guide does.".into(),
        effect: Effect::Now,
        files: vec![fc],
        commands: vec![cmd(
            Cmd::TmpfilesLookingGlass,
            "creates it now, without a reboot",
        )],
        ..Change::default()
    })
}

/// Whether AppArmor confines QEMU on this host: libvirt's abstraction for
/// it is there (or the local one, which only it includes).
fn apparmor(f: &TuneFacts) -> bool {
    f.markers.contains(APPARMOR_LIBVIRT)
        || f.file(APPARMOR_LOCAL).is_some()
        || f.unreadable.contains(APPARMOR_LOCAL)
}

/// The local abstraction with the kvmfr line: every line it has kept, ours
/// appended once.
pub fn apparmor_local(text: Option<&str>) -> String {
    let mut out = text.unwrap_or("").to_string();
    if out.lines().any(|l| l.trim() == APPARMOR_KVMFR) {
        return out;
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "# Looking Glass's kvmfr device for QEMU (written by vfio-assistant; undo: `sudo vfio-assistant tune undo ID`, `tune list` names it).\n{APPARMOR_KVMFR}\n"
    ));
    out
}

/// The `static_size_mb` a kvmfr modprobe.d file gives (its first device).
fn size_in(text: Option<&str>) -> Option<u64> {
    text?.lines().find_map(|l| {
        let l = l.trim();
        if !l.starts_with("options") || !l.split_whitespace().any(|w| w == "kvmfr") {
            return None;
        }
        let v = l.split("static_size_mb=").nth(1)?;
        v.split([',', ' ']).next()?.trim().parse().ok()
    })
}

/// The kvmfr module set up for `mib` of shared memory, or the manual steps
/// when it is not installed.
pub fn kvmfr(f: &TuneFacts, user: &str, mib: u64) -> Result<Option<Change>, Manual> {
    if !f.kvmfr_module {
        return Err(Manual {
            id: ChangeId::of(Kind::Kvmfr),
            title: "Install the kvmfr module (Looking Glass)".into(),
            why: "kvmfr is not in the kernel: it comes with Looking Glass's source (module/), usually as a DKMS package.".into(),
            steps: vec![
                "Debian/Ubuntu: `sudo apt install looking-glass-module-dkms` where packaged, else build module/ from the Looking Glass release with `sudo dkms install .`".into(),
                "Arch: `looking-glass-module-dkms` from the AUR. Fedora: the kvmfr COPR or DKMS from the source.".into(),
                "Then plan again: the tuning sets it up (its size, the udev rule, libvirt's device list).".into(),
            ],
        });
    }
    let mut files = Vec::new();
    files.extend(file_change(
        f,
        KVMFR_MODPROBE,
        format!("# Written by vfio-assistant (tune): Looking Glass's kvmfr device, {mib} MiB.\noptions kvmfr static_size_mb={mib}\n"),
    ));
    files.extend(file_change(
        f,
        KVMFR_LOAD,
        "# Written by vfio-assistant (tune): load kvmfr at boot for Looking Glass.\nkvmfr\n".into(),
    ));
    files.extend(file_change(
        f,
        KVMFR_UDEV,
        format!("# Written by vfio-assistant (tune): /dev/kvmfr0 for {user} and QEMU.\nSUBSYSTEM==\"kvmfr\", OWNER=\"{user}\", GROUP=\"kvm\", MODE=\"0660\"\n"),
    ));
    let mut notes = Vec::new();
    let mut why = String::from(
        "kvmfr gives the Looking Glass client the guest's frames without a copy through /dev/shm (the project's recommended way). It is loaded at every boot with the size the VM's resolution needs and /dev/kvmfr0 belongs to you and QEMU; libvirt's qemu.conf lets QEMU open it (the qemu-conf change).",
    );
    if apparmor(f) {
        let before = files.len();
        files.extend(file_change(
            f,
            APPARMOR_LOCAL,
            apparmor_local(f.file(APPARMOR_LOCAL)),
        ));
        if files.len() > before {
            why.push_str(" AppArmor confines QEMU on this host and refuses it a device its profile does not name: the line `/dev/kvmfr0 rw,` in libvirt's local abstraction for QEMU (Looking Glass's guide) lets it open /dev/kvmfr0; libvirt loads each VM's profile, which includes it, when the VM starts.");
        }
        if f.unreadable.contains(APPARMOR_LOCAL) {
            notes.push(format!("{APPARMOR_LOCAL} is readable by root only: its lines are planned again by the helper, as root, when you apply."));
        }
    }
    if files.is_empty() {
        return Ok(None);
    }
    let mut commands = Vec::new();
    let old = size_in(f.file(KVMFR_MODPROBE));
    // Loaded now with a size other than this one (or one this tuning did
    // not set): a module keeps its options until it is loaded again.
    if let Some(holders) = f.value(KVMFR_REFCNT).map(str::trim)
        && old != Some(mib)
    {
        let at = old.map_or("with a size not set here".to_string(), |o| {
            format!("with {o} MiB")
        });
        if holders == "0" {
            commands.push(cmd(
                Cmd::ModprobeRemove {
                    module: Module::Kvmfr,
                },
                &format!("unloads the kvmfr loaded now {at}, so that it comes back with {mib} MiB: nobody has /dev/kvmfr0 open (its reference count is 0)"),
            ));
            notes.push(format!("kvmfr is loaded now {at}: it is unloaded and loaded again with {mib} MiB. The kernel refuses to unload it while a VM or the Looking Glass client has /dev/kvmfr0 open; should one open it before you apply, the apply stops there and gives everything back — shut the VM down and close the client first."));
        } else {
            notes.push(format!("kvmfr is loaded now {at} and in use ({holders} holder(s) of /dev/kvmfr0: a running VM or the Looking Glass client), so it is not unloaded here (the kernel would refuse). It keeps its old size until it is loaded again: at the next boot, or `sudo modprobe -r kvmfr && sudo modprobe kvmfr` once the VM is shut down and the client closed. Until then a VM set up for {mib} MiB cannot map its shared memory."));
        }
    }
    commands.push(cmd(
        Cmd::Modprobe {
            module: Module::Kvmfr,
        },
        "loads it now with the size from its modprobe.d file (nothing when it is loaded already)",
    ));
    Ok(Some(Change {
        id: ChangeId::of(Kind::Kvmfr),
        title: format!("kvmfr for Looking Glass: {mib} MiB at /dev/kvmfr0"),
        why,
        effect: Effect::Now,
        files,
        commands,
        notes,
        ..Change::default()
    }))
}

/// What making QEMU run as `user` does, in the words the plan's title, the
/// CLI's prompt and the Tuning page say it.
pub fn qemu_as_user_words(user: &str) -> String {
    format!(
        "QEMU runs as {user}: every VM of the system libvirt, and the disk images libvirt hands to QEMU, become {user}'s"
    )
}

/// libvirt's qemu.conf, one change for everything asked of it: `/dev/kvmfr0`
/// in `cgroup_device_acl` (libvirt's defaults kept) so QEMU may open it,
/// and with `qemu_as_user` `user = "USER"` so a system QEMU reaches the
/// desktop user's sound server (named first in the title: every system VM
/// becomes that user's). Every other line stays as it is.
pub fn qemu_conf(f: &TuneFacts, user: &str, kvmfr: bool, qemu_as_user: bool) -> Option<Change> {
    let mut conf = f.file(QEMU_CONF).unwrap_or("").to_string();
    let mut what = Vec::new();
    let mut notes = Vec::new();
    if kvmfr {
        let mut acl: Vec<String> = conf_list(&conf, "cgroup_device_acl")
            .unwrap_or_else(|| DEFAULT_ACL.iter().map(|s| s.to_string()).collect());
        if !acl.iter().any(|d| d == "/dev/kvmfr0") {
            acl.push("/dev/kvmfr0".into());
            let value = format!(
                "[\n    {}\n]",
                acl.iter()
                    .map(|d| format!("\"{d}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            conf = set_conf(&conf, "cgroup_device_acl", &value);
            what.push("/dev/kvmfr0 for QEMU".to_string());
        }
    }
    if qemu_as_user {
        let want = format!("\"{user}\"");
        let current = conf
            .lines()
            .find(|l| {
                let t = l.trim_start();
                t.starts_with("user") && t[4..].trim_start().starts_with('=')
            })
            .and_then(|l| l.split('=').nth(1))
            .map(|v| v.trim().to_string());
        if current.as_deref() != Some(want.as_str()) {
            conf = set_conf(&conf, "user", &want);
            what.insert(0, qemu_as_user_words(user));
            notes.push(format!("Every VM of the system libvirt then runs as {user}: its disk images must be readable by {user} (libvirt's dynamic ownership hands them over at start), and a VM no longer runs as the unprivileged libvirt-qemu."));
        }
    }
    let fc = file_change(f, QEMU_CONF, conf)?;
    if f.unreadable.contains(QEMU_CONF) {
        notes.push("qemu.conf is readable by root only: the exact lines are planned again by the helper, as root, when you apply.".into());
    }
    let unit = daemon(f);
    Some(Change {
        id: ChangeId::of(Kind::QemuConf),
        title: format!("libvirt's qemu.conf: {}", what.join("; ")),
        why: format!(
            "QEMU may open only the devices qemu.conf lists (kvmfr's is not among libvirt's defaults); and PulseAudio and PipeWire listen in {user}'s runtime folder (/run/user/UID), which no other user may enter, so a QEMU running as libvirt-qemu cannot play through them — running it as {user} is the simple, documented way (an ACL on the runtime folder is lost at every login). libvirt reads the file when it starts."
        ),
        effect: Effect::AtVmStart,
        files: vec![fc],
        commands: vec![cmd(
            Cmd::Systemctl {
                verb: UnitVerb::TryRestart,
                unit,
            },
            "libvirt reads qemu.conf when it starts; running VMs keep running",
        )],
        undo_commands: vec![cmd(
            Cmd::Systemctl {
                verb: UnitVerb::TryRestart,
                unit,
            },
            "libvirt reads the restored qemu.conf",
        )],
        notes,
        ..Change::default()
    })
}

#[cfg(test)]
mod tests;
