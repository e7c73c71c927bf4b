//! The single-GPU hook as libvirt runs it: `sh HOOK VM prepare begin -`,
//! then `release end -`, on a sysfs laid out as a real one (two virtual
//! consoles, fbcon bound to one; the EFI framebuffer bound) with a
//! stand-in `systemctl` on PATH that records and answers like systemd
//! (gdm as the display manager). Prepare lets go of everything, release
//! gives back exactly that; a step that fails is logged and the hook still
//! exits 0 (it never stops the VM's start).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use vfio_assistant::tuning::facts::TuneFacts;
use vfio_assistant::tuning::single_gpu::single_gpu_hook;

fn put(root: &Path, rel: &str, text: &str) {
    crate::support::hosts::put(root, rel, text);
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_default()
}

/// A host with a desktop: fbcon on vtcon1, the EFI framebuffer bound, and
/// a systemctl that says gdm runs.
fn desktop() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    put(r, "sys/class/vtconsole/vtcon0/bind", "0\n");
    put(r, "sys/class/vtconsole/vtcon0/name", "(S) dummy device\n");
    put(r, "sys/class/vtconsole/vtcon1/bind", "1\n");
    put(
        r,
        "sys/class/vtconsole/vtcon1/name",
        "(M) frame buffer device\n",
    );
    put(r, "sys/bus/platform/drivers/efi-framebuffer/bind", "");
    put(r, "sys/bus/platform/drivers/efi-framebuffer/unbind", "");
    std::fs::create_dir_all(r.join("sys/devices/platform/efi-framebuffer.0")).unwrap();
    std::os::unix::fs::symlink(
        "../../../../devices/platform/efi-framebuffer.0",
        r.join("sys/bus/platform/drivers/efi-framebuffer/efi-framebuffer.0"),
    )
    .unwrap();
    std::fs::create_dir_all(r.join("run")).unwrap();
    std::fs::create_dir_all(r.join("var/log")).unwrap();
    let bin = r.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let systemctl = bin.join("systemctl");
    std::fs::write(
        &systemctl,
        format!(
            "#!/bin/sh\necho \"systemctl $*\" >> '{}/systemctl.log'\ncase \"$1\" in show) echo gdm.service ;; esac\nexit 0\n",
            r.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hook = single_gpu_hook(&TuneFacts::default(), "win11").unwrap();
    let script = r.join("hook.sh");
    std::fs::write(&script, hook.files[0].after.as_deref().unwrap()).unwrap();
    (dir, script)
}

fn run(root: &Path, script: &Path, op: &str, sub: &str, vm: &str) -> std::process::Output {
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("sh")
        .arg(script)
        .args([vm, op, sub, "-"])
        .env("VFIO_ASSISTANT_ROOT", root)
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn prepare_lets_go_and_release_gives_back_every_binding() {
    let (dir, script) = desktop();
    let r = dir.path();
    let o = run(r, &script, "prepare", "begin", "win11");
    assert!(o.status.success());
    assert_eq!(read(r, "sys/class/vtconsole/vtcon1/bind").trim(), "0");
    assert_eq!(
        read(r, "sys/class/vtconsole/vtcon0/bind").trim(),
        "0",
        "not touched"
    );
    assert_eq!(
        read(r, "sys/bus/platform/drivers/efi-framebuffer/unbind").trim(),
        "efi-framebuffer.0"
    );
    assert!(read(r, "systemctl.log").contains("systemctl stop display-manager.service"));
    assert!(r.join("run/vfio-assistant-single-gpu.state").exists());
    let o = run(r, &script, "release", "end", "win11");
    assert!(o.status.success());
    assert_eq!(read(r, "sys/class/vtconsole/vtcon1/bind").trim(), "1");
    assert_eq!(
        read(r, "sys/class/vtconsole/vtcon0/bind").trim(),
        "0",
        "never bound: not bound back"
    );
    assert_eq!(
        read(r, "sys/bus/platform/drivers/efi-framebuffer/bind").trim(),
        "efi-framebuffer.0"
    );
    assert!(read(r, "systemctl.log").contains("systemctl start gdm.service"));
    assert!(!r.join("run/vfio-assistant-single-gpu.state").exists());
    let log = read(r, "var/log/vfio-assistant-single-gpu.log");
    assert!(log.contains("the host has its screen back"), "{log}");
    // Another VM's start: nothing happens.
    let before = read(r, "systemctl.log");
    assert!(
        run(r, &script, "prepare", "begin", "other")
            .status
            .success()
    );
    assert_eq!(read(r, "systemctl.log"), before);
}

#[test]
fn a_failing_step_is_logged_and_never_stops_the_start() {
    let (dir, script) = desktop();
    let r = dir.path();
    // The framebuffer's unbind cannot be written (here: a folder).
    std::fs::remove_file(r.join("sys/bus/platform/drivers/efi-framebuffer/unbind")).unwrap();
    std::fs::create_dir(r.join("sys/bus/platform/drivers/efi-framebuffer/unbind")).unwrap();
    let o = run(r, &script, "prepare", "begin", "win11");
    assert!(o.status.success(), "{o:?}");
    let log = read(r, "var/log/vfio-assistant-single-gpu.log");
    assert!(log.contains("FAILED (going on)"), "{log}");
    // The other steps ran.
    assert_eq!(read(r, "sys/class/vtconsole/vtcon1/bind").trim(), "0");
    assert!(read(r, "systemctl.log").contains("stop display-manager.service"));
    // And release still gives back what it recorded.
    assert!(run(r, &script, "release", "end", "win11").status.success());
    assert_eq!(read(r, "sys/class/vtconsole/vtcon1/bind").trim(), "1");
}
