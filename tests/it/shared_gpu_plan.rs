//! Shared GPU planned on the real booted host's capture (issue 34): two
//! GPUs, virtio-vga at 00:02.0 the desktop's (boot GPU), the bochs VGA at
//! 01:00.0 with its HD audio at 01:00.1 the one lent. The card is never
//! bound at boot; the hook lends both functions; the compositor is kept off
//! the card by the means of the compositor installed (GNOME: the udev tag
//! on its DRM node; KDE, wlroots, Hyprland: their device lists in
//! environment.d naming the desktop's card by our udev name; Xorg:
//! AutoAddGPU off). Applied on the tree with the stand-ins, undone to the
//! byte.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use super::support::tree::copy_tree;
use std::path::{Path, PathBuf};
use std::process::Command;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Env, apply, undo};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::model::Request;
use vfio_assistant::tuning::plan::plan;

const HOST: &str = "tests/fixtures/hosts/e2e-debian12-grub";

/// The capture, with these compositors' programs installed.
fn desktop(programs: &[&str]) -> tempfile::TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(HOST);
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&src, dir.path());
    for p in programs {
        let at = dir.path().join("usr/bin").join(p);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(&at, "").unwrap();
        std::fs::set_permissions(&at, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    dir
}

fn cli_plan(root: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["tune", "plan", "--json", "--root"])
        .arg(root)
        .args(extra)
        .output()
        .unwrap()
}

fn changes(root: &Path, gpu: &str) -> serde_json::Value {
    let o = cli_plan(root, &["--gpu", gpu, "--shared-gpu", "win11"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn file_after(v: &serde_json::Value, path: &str) -> Option<String> {
    v["changes"].as_array()?.iter().find_map(|c| {
        c["files"].as_array()?.iter().find_map(|f| {
            (f["path"] == path).then(|| f["after"].as_str().unwrap_or("").to_string())
        })
    })
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str().map(str::to_string))
        .collect()
}

const UDEV: &str = "/etc/udev/rules.d/61-vfio-assistant-shared-gpu.rules";
const ENVIRONMENT: &str = "/etc/environment.d/90-vfio-assistant-shared-gpu.conf";
const XORG: &str = "/etc/X11/xorg.conf.d/20-vfio-assistant-shared-gpu.conf";

#[test]
fn gnome_gets_the_tag_on_the_cards_drm_node_and_nothing_binds_it_at_boot() {
    let dir = desktop(&["gnome-shell"]);
    let v = changes(dir.path(), "01:00.0");
    let ids = ids(&v);
    assert!(ids.contains(&"shared-gpu-hook".to_string()), "{ids:?}");
    assert!(ids.contains(&"shared-gpu-desktop".to_string()), "{ids:?}");
    for no in ["vfio-boot", "vfio-bind", "single-gpu-hook"] {
        assert!(!ids.contains(&no.to_string()), "{no}: {ids:?}");
    }
    let all = v.to_string();
    assert!(
        !all.contains("vfio_pci.ids") && !all.contains("softdep"),
        "{all}"
    );
    let rule = file_after(&v, UDEV).unwrap();
    // On the drm device (SUBSYSTEM=="drm"), matched by its PCI parent.
    assert!(
        rule.contains(r#"SUBSYSTEM=="drm", KERNEL=="card[0-9]*", KERNELS=="0000:01:00.0", TAG+="mutter-device-ignore""#),
        "{rule}"
    );
    assert!(
        rule.contains(r#"KERNELS=="0000:00:02.0", SYMLINK+="dri/vfio-assistant-desktop-card""#)
    );
    assert!(
        file_after(&v, ENVIRONMENT).is_none(),
        "GNOME reads the tag only"
    );
    assert!(file_after(&v, XORG).is_none());
    // The hook lends the audio first, the GPU last.
    let hook = file_after(&v, "/etc/libvirt/hooks/qemu.d/vfio-assistant-shared-gpu").unwrap();
    assert!(hook.contains("FUNCS='0000:01:00.1 0000:01:00.0'"), "{hook}");
    assert!(
        all.contains("DRI_PRIME=pci-0000_01_00_0"),
        "render offload said"
    );
}

#[test]
fn kde_and_wlroots_and_hyprland_get_their_device_lists_naming_the_desktops_card() {
    for (program, var) in [
        ("kwin_wayland", "KWIN_DRM_DEVICES"),
        ("sway", "WLR_DRM_DEVICES"),
        ("Hyprland", "AQ_DRM_DEVICES"),
    ] {
        let dir = desktop(&[program]);
        let v = changes(dir.path(), "01:00.0");
        let env = file_after(&v, ENVIRONMENT).unwrap_or_default();
        let lines: Vec<&str> = env.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            vec![format!("{var}=/dev/dri/vfio-assistant-desktop-card").as_str()],
            "{program}: {env}"
        );
    }
}

#[test]
fn xorg_gets_autoaddgpu_off_and_no_device_section() {
    let dir = desktop(&["Xorg", "gnome-shell"]);
    let v = changes(dir.path(), "01:00.0");
    let x = file_after(&v, XORG).unwrap();
    assert!(x.contains(r#"Option "AutoAddGPU" "false""#), "{x}");
    assert!(!x.contains("Section \"Device\""), "{x}");
}

#[test]
fn the_boot_gpu_is_refused_and_single_and_shared_do_not_mix() {
    let dir = desktop(&["gnome-shell"]);
    let o = cli_plan(dir.path(), &["--gpu", "00:02.0", "--shared-gpu", "win11"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stdout);
    assert!(
        err.contains("shared GPU: ") && err.contains("boots on") && err.contains("single-GPU"),
        "{err}"
    );
    let o = cli_plan(
        dir.path(),
        &[
            "--gpu",
            "01:00.0",
            "--shared-gpu",
            "win11",
            "--single-gpu",
            "win11",
        ],
    );
    assert!(!o.status.success());
    let o = cli_plan(
        dir.path(),
        &[
            "--gpu",
            "01:00.0",
            "--shared-gpu",
            "win11",
            "--shared-stop",
            "x;rm -rf /",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stdout);
    assert!(err.contains("not a unit"), "{err}");
}

fn standins() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/standins")
}

#[test]
fn applied_on_the_tree_and_undone_to_the_byte() {
    let dir = desktop(&["kwin_wayland"]);
    let r = dir.path();
    let before = crate::support::tuning::tree(r);
    let root = HostRoot::at(r);
    let req = Request {
        gpus: vec!["01:00.0".parse().unwrap()],
        vm: Some("win11".into()),
        shared_gpu: true,
        shared_stop_units: vec!["ollama.service".into()],
        only: vec![],
        ..Request::default()
    };
    let p = plan(&scan(&root).unwrap(), &gather(&root), &req).unwrap();
    let mut env = Env::new(HostRoot::at(r), None, true);
    env.tool_dir = Some(standins());
    let mut lines = Vec::new();
    let o = apply(&env, &gather(&root), &p, &req, &mut |l| lines.push(l)).unwrap();
    assert_eq!(o.state, EntryState::Applied, "{lines:#?}");
    // udev gave the desktop's card our name before anything names it.
    let link = std::fs::read_link(r.join("dev/dri/vfio-assistant-desktop-card")).unwrap();
    let card: Vec<String> = std::fs::read_dir(r.join("sys/bus/pci/devices/0000:00:02.0/drm"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("card"))
        .collect();
    assert_eq!(vec![link.to_string_lossy().into_owned()], card);
    let hook =
        std::fs::read_to_string(r.join("etc/libvirt/hooks/qemu.d/vfio-assistant-shared-gpu"))
            .unwrap();
    assert!(
        hook.contains("UNITS='nvidia-persistenced.service ollama.service'"),
        "{hook}"
    );
    // What check says of the tuned host: the card held by its drivers is
    // the shared mode's design, and the hook in qemu.d is a script that
    // runs (the folder is not judged as one).
    let o2 = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["check", "--device", "01:00.0", "--json", "--root"])
        .arg(r)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o2.stdout).unwrap();
    let finding = |id: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    let bound = finding("device.bound");
    assert_eq!(bound["status"], "info", "{bound}");
    assert!(
        bound["title"].as_str().unwrap().contains("shared GPU"),
        "{bound}"
    );
    let hooks = finding("libvirt.hooks");
    assert_eq!(hooks["status"], "pass", "{hooks}");
    assert!(
        hooks
            .to_string()
            .contains("qemu.d/vfio-assistant-shared-gpu"),
        "{hooks}"
    );
    let u = undo(&env, &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.failure, None, "{u:?}");
    assert!(!r.join("dev/dri/vfio-assistant-desktop-card").exists());
    let after = crate::support::tuning::tree(r);
    assert_eq!(
        crate::support::tuning::differ(&before, &after),
        Vec::<String>::new()
    );
}
