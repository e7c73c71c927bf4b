//! Two identical cards (issue 40): the X570 host's second card given the
//! first one's IDs (10de:1b06 and its audio 10de:10ef), as with two RTX
//! 4070s. `vfio_pci.ids=` would take both at boot and the host would boot
//! without its screen; the plan binds the VM's card by address instead, and
//! the line it writes does exactly that when the shell runs it: the VM's
//! functions get driver_override, the host's twin nothing, and nothing at
//! all on a boot without the switch.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::boot_hosts::*;
use crate::support::hosts::put;
use std::path::Path;
use std::process::Command;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::model::Verify;
use vfio_assistant::tuning::plan::plan;

fn twins(r: &Path) {
    for (f, id) in [("0000:0c:00.0", "0x1b06"), ("0000:0c:00.1", "0x10ef")] {
        put(
            r,
            &format!("sys/devices/pci0000:00/{f}/device"),
            &format!("{id}\n"),
        );
    }
    crate::support::hosts::bind(r, "0000:0c:00.0", "nouveau");
}

#[test]
fn identical_cards_are_bound_by_address_never_by_id() {
    let dir = grub_host();
    let r = dir.path();
    twins(r);
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let p = plan(&snap, &gather(&root), &request()).unwrap();
    let vb = p.changes.iter().find(|c| c.id == "vfio-boot").unwrap();
    let text = vb.files[0].after.clone().unwrap();
    assert!(!text.contains("options vfio-pci ids"), "{text}");
    assert!(
        text.contains("install vfio-pci") && text.contains("for d in 0000:0b:00.0 0000:0b:00.1;"),
        "{text}"
    );
    assert!(
        text.contains("0000:0c:00.0"),
        "the twin is named in the comment: {text}"
    );
    assert!(
        vb.notes.iter().any(|n| n.contains("Bound by address")),
        "{:?}",
        vb.notes
    );
    let tokens: Vec<String> = p
        .changes
        .iter()
        .flat_map(|c| &c.verify)
        .filter_map(|v| match v {
            Verify::BootEntriesHave { tokens, .. } => Some(tokens.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(
        tokens.iter().any(|t| t == "vfio_assistant.bind=1"),
        "{tokens:?}"
    );
    assert!(
        !tokens.iter().any(|t| t.starts_with("vfio_pci.ids")),
        "{tokens:?}"
    );

    // Applied with the stand-ins: the initramfs carries the file, grub.cfg
    // the switch, and undo puts every file back.
    let before = crate::support::tuning::tree(r);
    let e = env(r);
    let (o, lines) = apply_once(r, &e);
    assert_eq!(
        o.state,
        vfio_assistant::tuning::journal::EntryState::Applied,
        "{o:?}\n{lines:#?}"
    );
    let info = initramfs(r);
    assert!(
        format!("{info:?}").contains("vfio-assistant.conf"),
        "the initramfs holds our modprobe.d file: {info:?}"
    );
    let cfg = std::fs::read_to_string(r.join("boot/grub/grub.cfg")).unwrap();
    assert!(
        cfg.contains("vfio_assistant.bind=1") && !cfg.contains("vfio_pci.ids"),
        "{cfg}"
    );
    vfio_assistant::tuning::apply::undo(&e, &o.id, false, &mut |_| {}).unwrap();
    let after = crate::support::tuning::tree(r);
    let changed: Vec<String> = crate::support::tuning::differ(&before, &after)
        .into_iter()
        .filter(|p| !p.starts_with("var/"))
        .collect();
    assert!(
        changed.iter().all(|p| p.starts_with("boot/")),
        "{changed:?}"
    );
    let cfg = std::fs::read_to_string(r.join("boot/grub/grub.cfg")).unwrap();
    assert!(!cfg.contains("vfio_assistant.bind"), "{cfg}");
}

/// The line as the shell runs it, against a stand-in /sys and /proc: the
/// VM's two functions get vfio-pci, the twin keeps nothing written, a
/// function that already has a driver is left alone, and a boot without
/// `vfio_assistant.bind=1` writes nothing at all.
#[test]
fn the_install_line_writes_exactly_the_vms_addresses() {
    let line = vfio_assistant::tuning::vfio_address::install_line(
        &["0000:0b:00.0".into(), "0000:0b:00.1".into()],
        true,
    )
    .unwrap();
    let body = line.trim_end().strip_prefix("install vfio-pci ").unwrap();
    for (cmdline, expect) in [
        (
            "BOOT_IMAGE=/vmlinuz ro quiet vfio_assistant.bind=1 iommu=pt",
            true,
        ),
        ("BOOT_IMAGE=/vmlinuz ro quiet iommu=pt", false),
        ("vfio_assistant.bind=10", false),
    ] {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path().join("sys/bus/pci/devices");
        for f in ["0000:0b:00.0", "0000:0b:00.1", "0000:0c:00.0"] {
            std::fs::create_dir_all(sys.join(f)).unwrap();
            std::fs::write(sys.join(f).join("driver_override"), "(null)\n").unwrap();
        }
        // 0b:00.1 already has its driver: left alone.
        std::fs::create_dir_all(sys.join("0000:0b:00.1/driver")).unwrap();
        std::fs::write(t.path().join("cmdline"), format!("{cmdline}\n")).unwrap();
        let script = body
            .replace("/sys/bus/pci/devices", &sys.display().to_string())
            .replace(
                "/proc/cmdline",
                &t.path().join("cmdline").display().to_string(),
            )
            .replace("modprobe -i vfio-pci", "echo loaded >");
        let script = format!("CMDLINE_OPTS={}/loaded; {script}", t.path().display());
        let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let read = |f: &str| std::fs::read_to_string(sys.join(f).join("driver_override")).unwrap();
        assert_eq!(
            read("0000:0b:00.0").trim() == "vfio-pci",
            expect,
            "{cmdline}"
        );
        assert_eq!(read("0000:0b:00.1").trim(), "(null)", "{cmdline}");
        assert_eq!(read("0000:0c:00.0").trim(), "(null)", "{cmdline}");
        assert!(
            t.path().join("loaded").exists(),
            "vfio-pci is loaded in any case"
        );
    }
}
