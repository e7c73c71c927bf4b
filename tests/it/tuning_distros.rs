//! The tuning engine on each distribution's real boot configuration
//! (tests/fixtures/tuning/<distro>, each file with its SOURCE): which boot
//! path it detects from the files and tools present (never the name), the
//! changes it plans, and the files after an apply, against golden copies in
//! tests/fixtures/tuning/golden/<distro>/ (`UPDATE_GOLDEN=1` rewrites them;
//! read every diff before committing one). Each apply is undone and must
//! give the tree back byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::tuning::{differ, distro, kernel_gives_hugepages, runtime_host, tree};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Env, apply, undo};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::model::Request;
use vfio_assistant::tuning::plan::plan;

/// One host kind: its tree, the tools its packages install, and the
/// markers the boot detection reads.
struct Kind {
    name: &'static str,
    tools: &'static [&'static str],
    markers: &'static [&'static str],
    dirs: &'static [&'static str],
    /// The `LoaderInfo` EFI variable's text, laid out as the Boot Loader
    /// Interface says (4 attribute bytes, UTF-16LE, NUL): None where the
    /// loader does not set it.
    loader_info: Option<&'static str>,
    cmdline: &'static str,
    /// The running kernel (`/proc/sys/kernel/osrelease`), as its cmdline says.
    release: &'static str,
    loader: &'static str,
    initramfs: &'static str,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "debian12",
        tools: &["update-grub", "grub-mkconfig", "update-initramfs"],
        markers: &["var/lib/dpkg/info/initramfs-tools.list"],
        dirs: &["etc/default/grub.d"],
        loader_info: None,
        cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=0 ro quiet",
        release: "6.1.0-18-amd64",
        loader: "grub-debian",
        initramfs: "initramfs-tools",
    },
    Kind {
        name: "ubuntu2404",
        tools: &["update-grub", "grub-mkconfig", "update-initramfs"],
        markers: &["var/lib/dpkg/info/initramfs-tools.list"],
        dirs: &["etc/default/grub.d", "etc/initramfs-tools"],
        loader_info: None,
        cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.8.0-51-generic root=UUID=0 ro quiet splash",
        release: "6.8.0-51-generic",
        loader: "grub-debian",
        initramfs: "initramfs-tools",
    },
    Kind {
        name: "ubuntu2510",
        tools: &["update-grub", "dracut"],
        markers: &["var/lib/dpkg/info/dracut.list"],
        dirs: &["etc/default/grub.d", "etc/dracut.conf.d"],
        loader_info: None,
        cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.17.0-5-generic root=UUID=0 ro quiet splash",
        release: "6.17.0-5-generic",
        loader: "grub-debian",
        initramfs: "dracut",
    },
    Kind {
        name: "arch-sdboot",
        tools: &["bootctl", "mkinitcpio"],
        markers: &[],
        dirs: &["etc/mkinitcpio.conf.d"],
        loader_info: Some("systemd-boot 255.4-1-arch"),
        cmdline: "initrd=\\initramfs-linux.img root=UUID=0 rw",
        release: "6.12.1-arch1-1",
        loader: "systemd-boot",
        initramfs: "mkinitcpio",
    },
    Kind {
        name: "arch-grub",
        tools: &["grub-mkconfig", "mkinitcpio"],
        markers: &[],
        dirs: &["etc/mkinitcpio.conf.d"],
        loader_info: None,
        cmdline: "BOOT_IMAGE=/vmlinuz-linux root=UUID=0 rw loglevel=3 quiet",
        release: "6.12.1-arch1-1",
        loader: "grub-mkconfig",
        initramfs: "mkinitcpio",
    },
    Kind {
        name: "fedora41",
        tools: &["grubby", "dracut"],
        markers: &[],
        dirs: &["etc/dracut.conf.d"],
        loader_info: None,
        cmdline: "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.11.4-301.fc41.x86_64 root=UUID=0 ro rhgb quiet",
        release: "6.11.4-301.fc41.x86_64",
        loader: "grub-mkconfig",
        initramfs: "dracut",
    },
    Kind {
        name: "popos",
        tools: &["kernelstub", "update-initramfs"],
        markers: &["var/lib/dpkg/info/initramfs-tools.list"],
        dirs: &[],
        loader_info: Some("systemd-boot 251.3"),
        cmdline: "initrd=\\EFI\\Pop_OS-0\\initrd.img root=UUID=0 ro quiet loglevel=0 systemd.show_status=false splash",
        release: "6.9.3-76060903-generic",
        loader: "kernelstub",
        initramfs: "initramfs-tools",
    },
    Kind {
        name: "silverblue",
        tools: &["rpm-ostree", "dracut"],
        markers: &[],
        dirs: &[],
        loader_info: None,
        cmdline: "BOOT_IMAGE=(hd0,gpt2)/ostree/fedora-0/vmlinuz-6.11.4-301.fc41.x86_64 rhgb quiet root=UUID=0 ostree=/ostree/boot.1/fedora/0/0",
        release: "6.11.4-301.fc41.x86_64",
        loader: "rpm-ostree",
        initramfs: "dracut",
    },
];

fn host(k: &Kind) -> tempfile::TempDir {
    let dir = runtime_host();
    let r = dir.path();
    // The test host's own GRUB defaults are not this distribution's.
    let _ = std::fs::remove_file(r.join("etc/default/grub"));
    distro(r, k.name);
    for t in k.tools {
        crate::support::hosts::put(r, &format!("usr/bin/{t}"), "");
        std::fs::set_permissions(
            r.join("usr/bin").join(t),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    for m in k.markers {
        crate::support::hosts::put(r, m, "");
    }
    for d in k.dirs {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    crate::support::hosts::put(r, "proc/cmdline", &format!("{}\n", k.cmdline));
    crate::support::hosts::put(r, "proc/sys/kernel/osrelease", &format!("{}\n", k.release));
    if let Some(li) = k.loader_info {
        let mut bytes = vec![6u8, 0, 0, 0];
        for u in li.encode_utf16().chain([0]) {
            bytes.extend_from_slice(&u.to_le_bytes());
        }
        let p = r.join("sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    dir
}

fn request() -> Request {
    Request {
        gpus: vec!["0b:00.0".parse().unwrap()],
        vcpus: Some(4),
        ..Request::default()
    }
}

/// Files the engine may write, relative to the root.
const WRITTEN: &[&str] = &[
    "etc/default/grub",
    "etc/default/grub.d/99-vfio-assistant.cfg",
    "etc/kernel/cmdline",
    "etc/modprobe.d/vfio-assistant.conf",
    "etc/initramfs-tools/modules",
    "etc/dracut.conf.d/90-vfio-assistant.conf",
    "etc/mkinitcpio.conf.d/vfio-assistant.conf",
    "boot/loader/entries/vfio-assistant.conf",
    "etc/tmpfiles.d/vfio-assistant.conf",
];

fn golden(name: &str, rel: &str, got: Option<&str>) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tuning/golden")
        .join(name)
        .join(rel);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        match got {
            Some(t) => {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, t).unwrap();
            }
            None => {
                let _ = std::fs::remove_file(&p);
            }
        }
        return;
    }
    let want = std::fs::read_to_string(&p).ok();
    assert_eq!(
        got.map(str::to_string),
        want,
        "{name}: {rel} differs from {}",
        p.display()
    );
}

#[test]
fn each_distribution_is_detected_planned_applied_and_undone() {
    for k in KINDS {
        let dir = host(k);
        let root = HostRoot::at(dir.path());
        let snap = scan(&root).unwrap();
        let facts = gather(&root);
        let p = plan(&snap, &facts, &request()).unwrap();
        assert_eq!(
            (p.boot.loader.as_str(), p.boot.initramfs.as_str()),
            (k.loader, k.initramfs),
            "{}: {:?}",
            k.name,
            p.boot.evidence
        );
        let ids: Vec<String> = p.changes.iter().map(|c| c.id.to_string()).collect();
        assert!(ids.iter().any(|i| i == "vfio-boot"), "{}: {ids:?}", k.name);
        // The Fedora capture has no /etc/default/grub (the installer writes
        // it): the command line is then a manual step, said so.
        assert!(
            ids.iter().any(|i| i == "cmdline") || p.manual.iter().any(|m| m.id == "cmdline"),
            "{}: {ids:?} manual {:?}",
            k.name,
            p.manual
        );
        let before = tree(dir.path());
        let env = Env::new(root.clone(), None, false);
        let o = apply(&env, &facts, &p, &request(), &mut |_| {}).unwrap();
        assert_eq!(o.state, EntryState::Applied, "{}: {o:?}", k.name);
        for rel in WRITTEN {
            let got = std::fs::read_to_string(dir.path().join(rel)).ok();
            let was = before
                .get(*rel)
                .map(|(b, _)| String::from_utf8_lossy(b).into_owned());
            if got != was {
                golden(k.name, rel, got.as_deref());
            }
        }
        // The commands the loader needs, listed (not run with a root).
        let argv: Vec<String> = p
            .changes
            .iter()
            .flat_map(|c| c.commands.iter().map(|x| x.argv().join(" ")))
            .collect();
        golden(
            k.name,
            "commands.txt",
            Some(&format!("{}\n", argv.join("\n"))),
        );
        // Planning again plans nothing for the boot path (where the change
        // is files; kernelstub and rpm-ostree change it by a command, which
        // a root only lists).
        kernel_gives_hugepages(dir.path());
        let again = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
        let by_command = matches!(k.loader, "kernelstub" | "rpm-ostree");
        let left: Vec<String> = again
            .changes
            .iter()
            .map(|c| c.id.to_string())
            .filter(|id| *id == "vfio-boot" || (*id == "cmdline" && !by_command))
            .collect();
        assert!(left.is_empty(), "{}: planned again {left:?}", k.name);
        let u = undo(&env, &o.id, false, &mut |_| {}).unwrap();
        assert_eq!(u.failure, None, "{}", k.name);
        assert_eq!(
            differ(&before, &tree(dir.path())),
            Vec::<String>::new(),
            "{}: undo",
            k.name
        );
    }
}
