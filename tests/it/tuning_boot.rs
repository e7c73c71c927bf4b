//! The boot path of a transaction, with its commands run: stand-ins for
//! grub-mkconfig, update-initramfs, dracut and kernel-install
//! (tests/fixtures/standins) regenerate grub.cfg and the initramfs from the
//! test root's real Debian 12 files, so apply, rollback, a power cut and
//! undo are checked for what the generated boot files hold — and in which
//! order they were made — not only for the files in /etc.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::boot_hosts::*;
use crate::support::tuning::{differ, kernel_gives_hugepages, tree};
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Progress, apply, undo};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::model::Verify;
use vfio_assistant::tuning::plan::plan;
use vfio_assistant::tuning::status::{NextBoot, Standing, status};

/// The tokens the plan's cmdline change adds.
fn planned_tokens(p: &vfio_assistant::tuning::Plan) -> Vec<String> {
    p.changes
        .iter()
        .flat_map(|c| &c.verify)
        .find_map(|v| match v {
            Verify::BootEntriesHave { tokens, .. } => Some(tokens.clone()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn the_boot_entry_is_switched_last_and_undo_puts_the_boot_files_back() {
    let dir = grub_host();
    let r = dir.path();
    let original = tree(r);
    let root = HostRoot::at(r);
    let p = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    let ids: Vec<String> = p.changes.iter().map(|c| c.id.to_string()).collect();
    let at = |id: &str| ids.iter().position(|x| *x == id).unwrap();
    assert!(
        at("vfio-boot") < at("cmdline"),
        "the initramfs before the boot entry: {ids:?}"
    );
    let toks = planned_tokens(&p);
    assert!(
        toks.iter().any(|t| t == "vfio_pci.ids=10de:1b06,10de:10ef"),
        "the IDs ride on the command line: {toks:?}"
    );
    let (o, lines) = apply_once(r, &env(r));
    assert_eq!(o.state, EntryState::Applied, "{o:?}\n{lines:#?}");
    // The order the boot files were made in: the image (harmless without
    // the IDs) first, then grub.cfg into its staging file, renamed by us.
    let l = log(r);
    let image = l
        .iter()
        .position(|x| x.contains("wrote /boot/initrd.img-"))
        .unwrap();
    let cfg = l
        .iter()
        .position(|x| x.contains("grub-mkconfig: wrote /boot/grub/.vfio-assistant-grub.cfg"))
        .unwrap_or_else(|| panic!("{l:#?}"));
    assert!(image < cfg, "{l:#?}");
    assert!(
        !l.iter().any(|x| x.contains("wrote /boot/grub/grub.cfg")),
        "{l:#?}"
    );
    assert!(!r.join("boot/grub/.vfio-assistant-grub.cfg").exists());
    // Its verification ran before the switch, on the staged file.
    let verified: Vec<&Progress> = lines
        .iter()
        .filter(|l| matches!(l, Progress::Verified { what, .. } if what.starts_with("cmdline")))
        .collect();
    assert!(!verified.is_empty());
    // grub.cfg: every default entry holds every token once; the recovery
    // entry none of them (it is the way back).
    let cfg_text = std::fs::read_to_string(r.join("boot/grub/grub.cfg")).unwrap();
    for line in cfg_text
        .lines()
        .filter(|l| l.trim_start().starts_with("linux"))
    {
        let words: Vec<&str> = line.split_whitespace().collect();
        for t in &toks {
            let n = words.iter().filter(|w| *w == t).count();
            if line.contains(" single ") {
                assert_eq!(n, 0, "{t} in the recovery entry: {line}");
            } else {
                assert_eq!(n, 1, "{t} in {line}");
            }
        }
    }
    // The image holds vfio-pci and the file; the file claims nothing by
    // itself (the IDs are on the command line).
    assert!(holds_our_modprobe(r));
    assert!(!initramfs(r).vfio_modules.is_empty());
    let modprobe = std::fs::read_to_string(r.join("etc/modprobe.d/vfio-assistant.conf")).unwrap();
    assert!(!modprobe.contains("options vfio-pci ids="), "{modprobe}");
    assert!(
        modprobe.contains("softdep nouveau pre: vfio-pci"),
        "{modprobe}"
    );
    // Planned again: nothing (with what the kernel did: the probe handed
    // the functions to vfio-pci, the pool filled).
    kernel_gives_hugepages(r);
    crate::support::hosts::bind(r, "0000:0b:00.0", "vfio-pci");
    crate::support::hosts::bind(r, "0000:0b:00.1", "vfio-pci");
    let again = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    assert!(
        again.changes.is_empty(),
        "{:?}",
        again.changes.iter().map(|c| &c.id).collect::<Vec<_>>()
    );
    // Undo: the saved boot files back byte for byte, nothing rebuilt.
    let before_undo = log(r).len();
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.state, EntryState::Undone, "{u:?}");
    assert_eq!(u.failure, None);
    assert_eq!(
        log(r).len(),
        before_undo,
        "nothing regenerated: {:?}",
        &log(r)[before_undo..]
    );
    kernel_gives_hugepages(r);
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
}

#[test]
fn undo_rebuilds_from_the_restored_inputs_what_was_regenerated_since() {
    let dir = grub_host();
    let r = dir.path();
    let (o, _) = apply_once(r, &env(r));
    assert_eq!(o.state, EntryState::Applied);
    // A kernel update's trigger rebuilds the image and the menu from the
    // tuned configuration after the apply.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    run_standin(r, &["update-initramfs", "-u", "-k", REL]);
    run_standin(r, &["update-grub"]);
    let mark = log(r).len();
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None, "{u:?}");
    let after: Vec<String> = log(r)[mark..].to_vec();
    // Rebuilt, and from the restored files: the image no longer reads our
    // modprobe.d file, grub.cfg no longer holds the parameters.
    assert!(
        after
            .iter()
            .any(|x| x.starts_with("update-initramfs: wrote")),
        "{after:#?}"
    );
    assert!(
        !after
            .iter()
            .any(|x| x.contains("read /etc/modprobe.d/vfio-assistant.conf")),
        "regenerated before its inputs were restored: {after:#?}"
    );
    assert!(!holds_our_modprobe(r));
    let cfg = std::fs::read_to_string(r.join("boot/grub/grub.cfg")).unwrap();
    assert!(!cfg.contains("iommu=pt"), "{cfg}");
    let st = status(&env(r));
    assert!(st.last().unwrap().leftovers.is_empty(), "{st:?}");
}

fn count_steps(dir: &Path) -> usize {
    let scratch = tempfile::tempdir().unwrap();
    crate::support::tree::copy_tree(dir, scratch.path());
    let (o, lines) = apply_once(scratch.path(), &env(scratch.path()));
    assert_eq!(o.state, EntryState::Applied);
    lines
        .iter()
        .filter(|l| matches!(l, Progress::Started { .. }))
        .count()
}

#[test]
fn a_failure_at_any_step_puts_the_boot_files_back_too() {
    let dir = grub_host();
    let r = dir.path();
    let original = tree(r);
    let n = count_steps(r);
    assert!(n > 10, "{n} steps");
    for at in 0..n {
        let mut e = env(r);
        e.fail_at = Some(at);
        let (o, lines) = apply_once(r, &e);
        assert_eq!(o.state, EntryState::RolledBack, "step {at}");
        assert!(
            !lines
                .iter()
                .any(|l| matches!(l, Progress::Failed { step, .. } if step.starts_with("undo "))),
            "step {at}: the rollback could not undo everything: {lines:#?}"
        );
        assert_eq!(
            differ(&original, &tree(r)),
            Vec::<String>::new(),
            "step {at}: not as before after the rollback"
        );
        let st = status(&env(r));
        assert!(st.last().unwrap().leftovers.is_empty(), "step {at}: {st:?}");
    }
}

/// update-initramfs killed in the middle of its rebuild (as the real-host
/// run's power cut found on Debian 12) leaves the image it replaced as
/// IMAGE.dpkg-bak: the rollback removes that copy with the rest.
#[test]
fn update_initramfs_killed_midway_leaves_no_backup_behind() {
    let dir = grub_host();
    let r = dir.path();
    let original = tree(r);
    std::fs::write(r.join(".standin-dies-in-update-initramfs"), "").unwrap();
    let (o, lines) = apply_once(r, &env(r));
    std::fs::remove_file(r.join(".standin-dies-in-update-initramfs")).unwrap();
    assert_eq!(o.state, EntryState::RolledBack, "{lines:#?}");
    assert!(
        lines.iter().any(|l| format!("{l:?}").contains(".dpkg-bak")),
        "{lines:#?}"
    );
    assert!(!r.join(format!("boot/initrd.img-{REL}.dpkg-bak")).exists());
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
}

#[test]
fn a_power_cut_at_any_step_is_named_offered_and_undone() {
    let dir = grub_host();
    let n = count_steps(dir.path());
    for at in 0..n {
        let host = tempfile::tempdir().unwrap();
        crate::support::tree::copy_tree(dir.path(), host.path());
        let r = host.path();
        let original = tree(r);
        let mut e = env(r);
        e.crash_at = Some(at);
        let (o, _) = apply_once(r, &e);
        assert_eq!(o.state, EntryState::Applying, "step {at}");
        let st = status(&env(r));
        let s = st.last().unwrap();
        assert_eq!(s.standing, Standing::Interrupted, "step {at}");
        assert!(
            s.detail
                .as_deref()
                .unwrap_or("")
                .contains("tune undo --last"),
            "{s:?}"
        );
        // Never a mix: the boot configuration starts the old or the new setup.
        assert_ne!(s.next_boot, Some(NextBoot::Mixed), "step {at}: {s:?}");
        // The Overview offers the way back as its next step.
        let root = HostRoot::at(r);
        let snap = scan(&root).unwrap();
        let findings = vfio_assistant::report::findings::host_findings(
            &root,
            &snap,
            &vfio_assistant::report::findings::FindingsRequest::default(),
        );
        let step = vfio_assistant::report::next_step::next_step(&snap, &findings);
        assert!(
            matches!(step.action, vfio_assistant::report::next_step::NextAction::RestoreHost { ref transaction } if *transaction == o.id),
            "step {at}: {step:?}"
        );
        // `undo --last` takes it, and the host is as before.
        let last = e.journal.last_undoable().unwrap();
        assert_eq!(last.id, o.id);
        let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
        assert_eq!(u.failure, None, "step {at}: {u:?}");
        assert_eq!(
            differ(&original, &tree(r)),
            Vec::<String>::new(),
            "step {at}"
        );
    }
}

#[test]
fn systemd_boot_gets_the_image_its_entry_loads_and_a_new_entry_tried_once() {
    let dir = sdboot_host();
    let r = dir.path();
    let original = tree(r);
    let root = HostRoot::at(r);
    let p = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    assert_eq!(p.boot.loader, "systemd-boot");
    assert_eq!(p.boot.initramfs, "dracut");
    let entry_before = std::fs::read_to_string(r.join(SD_ENTRY)).unwrap();
    let (o, lines) = apply_once(r, &env(r));
    assert_eq!(o.state, EntryState::Applied, "{o:?} {lines:#?}");
    let l = log(r);
    // dracut rebuilt the next boot's image, then kernel-install put it on
    // the ESP where the default entry loads it — before our entry exists.
    let dracut = l
        .iter()
        .position(|x| x.starts_with("dracut: wrote"))
        .unwrap();
    let ki = l
        .iter()
        .position(|x| x.starts_with("kernel-install:"))
        .unwrap();
    let oneshot = l
        .iter()
        .position(|x| x.contains("set-oneshot vfio-assistant.conf"))
        .unwrap();
    assert!(dracut < ki && ki < oneshot, "{l:#?}");
    assert!(
        holds(r, SD_INITRD, "modprobe.d/vfio-assistant.conf"),
        "the ESP's image"
    );
    // The default entry is as it was (the old setup stays the default);
    // ours holds every token.
    assert_eq!(
        std::fs::read_to_string(r.join(SD_ENTRY)).unwrap(),
        entry_before
    );
    let ours =
        std::fs::read_to_string(r.join("boot/efi/loader/entries/vfio-assistant.conf")).unwrap();
    for t in planned_tokens(&p) {
        assert!(
            ours.lines()
                .any(|x| x.starts_with("options") && x.split_whitespace().any(|w| w == t)),
            "{t}: {ours}"
        );
    }
    // Undo: byte for byte, nothing regenerated.
    let mark = log(r).len();
    let u = undo(&env(r), &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None, "{u:?}");
    assert!(
        log(r)[mark..]
            .iter()
            .all(|x| x.starts_with("bootctl") || x.starts_with("modprobe")),
        "{:#?}",
        &log(r)[mark..]
    );
    kernel_gives_hugepages(r);
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
}

#[test]
fn the_softdep_names_the_drivers_module_not_the_driver() {
    // Found on a real boot: bochs-drm (QEMU's VGA) lives in the module
    // `bochs`; a `softdep bochs_drm …` does nothing and the host driver
    // took the card before vfio-pci.
    let dir = grub_host();
    let r = dir.path();
    let dev = "sys/devices/pci0000:00/0000:0b:00.0";
    let _ = std::fs::remove_file(r.join(dev).join("driver"));
    std::fs::create_dir_all(r.join("sys/bus/pci/drivers/bochs-drm")).unwrap();
    std::fs::create_dir_all(r.join("sys/module/bochs")).unwrap();
    std::os::unix::fs::symlink(
        "../../../bus/pci/drivers/bochs-drm",
        r.join(dev).join("driver"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        "../../../../module/bochs",
        r.join("sys/bus/pci/drivers/bochs-drm/module"),
    )
    .unwrap();
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let d = &snap.device("0000:0b:00.0").unwrap().device;
    assert_eq!(d.driver.as_deref(), Some("bochs-drm"));
    assert_eq!(d.driver_module.as_deref(), Some("bochs"));
    let p = plan(&snap, &gather(&root), &request()).unwrap();
    let vb = p.changes.iter().find(|c| c.id == "vfio-boot").unwrap();
    let text = vb.files[0].after.clone().unwrap();
    assert!(text.contains("softdep bochs pre: vfio-pci"), "{text}");
    assert!(
        !text.contains("bochs_drm") && !text.contains("bochs-drm"),
        "{text}"
    );
}

#[test]
fn a_missing_write_target_is_refused_before_anything_changes() {
    // A capture without /sys/bus/pci/drivers_probe: the bind would fail
    // half-way, after the boot files; the preflight finds it first.
    let dir = grub_host();
    let r = dir.path();
    std::fs::remove_file(r.join("sys/bus/pci/drivers_probe")).unwrap();
    let original = tree(r);
    let root = HostRoot::at(r);
    let p = plan(&scan(&root).unwrap(), &gather(&root), &request()).unwrap();
    assert!(p.changes.iter().any(|c| c.id == "vfio-bind"));
    let err = apply(&env(r), &gather(&root), &p, &request(), &mut |_| {}).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("refused before changing anything")
            && text.contains("/sys/bus/pci/drivers_probe"),
        "{text}"
    );
    assert_eq!(differ(&original, &tree(r)), Vec::<String>::new());
    assert!(log(r).is_empty(), "no command ran: {:?}", log(r));
}

#[test]
fn managed_interrupts_are_not_planned_to_move() {
    // Found on a real boot: a queue interrupt of a multi-queue device is
    // spread over the CPUs by the kernel, its smp_affinity_list read-only;
    // planned, it was refused and planned again after every reboot.
    use std::os::unix::fs::PermissionsExt;
    let dir = grub_host();
    let r = dir.path();
    for (irq, mode) in [(30, 0o444), (31, 0o644)] {
        let p = r.join(format!("proc/irq/{irq}/smp_affinity_list"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "0-11\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let f = gather(&HostRoot::at(r));
    assert!(!f.irq_affinity.contains_key(&30), "{:?}", f.irq_affinity);
    assert!(f.irq_affinity.contains_key(&31), "{:?}", f.irq_affinity);
}

#[test]
fn undo_passes_over_an_interrupt_that_is_gone_since() {
    // Found on a real boot: after the reboot some interrupts the apply had
    // moved were not there any more (their numbers change); the undo said
    // it failed and exited 1.
    let dir = grub_host();
    let r = dir.path();
    crate::support::hosts::put(r, "proc/irq/40/smp_affinity_list", "0-11\n");
    let (o, _) = apply_once(r, &env(r));
    assert_eq!(o.state, EntryState::Applied);
    let e = env(r).journal.load(&o.id).unwrap();
    assert!(
        e.values
            .iter()
            .any(|(p, _)| p == "/proc/irq/40/smp_affinity_list"),
        "{:?}",
        e.values
    );
    std::fs::remove_dir_all(r.join("proc/irq/40")).unwrap();
    let mut lines = Vec::new();
    let u = undo(&env(r), &o.id, false, &mut |l| lines.push(l)).unwrap();
    assert_eq!(u.failure, None, "{lines:#?}");
    assert!(lines.iter().any(|l| matches!(l, Progress::Done { step } if step.contains("/proc/irq/40") && step.contains("not there"))));
}
