//! Boot path detection and the command line change per loader, on facts
//! built from text (the real distribution trees are in tests/it/tuning.rs).

use super::*;
use crate::tuning::facts::TuneFacts;

fn facts(files: &[(&str, &str)], dirs: &[(&str, &[&str])], tools: &[&str]) -> TuneFacts {
    let mut f = TuneFacts::default();
    for (p, t) in files {
        f.files.insert(p.to_string(), Some(t.to_string()));
    }
    for (d, names) in dirs {
        f.dirs
            .insert(d.to_string(), names.iter().map(|s| s.to_string()).collect());
    }
    f.tools = tools.iter().map(|s| s.to_string()).collect();
    f
}

fn v(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

#[test]
fn grub_variables_are_sourced_in_order() {
    let main = "GRUB_DEFAULT=0\n#GRUB_CMDLINE_LINUX_DEFAULT=\"nope\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n";
    let dropin = "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT splash\"\n";
    assert_eq!(
        grub_var(&[main, dropin], "GRUB_CMDLINE_LINUX_DEFAULT"),
        "quiet splash"
    );
    assert_eq!(grub_var(&[main], "GRUB_CMDLINE_LINUX"), "");
    let edited = set_grub_var(main, "GRUB_CMDLINE_LINUX_DEFAULT", &v(&["iommu=pt"]));
    assert!(
        edited.contains("GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iommu=pt\"\n"),
        "{edited}"
    );
    assert!(
        edited.contains("#GRUB_CMDLINE_LINUX_DEFAULT=\"nope\""),
        "comments kept: {edited}"
    );
    assert_eq!(
        set_grub_var("", "GRUB_CMDLINE_LINUX", &v(&["a=1"])),
        "GRUB_CMDLINE_LINUX=\"a=1\"\n"
    );
}

#[test]
fn the_debian_drop_in_is_ours_and_idempotent() {
    let mut f = facts(
        &[
            (
                "/etc/default/grub",
                "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n",
            ),
            ("/boot/grub/grub.cfg", ""),
        ],
        &[("/etc/default/grub.d", &[])],
        &["update-grub"],
    );
    f.proc_cmdline = Some("BOOT_IMAGE=/vmlinuz root=/dev/sda1 quiet".into());
    assert_eq!(detect_loader(&f).0, Loader::GrubDebian);
    let c = cmdline_change(&f, Loader::GrubDebian, &v(&["iommu=pt"]))
        .unwrap()
        .unwrap();
    assert_eq!(c.files[0].path, "/etc/default/grub.d/99-vfio-assistant.cfg");
    let after = c.files[0].after.clone().unwrap();
    assert!(
        after.contains("GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt\""),
        "{after}"
    );
    // grub.cfg is generated beside itself and switched by a rename (never
    // update-grub's in-place `cat`), after a check of the staged file.
    assert_eq!(
        c.commands[0].argv(),
        v(&["grub-mkconfig", "-o", "/boot/grub/.vfio-assistant-grub.cfg"])
    );
    assert_eq!(c.artifacts[0].path, "/boot/grub/grub.cfg");
    // Applied: planning again has nothing to do.
    f.files.insert(
        "/etc/default/grub.d/99-vfio-assistant.cfg".into(),
        Some(after),
    );
    f.dirs
        .insert("/etc/default/grub.d".into(), v(&["99-vfio-assistant.cfg"]));
    assert!(
        cmdline_change(&f, Loader::GrubDebian, &v(&["iommu=pt"]))
            .unwrap()
            .is_none()
    );
    // Already in the main file: nothing either, and no drop-in.
    let g = facts(
        &[("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"iommu=pt\"\n")],
        &[("/etc/default/grub.d", &[])],
        &["update-grub"],
    );
    assert!(
        cmdline_change(&g, Loader::GrubDebian, &v(&["iommu=pt"]))
            .unwrap()
            .is_none()
    );
}

#[test]
fn loaders_are_told_by_what_booted() {
    let mut f = facts(
        &[("/etc/kernel/cmdline", "root=UUID=x rw")],
        &[("/boot/loader/entries", &["arch.conf"])],
        &["bootctl"],
    );
    f.loader_info = Some("systemd-boot 255.4-1-arch".into());
    assert_eq!(detect_loader(&f).0, Loader::SystemdBoot);
    f.files.insert(
        "/etc/kernel/install.conf".into(),
        Some("layout=uki\n".into()),
    );
    assert_eq!(detect_loader(&f).0, Loader::Uki);
    let mut o = TuneFacts::default();
    o.markers.insert("/run/ostree-booted".into());
    assert_eq!(detect_loader(&o).0, Loader::RpmOstree);
    // GRUB's bli module sets LoaderInfo too: the string, not its presence.
    let mut g = facts(
        &[
            ("/etc/default/grub", "GRUB_ENABLE_BLSCFG=true\n"),
            (
                "/boot/loader/entries/a-6.11.conf",
                "title Fedora\noptions root=x\n",
            ),
        ],
        &[("/boot/loader/entries", &["a-6.11.conf"])],
        &["grubby"],
    );
    g.loader_info = Some("GRUB 2.12".into());
    assert_eq!(detect_loader(&g).0, Loader::GrubBls);
    assert_eq!(detect_loader(&TuneFacts::default()).0, Loader::Unknown);
}

#[test]
fn systemd_boot_gets_a_new_entry_booted_once() {
    let entry = "title   Arch Linux\nlinux   /vmlinuz-linux\ninitrd  /initramfs-linux.img\noptions root=UUID=abc rw\n";
    let mut f = facts(
        &[
            ("/boot/loader/entries/arch.conf", entry),
            ("/boot/loader/loader.conf", "default arch.conf\ntimeout 3\n"),
        ],
        &[("/boot/loader/entries", &["arch.conf"])],
        &["bootctl"],
    );
    f.loader_info = Some("systemd-boot 255".into());
    let c = cmdline_change(&f, Loader::SystemdBoot, &v(&["iommu=pt"]))
        .unwrap()
        .unwrap();
    assert_eq!(c.files.len(), 1);
    assert_eq!(c.files[0].path, "/boot/loader/entries/vfio-assistant.conf");
    let after = c.files[0].after.clone().unwrap();
    assert!(
        after.contains("options root=UUID=abc rw iommu=pt\n"),
        "{after}"
    );
    assert!(
        after.contains("title Arch Linux (VFIO Assistant)"),
        "{after}"
    );
    assert_eq!(
        c.commands[0].argv(),
        v(&["bootctl", "set-oneshot", "vfio-assistant.conf"])
    );
    // The original entry is not touched.
    assert!(
        c.files
            .iter()
            .all(|x| x.path != "/boot/loader/entries/arch.conf")
    );
}

#[test]
fn bootc_and_uki_get_manual_steps() {
    for l in [Loader::Bootc, Loader::Uki, Loader::Unknown] {
        let m = cmdline_change(&TuneFacts::default(), l, &v(&["iommu=pt"])).unwrap_err();
        assert!(m.steps.iter().any(|s| s.contains("iommu=pt")), "{m:?}");
    }
}
