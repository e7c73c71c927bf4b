//! What each change kind may touch, read from its line in `kind::KINDS`:
//! the files it may write or restore, the sysfs/procfs values, the
//! programs it may run; and the modes a restored file may get. The one
//! allowlist: `fsops` writes nothing outside the
//! union, a plan is checked against it before it is applied, and a journal
//! entry is checked against it before undo believes a word of it — a
//! change kind's file restored only where that kind writes, its commands
//! only those that kind runs, no setuid/setgid/sticky bit and nothing
//! writable by others.

use super::command::Cmd;
use super::kind::{KINDS, Kind, Spec};
use super::model::{Change, Plan};
use crate::tuning::paths;

/// Generated files this tool may save, put back, stage and switch (host
/// paths; `*` matches within one path component).
const ARTIFACTS: &[&str] = &[
    paths::BOOT_GRUB_GRUB_CFG,
    paths::BOOT_GRUB2_GRUB_CFG,
    "/boot/grub/.vfio-assistant-grub.cfg",
    "/boot/grub2/.vfio-assistant-grub.cfg",
    // grub-mkconfig's own temporary beside the staged file (it writes
    // `OUTPUT.new`, then renames): left by a power cut, removed by undo.
    "/boot/grub/.vfio-assistant-grub.cfg.new",
    "/boot/grub2/.vfio-assistant-grub.cfg.new",
    // GRUB's environment block: grub-reboot's next_entry (boot/grub_once.rs).
    paths::BOOT_GRUB_GRUBENV,
    paths::BOOT_GRUB2_GRUBENV,
    "/boot/initrd.img-*",
    "/boot/initramfs-*.img",
    // kernel-install's layout, ESP/<entry token>/<release>/initrd (Debian
    // keeps the image's own name there: initrd.img-<release>).
    "/boot/efi/*/*/initrd",
    "/efi/*/*/initrd",
    "/boot/*/*/initrd",
    "/boot/efi/*/*/initrd.img-*",
    "/efi/*/*/initrd.img-*",
    "/boot/*/*/initrd.img-*",
    "/boot/efi/loader/entries/*.conf",
    "/efi/loader/entries/*.conf",
    "/boot/loader/entries/*.conf",
    // Unified kernel images, as kernel-install's 90-uki-copy names them
    // (ESP/EFI/Linux/<entry token>-<release>.efi).
    "/boot/efi/EFI/Linux/*.efi",
    "/efi/EFI/Linux/*.efi",
    "/boot/EFI/Linux/*.efi",
];

fn component_matches(pat: &str, name: &str) -> bool {
    match pat.split_once('*') {
        None => pat == name,
        Some((a, b)) => {
            !matches!(name, "" | "." | "..")
                && name.len() > a.len() + b.len()
                && name.starts_with(a)
                && name.ends_with(b)
        }
    }
}

pub fn artifact_allowed(path: &str) -> bool {
    let q: Vec<&str> = path.split('/').collect();
    ARTIFACTS.iter().any(|p| {
        let p: Vec<&str> = p.split('/').collect();
        p.len() == q.len() && p.iter().zip(&q).all(|(a, b)| component_matches(a, b))
    })
}

fn matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let q: Vec<&str> = path.split('/').collect();
    p.len() == q.len()
        && p.iter()
            .zip(&q)
            .all(|(a, b)| (*a == "*" && !b.is_empty() && *b != ".." && *b != ".") || a == b)
}

fn allowed(table: fn(&Spec) -> &'static [&'static str], kind: Option<Kind>, path: &str) -> bool {
    KINDS
        .iter()
        .filter(|s| kind.is_none_or(|k| s.kind == k))
        .any(|s| table(s).iter().any(|p| matches(p, path)))
}

/// A file this change kind writes (`None`: any kind).
pub fn file_for(kind: Option<Kind>, path: &str) -> bool {
    allowed(|s| s.files, kind, path)
}

/// A value this change kind writes (`None`: any kind).
pub fn value_for(kind: Option<Kind>, path: &str) -> bool {
    allowed(|s| s.values, kind, path)
}

/// Whether the change kind runs `cmd`.
pub fn command_for(kind: Kind, cmd: &Cmd) -> bool {
    (kind.spec().runs)(cmd)
}

/// A mode a file we write or put back may have: permission bits only, none
/// of setuid, setgid or sticky, and nothing writable by others.
pub fn mode_ok(mode: u32) -> bool {
    mode & !0o775 == 0
}

/// What is outside the allowlist, in a plan or a journal entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Outside {
    #[error("change {change} may not {what} {path}")]
    Change {
        change: String,
        what: &'static str,
        path: String,
    },
    #[error("{what} {path} belongs to no change")]
    NoOwner { what: &'static str, path: String },
    #[error("{what} {path} would get mode {mode:o}")]
    Mode {
        what: &'static str,
        path: String,
        mode: u32,
    },
    #[error("{what} {path} is kept under a path")]
    SavedAs { what: &'static str, path: String },
}

/// Every path and command of a change within its kind's allowlist.
pub fn check_change(c: &Change) -> Result<(), Outside> {
    let bad = |what: &'static str, p: &str| {
        Err(Outside::Change {
            change: c.id.to_string(),
            what,
            path: p.to_string(),
        })
    };
    for f in &c.files {
        if !file_for(Some(c.id.kind), &f.path) {
            return bad("write", &f.path);
        }
    }
    for v in c.values.iter().chain(&c.undo_values) {
        if !value_for(Some(c.id.kind), &v.path) {
            return bad("write", &v.path);
        }
        if v.after.len() > 4096 || v.after.contains('\0') || v.before.len() > 4096 {
            return bad("write such a value to", &v.path);
        }
    }
    for a in &c.artifacts {
        for p in std::iter::once(&a.path).chain(&a.staging) {
            if !artifact_allowed(p) {
                return bad("regenerate", p);
            }
        }
    }
    for s in c.prepare.iter().chain(&c.commands).chain(&c.undo_commands) {
        if !command_for(c.id.kind, &s.cmd) {
            return bad("run", &s.argv().join(" "));
        }
    }
    Ok(())
}

/// A plan only of allowlisted changes (checked before it is applied).
pub fn check_plan(p: &Plan) -> Result<(), Outside> {
    p.changes.iter().try_for_each(check_change)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_its_own_places() {
        assert!(file_for(
            Some(Kind::VfioBoot),
            "/etc/modprobe.d/vfio-assistant.conf"
        ));
        assert!(!file_for(
            Some(Kind::Thp),
            "/etc/modprobe.d/vfio-assistant.conf"
        ));
        assert!(!file_for(None, "/etc/passwd"));
        assert!(value_for(
            Some(Kind::Sriov),
            "/sys/bus/pci/devices/0000:03:00.0/sriov_numvfs"
        ));
        assert!(!value_for(Some(Kind::Thp), "/proc/sys/kernel/core_pattern"));
        assert!(!value_for(None, "/proc/sys/kernel/core_pattern"));
        assert!(mode_ok(0o644) && mode_ok(0o755) && mode_ok(0o600));
        assert!(!mode_ok(0o4755) && !mode_ok(0o666) && !mode_ok(0o1755) && !mode_ok(0o2755));
        use super::super::command::{Module, Unit};
        let restart = Cmd::Systemctl {
            verb: super::super::command::UnitVerb::TryRestart,
            unit: Unit::Libvirtd,
        };
        assert!(command_for(Kind::QemuConf, &restart));
        assert!(!command_for(Kind::Thp, &restart));
        // Only kvmfr is ever unloaded, and only by its own change.
        let unload = |module| Cmd::ModprobeRemove { module };
        assert!(command_for(Kind::Kvmfr, &unload(Module::Kvmfr)));
        assert!(!command_for(Kind::Kvmfr, &unload(Module::VfioPci)));
        assert!(!command_for(Kind::VfioBind, &unload(Module::VfioPci)));
        assert!(!command_for(Kind::VfioBind, &unload(Module::Kvmfr)));
        // AppArmor's local abstraction is kvmfr's to write, no one else's.
        let aa = "/etc/apparmor.d/local/abstractions/libvirt-qemu";
        assert!(file_for(Some(Kind::Kvmfr), aa));
        assert!(!file_for(Some(Kind::QemuConf), aa));
        assert!(!file_for(None, "/etc/apparmor.d/abstractions/libvirt-qemu"));
    }
}
