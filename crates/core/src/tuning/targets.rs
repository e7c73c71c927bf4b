//! What each change kind may touch: the files it may write or restore, the
//! sysfs/procfs values, the programs it may run, and the modes a restored
//! file may get. The one allowlist: `fsops` writes nothing outside the
//! union, a plan is checked against it before it is applied, and a journal
//! entry is checked against it before undo believes a word of it — a
//! change kind's file restored only where that kind writes, its commands
//! only those that kind runs, no setuid/setgid/sticky bit and nothing
//! writable by others.

use super::command::{Cmd, Module, Unit};
use super::journal::Entry;
use super::model::{Change, Plan};

/// Files per change kind (host paths; `*` is one path component).
const FILES: &[(&str, &[&str])] = &[
    (
        "cmdline",
        &[
            "/etc/default/grub",
            "/etc/default/grub.d/99-vfio-assistant.cfg",
            "/etc/kernel/cmdline",
            "/boot/loader/entries/vfio-assistant.conf",
            "/boot/efi/loader/entries/vfio-assistant.conf",
            "/efi/loader/entries/vfio-assistant.conf",
            "/etc/kernelstub/configuration",
        ],
    ),
    (
        "vfio-boot",
        &[
            "/etc/modprobe.d/vfio-assistant.conf",
            "/etc/initramfs-tools/modules",
            "/etc/dracut.conf.d/90-vfio-assistant.conf",
            "/etc/mkinitcpio.conf.d/vfio-assistant.conf",
        ],
    ),
    ("persist", &["/etc/tmpfiles.d/vfio-assistant.conf"]),
    (
        "irqbalance",
        &["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"],
    ),
    ("isolation-hook", &[super::hook::HOOK]),
    ("single-gpu-hook", &[super::single_gpu::HOOK]),
    ("looking-glass-shm", &[super::play::LG_TMPFILES]),
    (
        "kvmfr",
        &[
            super::play::KVMFR_MODPROBE,
            super::play::KVMFR_LOAD,
            super::play::KVMFR_UDEV,
            super::play::APPARMOR_LOCAL,
        ],
    ),
    ("qemu-conf", &[super::play::QEMU_CONF]),
];

/// Values per change kind.
const VALUES: &[(&str, &[&str])] = &[
    (
        "governor",
        &["/sys/devices/system/cpu/*/cpufreq/scaling_governor"],
    ),
    (
        "epp",
        &["/sys/devices/system/cpu/*/cpufreq/energy_performance_preference"],
    ),
    (
        "thp",
        &[
            "/sys/kernel/mm/transparent_hugepage/enabled",
            "/sys/kernel/mm/transparent_hugepage/defrag",
        ],
    ),
    ("ksm", &["/sys/kernel/mm/ksm/run"]),
    (
        "hugepages",
        &[
            "/sys/kernel/mm/hugepages/*/nr_hugepages",
            "/sys/devices/system/node/*/hugepages/*/nr_hugepages",
            "/proc/sys/vm/compact_memory",
        ],
    ),
    ("irq-affinity", &["/proc/irq/*/smp_affinity_list"]),
    (
        "vfio-bind",
        &[
            "/sys/bus/pci/devices/*/driver_override",
            "/sys/bus/pci/drivers/*/unbind",
            "/sys/bus/pci/drivers_probe",
        ],
    ),
    ("sriov", &["/sys/bus/pci/devices/*/sriov_numvfs"]),
];

/// The change kind of an id (`sriov:0000:03:00.0` is of kind `sriov`).
pub fn kind(id: &str) -> &str {
    if id.starts_with("sriov:") {
        "sriov"
    } else {
        id
    }
}

fn matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let q: Vec<&str> = path.split('/').collect();
    p.len() == q.len()
        && p.iter()
            .zip(&q)
            .all(|(a, b)| (*a == "*" && !b.is_empty() && *b != ".." && *b != ".") || a == b)
}

fn allowed(table: &[(&str, &[&str])], change: Option<&str>, path: &str) -> bool {
    table
        .iter()
        .filter(|(k, _)| change.is_none_or(|c| kind(c) == *k))
        .any(|(_, pats)| pats.iter().any(|p| matches(p, path)))
}

/// A file this change kind writes (`None`: any kind).
pub fn file_for(change: Option<&str>, path: &str) -> bool {
    allowed(FILES, change, path)
}

/// A value this change kind writes (`None`: any kind).
pub fn value_for(change: Option<&str>, path: &str) -> bool {
    allowed(VALUES, change, path)
}

/// Whether the change kind `id` runs `cmd`.
pub fn command_for(id: &str, cmd: &Cmd) -> bool {
    let boot_image = matches!(
        cmd,
        Cmd::UpdateInitramfs { .. }
            | Cmd::Dracut { .. }
            | Cmd::Mkinitcpio
            | Cmd::KernelInstallAdd { .. }
    );
    let libvirt = matches!(
        cmd,
        Cmd::Systemctl {
            unit: Unit::Libvirtd | Unit::Virtqemud,
            ..
        }
    );
    match kind(id) {
        "cmdline" => {
            boot_image
                || matches!(
                    cmd,
                    Cmd::GrubMkconfig { .. }
                        | Cmd::Grubby { .. }
                        | Cmd::Kernelstub { .. }
                        | Cmd::RpmOstreeKargs { .. }
                        | Cmd::BootctlSetOneshot
                )
        }
        "vfio-boot" => boot_image || matches!(cmd, Cmd::RpmOstreeInitramfsEtc { .. }),
        "ksm" => matches!(
            cmd,
            Cmd::Systemctl {
                unit: Unit::Ksmtuned,
                ..
            }
        ),
        "irqbalance" => matches!(
            cmd,
            Cmd::Systemctl {
                unit: Unit::Irqbalance,
                ..
            }
        ),
        "vfio-bind" => matches!(
            cmd,
            Cmd::Modprobe {
                module: Module::VfioPci
            }
        ),
        "isolation-hook" | "single-gpu-hook" | "qemu-conf" => libvirt,
        "looking-glass-shm" => matches!(cmd, Cmd::TmpfilesLookingGlass),
        "kvmfr" => matches!(
            cmd,
            Cmd::Modprobe {
                module: Module::Kvmfr
            } | Cmd::ModprobeRemove {
                module: Module::Kvmfr
            }
        ),
        _ => false,
    }
}

/// A mode a file we write or put back may have: permission bits only, none
/// of setuid, setgid or sticky, and nothing writable by others.
pub fn mode_ok(mode: u32) -> bool {
    mode & !0o775 == 0
}

/// Every path and command of a change within its kind's allowlist.
pub fn check_change(c: &Change) -> Result<(), String> {
    let bad = |what: &str, p: &str| Err(format!("change {:?} may not {what} {p}", c.id));
    for f in &c.files {
        if !file_for(Some(&c.id), &f.path) {
            return bad("write", &f.path);
        }
    }
    for v in c.values.iter().chain(&c.undo_values) {
        if !value_for(Some(&c.id), &v.path) {
            return bad("write", &v.path);
        }
        if v.after.len() > 4096 || v.after.contains('\0') || v.before.len() > 4096 {
            return bad("write such a value to", &v.path);
        }
    }
    for a in &c.artifacts {
        for p in std::iter::once(&a.path).chain(&a.staging) {
            if !super::artifacts::artifact_allowed(p) {
                return bad("regenerate", p);
            }
        }
    }
    for s in c.prepare.iter().chain(&c.commands).chain(&c.undo_commands) {
        if !command_for(&c.id, &s.cmd) {
            return bad("run", &s.argv().join(" "));
        }
    }
    Ok(())
}

/// A plan only of allowlisted changes (checked before it is applied).
pub fn check_plan(p: &Plan) -> Result<(), String> {
    p.changes.iter().try_for_each(check_change)
}

/// A copy in the journal's folder is named by its number (`0003`), as the
/// apply names it: never a path, a hidden name, or the folder itself (an
/// empty name), whatever characters the entry was edited to hold.
fn saved_name_ok(name: Option<&str>) -> bool {
    name.is_none_or(|n| (1..=16).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A journal entry undo may act on: its plan within the allowlist, every
/// saved file and generated file one of its changes writes, every mode
/// closed, every value one of its changes sets.
pub fn check_entry(e: &Entry) -> Result<(), String> {
    check_plan(&e.plan)?;
    let changes = &e.plan.changes;
    for f in &e.files {
        let owner = changes
            .iter()
            .any(|c| c.files.iter().any(|x| x.path == f.path));
        if !owner {
            return Err(format!("saved file {} belongs to no change", f.path));
        }
        if f.mode.is_some_and(|m| !mode_ok(m)) {
            return Err(format!(
                "saved file {} would get mode {:o}",
                f.path,
                f.mode.unwrap_or(0)
            ));
        }
        if !saved_name_ok(f.saved_as.as_deref()) {
            return Err(format!("saved file {} is kept under a path", f.path));
        }
    }
    for a in &e.artifacts {
        let owner = changes
            .iter()
            .any(|c| c.id == a.change && c.artifacts.iter().any(|x| x.path == a.path));
        if !owner || !super::artifacts::artifact_allowed(&a.path) {
            return Err(format!("boot file {} belongs to no change", a.path));
        }
        if a.mode.is_some_and(|m| !mode_ok(m)) {
            return Err(format!(
                "boot file {} would get a mode it may not have",
                a.path
            ));
        }
        if !saved_name_ok(a.saved_as.as_deref()) {
            return Err(format!("boot file {} is kept under a path", a.path));
        }
    }
    for (path, before) in &e.values {
        let owner = changes
            .iter()
            .any(|c| c.values.iter().any(|v| &v.path == path));
        if !owner || before.len() > 4096 || before.contains('\0') {
            return Err(format!("value {path} belongs to no change"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_its_own_places() {
        assert!(file_for(
            Some("vfio-boot"),
            "/etc/modprobe.d/vfio-assistant.conf"
        ));
        assert!(!file_for(
            Some("thp"),
            "/etc/modprobe.d/vfio-assistant.conf"
        ));
        assert!(!file_for(None, "/etc/passwd"));
        assert!(value_for(
            Some("sriov:0000:03:00.0"),
            "/sys/bus/pci/devices/0000:03:00.0/sriov_numvfs"
        ));
        assert!(!value_for(Some("thp"), "/proc/sys/kernel/core_pattern"));
        assert!(!value_for(None, "/proc/sys/kernel/core_pattern"));
        assert!(mode_ok(0o644) && mode_ok(0o755) && mode_ok(0o600));
        assert!(!mode_ok(0o4755) && !mode_ok(0o666) && !mode_ok(0o1755) && !mode_ok(0o2755));
        let restart = Cmd::Systemctl {
            verb: super::super::command::UnitVerb::TryRestart,
            unit: Unit::Libvirtd,
        };
        assert!(command_for("qemu-conf", &restart));
        assert!(!command_for("thp", &restart));
        // Only kvmfr is ever unloaded, and only by its own change.
        let unload = |module| Cmd::ModprobeRemove { module };
        assert!(command_for("kvmfr", &unload(Module::Kvmfr)));
        assert!(!command_for("kvmfr", &unload(Module::VfioPci)));
        assert!(!command_for("vfio-bind", &unload(Module::VfioPci)));
        assert!(!command_for("vfio-bind", &unload(Module::Kvmfr)));
        // AppArmor's local abstraction is kvmfr's to write, no one else's.
        let aa = "/etc/apparmor.d/local/abstractions/libvirt-qemu";
        assert!(file_for(Some("kvmfr"), aa));
        assert!(!file_for(Some("qemu-conf"), aa));
        assert!(!file_for(None, "/etc/apparmor.d/abstractions/libvirt-qemu"));
    }
}
