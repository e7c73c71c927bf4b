//! The shared-GPU hook as libvirt runs it (`sh HOOK VM prepare begin -`,
//! then `release end -`), on a sysfs laid out as a real one for the
//! real-host run's second card (bochs-drm at 01:00.0 with its HD audio at
//! 01:00.1). A stand-in `timeout` on PATH does what the kernel does with the
//! writes the hook makes (unbind drops the `driver` link, bind makes it,
//! through `driver_override`), so the whole hand-over is walked: the card
//! to vfio-pci and back, ten times; a holder whose unit may be stopped is
//! stopped and started again, one that may not fails the start with its
//! name and the card stays with the host; an unbind that hangs is cut at
//! the time limit and the card stays with the host. Holders are nodes made
//! with the card's device numbers (what sysfs's `drm/card1/dev` says),
//! found by that number, not by the path.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::devnodes::{can_mknod, char_node, open_fd, process};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use vfio_assistant::tuning::facts::TuneFacts;
use vfio_assistant::tuning::shared_gpu::{ALWAYS_STOPPED, shared_gpu_hook};

const GPU: &str = "0000:01:00.0";
const AUDIO: &str = "0000:01:00.1";

fn put(root: &Path, rel: &str, text: &str) {
    crate::support::hosts::put(root, rel, text);
}

pub(crate) fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_default()
}

fn exe(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub(crate) fn driver(root: &Path, dev: &str) -> Option<String> {
    std::fs::read_link(root.join(format!("sys/bus/pci/devices/{dev}/driver")))
        .ok()
        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// Binds `dev` to `drv` as the kernel shows it (a `driver` link).
fn bind(root: &Path, dev: &str, drv: &str) {
    let link = root.join(format!("sys/bus/pci/devices/{dev}/driver"));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(format!("../../../bus/pci/drivers/{drv}"), link).unwrap();
}

/// The kernel's side of the hook's sysfs writes, as a stand-in for
/// `timeout [-k KILL] SECONDS sh -c 'printf …' put FILE VALUE`; anything else
/// runs the real timeout. `.unbind-hangs` in the root makes an unbind block
/// (a sleep the real timeout cuts); `.unbind-stuck` makes it never return,
/// not even killed (a write the kernel holds: nothing here can be killed).
const TIMEOUT: &str = r#"#!/bin/sh
kill_after=
if [ "$1" = -k ]; then kill_after=$2; shift 2; fi
secs=$1; shift
if [ "$1 $2" = "sh -c" ] && [ "$4" = put ]; then
    file=$5; val=$6
    S="$VFIO_ASSISTANT_ROOT/sys/bus/pci"
    case "$file" in
    */unbind)
        if [ -e "$VFIO_ASSISTANT_ROOT/.unbind-stuck" ]; then
            echo $$ > "$VFIO_ASSISTANT_ROOT/stuck.pid"; trap '' TERM INT HUP; sleep 30; exit 0
        fi
        if [ -e "$VFIO_ASSISTANT_ROOT/.unbind-hangs" ]; then exec /usr/bin/timeout ${kill_after:+-k "$kill_after"} "$secs" sleep 30; fi
        rm -f "$S/devices/$val/driver"; exit 0 ;;
    */drivers/*/bind)
        drv=${file%/bind}; drv=${drv##*/}
        ov=$(cat "$S/devices/$val/driver_override" 2>/dev/null)
        if [ -n "$ov" ] && [ "$ov" != "$drv" ]; then echo "override says $ov" >&2; exit 1; fi
        ln -sfn "../../../bus/pci/drivers/$drv" "$S/devices/$val/driver"; exit 0 ;;
    */driver_override)
        printf '%s' "$val" > "$file"; exit 0 ;;
    esac
    printf '%s\n' "$val" >> "$file"
    exit 0
fi
exec /usr/bin/timeout ${kill_after:+-k "$kill_after"} "$secs" "$@"
"#;

/// systemd as far as the hook asks it (after `R=` the root):
/// e2e-holder.service is active while its process is; stopping it ends the
/// process — or, with `.stop-ignores-term` in the root, never returns and
/// ignores TERM (a unit whose stop hangs; `timeout -k` must KILL it).
const SYSTEMCTL: &str = r#"echo "systemctl $*" >> "$R/systemctl.log"
verb=$1
for unit; do :; done
case "$verb" in
is-active) [ "$unit" = e2e-holder.service ] && [ -d "$R/proc/4242" ] ;;
stop)
    if [ -e "$R/.stop-ignores-term" ]; then trap '' TERM; sleep 30; fi
    [ "$unit" = e2e-holder.service ] && rm -rf "$R/proc/4242"
    exit 0 ;;
start) [ "$unit" = e2e-holder.service ] && touch "$R/holder-started"; exit 0 ;;
esac
"#;

/// A desktop with the second card on its drivers, a holder of its DRM node
/// run by `e2e-holder.service` (pid 4242), and a systemctl that stops it.
/// Needs root (the card's nodes): callers check `can_mknod` first.
pub(crate) fn host(allowed: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    for (dev, drv) in [(GPU, "bochs-drm"), (AUDIO, "snd_hda_intel")] {
        put(r, &format!("sys/bus/pci/devices/{dev}/driver_override"), "");
        put(r, &format!("sys/bus/pci/devices/{dev}/power_state"), "D0\n");
        std::fs::write(
            r.join(format!("sys/bus/pci/devices/{dev}/config")),
            [0x34u8, 0x12, 0x11, 0x11],
        )
        .unwrap();
        bind(r, dev, drv);
    }
    for drv in ["bochs-drm", "snd_hda_intel", "vfio-pci"] {
        put(r, &format!("sys/bus/pci/drivers/{drv}/bind"), "");
        put(r, &format!("sys/bus/pci/drivers/{drv}/unbind"), "");
    }
    for (n, minor) in [("card1", 1), ("renderD129", 129)] {
        put(
            r,
            &format!("sys/bus/pci/devices/{GPU}/drm/{n}/dev"),
            &format!("226:{minor}\n"),
        );
    }
    char_node(r, "dev/dri/card1", 226, 1);
    char_node(r, "dev/dri/renderD129", 226, 129);
    holder(r);
    std::fs::create_dir_all(r.join("run")).unwrap();
    std::fs::create_dir_all(r.join("var/log")).unwrap();
    let bin = r.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    exe(&bin.join("timeout"), TIMEOUT);
    // systemd as far as the hook asks it: e2e-holder.service is active
    // while its process is; stopping it ends the process.
    exe(
        &bin.join("systemctl"),
        &format!("#!/bin/sh\nR='{}'\n{SYSTEMCTL}", r.display()),
    );
    let mut units: Vec<String> = ALWAYS_STOPPED.iter().map(|s| s.to_string()).collect();
    units.extend(allowed.iter().map(|s| s.to_string()));
    let hook = shared_gpu_hook(
        &TuneFacts::default(),
        "win11",
        &[AUDIO.to_string(), GPU.to_string()],
        &units,
    )
    .unwrap();
    let script = r.join("hook.sh");
    std::fs::write(&script, hook.files[0].after.as_deref().unwrap()).unwrap();
    (dir, script)
}

/// pid 4242, `e2e-holder`, in `e2e-holder.service`, with card1 open.
fn holder(r: &Path) {
    let p = process(r, 4242, "e2e-holder", "/system.slice/e2e-holder.service");
    open_fd(&p, 3, r.join("dev/dri/card1"));
}

pub(crate) fn run(root: &Path, script: &Path, op: &str, sub: &str) -> std::process::Output {
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("sh")
        .arg(script)
        .args(["win11", op, sub, "-"])
        .env("VFIO_ASSISTANT_ROOT", root)
        .env("VFIO_ASSISTANT_WAIT", "3")
        .env("PATH", path)
        .output()
        .unwrap()
}

pub(crate) fn log(r: &Path) -> String {
    read(r, "var/log/vfio-assistant-shared-gpu.log")
}

#[test]
fn a_holder_that_may_not_be_stopped_fails_the_start_by_name_and_the_card_stays() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&[]);
    let r = dir.path();
    let o = run(r, &script, "prepare", "begin");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let l = log(r);
    assert!(
        l.contains("4242:e2e-holder(e2e-holder.service)") && l.contains("still holding the GPU"),
        "{l}"
    );
    assert_eq!(driver(r, GPU).as_deref(), Some("bochs-drm"));
    assert_eq!(driver(r, AUDIO).as_deref(), Some("snd_hda_intel"));
    assert_eq!(
        read(r, &format!("sys/bus/pci/devices/{GPU}/driver_override")),
        ""
    );
    assert!(!read(r, "systemctl.log").contains("stop -- e2e-holder"));
    assert!(!r.join("run/vfio-assistant-shared-gpu.state").exists());
}

/// Any local user names their own processes and scopes: a name with a
/// backslash (`\c` ends dash's `echo`), a newline or a space is logged as
/// one harmless word, and the holders after it are still named.
#[test]
fn a_hostile_process_name_cannot_hide_the_other_holders_from_the_log() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&[]);
    let r = dir.path();
    let p = process(r, 1111, "a\\cb x\nz", "/user.slice/run-x\\c2d.scope");
    open_fd(&p, 5, r.join("dev/dri/renderD129"));
    let o = run(r, &script, "prepare", "begin");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let l = log(r);
    assert!(l.contains("1111:a_cb_xz(run-x_c2d.scope)"), "{l}");
    assert!(l.contains("4242:e2e-holder(e2e-holder.service)"), "{l}");
    assert_eq!(driver(r, GPU).as_deref(), Some("bochs-drm"));
}

#[test]
fn ten_cycles_lend_the_card_and_give_it_back_healthy() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    for i in 0..10 {
        let o = run(r, &script, "prepare", "begin");
        assert!(o.status.success(), "cycle {i}: {o:?}\n{}", log(r));
        assert_eq!(driver(r, GPU).as_deref(), Some("vfio-pci"), "cycle {i}");
        assert_eq!(driver(r, AUDIO).as_deref(), Some("vfio-pci"), "cycle {i}");
        assert!(
            !r.join("proc/4242").exists(),
            "the holder's unit was stopped"
        );
        let o = run(r, &script, "release", "end");
        assert!(o.status.success(), "cycle {i}: {o:?}");
        assert_eq!(driver(r, GPU).as_deref(), Some("bochs-drm"), "cycle {i}");
        assert_eq!(
            driver(r, AUDIO).as_deref(),
            Some("snd_hda_intel"),
            "cycle {i}"
        );
        assert!(
            r.join("holder-started").exists(),
            "cycle {i}: its unit started again"
        );
        // The unit's process is back, as systemd would start it.
        std::fs::remove_file(r.join("holder-started")).unwrap();
        holder(r);
    }
    let l = log(r);
    assert_eq!(l.matches("lent to the VM").count(), 10, "{l}");
    assert_eq!(
        l.matches(&format!("healthy: {GPU} on bochs-drm (D0"))
            .count(),
        10,
        "{l}"
    );
    assert!(!l.contains("NOT HEALTHY"), "{l}");
    // The audio went first and came back last.
    let first = l
        .lines()
        .find(|x| x.contains("driver_override vfio-pci"))
        .unwrap();
    assert!(first.contains(AUDIO), "{first}");
    // Another VM's start: nothing happens.
    let before = read(r, "systemctl.log");
    let o = std::process::Command::new("sh")
        .arg(&script)
        .args(["other", "prepare", "begin", "-"])
        .env("VFIO_ASSISTANT_ROOT", r)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(read(r, "systemctl.log"), before);
}

#[test]
fn an_unbind_that_hangs_is_cut_and_the_card_stays_with_the_host() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    std::fs::write(r.join(".unbind-hangs"), "").unwrap();
    let started = std::time::Instant::now();
    let o = run(r, &script, "prepare", "begin");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(started.elapsed().as_secs() < 20, "bounded");
    let l = log(r);
    assert!(
        l.contains("did not let go within 3s") && l.contains("card stays with the host"),
        "{l}"
    );
    assert_eq!(
        read(r, &format!("sys/bus/pci/devices/{AUDIO}/driver_override")),
        ""
    );
    assert!(
        read(r, "systemctl.log").contains("start -- e2e-holder.service"),
        "its unit back"
    );
}

#[test]
fn a_card_that_does_not_come_back_is_said_unhealthy() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    assert!(run(r, &script, "prepare", "begin").status.success());
    // The reset left it dead: config space reads all ones.
    std::fs::write(
        r.join(format!("sys/bus/pci/devices/{GPU}/config")),
        [0xffu8; 4],
    )
    .unwrap();
    assert!(run(r, &script, "release", "end").status.success());
    let l = log(r);
    assert!(
        l.contains(&format!("NOT HEALTHY: {GPU} config space ffffffff")),
        "{l}"
    );
}

#[test]
fn a_sound_server_on_the_cards_audio_is_said_not_refused() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    put(
        r,
        &format!("sys/bus/pci/devices/{AUDIO}/sound/card1/controlC1/dev"),
        "116:7\n",
    );
    let ctl = char_node(r, "dev/snd/controlC1", 116, 7);
    let p = process(
        r,
        777,
        "pipewire",
        "/user.slice/user-1000.slice/user@1000.service/session.slice/pipewire.service",
    );
    open_fd(&p, 9, ctl);
    let o = run(r, &script, "prepare", "begin");
    assert!(o.status.success(), "{o:?}\n{}", log(r));
    let l = log(r);
    assert!(
        l.contains("HDMI audio is open (pid:program): 777:pipewire"),
        "{l}"
    );
}
