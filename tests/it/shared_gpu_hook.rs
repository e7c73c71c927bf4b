//! The shared-GPU hook as libvirt runs it (`sh HOOK VM prepare begin -`,
//! then `release end -`), on a sysfs laid out as a real one for the
//! real-host run's second card (bochs-drm at 01:00.0 with its HD audio at
//! 01:00.1). A stand-in `timeout` on PATH does what the kernel does with the
//! writes the hook makes (unbind drops the `driver` link, bind makes it,
//! through `driver_override`), so the whole hand-over is walked: the card
//! to vfio-pci and back, ten times; a holder whose unit may be stopped is
//! stopped and started again, one that may not fails the start with its
//! name and the card stays with the host; an unbind that hangs is cut at
//! the time limit and the card stays with the host.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use vfio_assistant::tuning::facts::TuneFacts;
use vfio_assistant::tuning::shared_gpu::{ALWAYS_STOPPED, shared_gpu_hook};

const GPU: &str = "0000:01:00.0";
const AUDIO: &str = "0000:01:00.1";

fn put(root: &Path, rel: &str, text: &str) {
    crate::support::hosts::put(root, rel, text);
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_default()
}

fn exe(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn driver(root: &Path, dev: &str) -> Option<String> {
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
/// `timeout SECONDS sh -c 'printf …' put FILE VALUE`; anything else runs the
/// real timeout. `.unbind-hangs` in the root makes an unbind block.
const TIMEOUT: &str = r#"#!/bin/sh
secs=$1; shift
if [ "$1 $2" = "sh -c" ] && [ "$4" = put ]; then
    file=$5; val=$6
    S="$VFIO_ASSISTANT_ROOT/sys/bus/pci"
    case "$file" in
    */unbind)
        if [ -e "$VFIO_ASSISTANT_ROOT/.unbind-hangs" ]; then exec /usr/bin/timeout "$secs" sleep 30; fi
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
exec /usr/bin/timeout "$secs" "$@"
"#;

/// A desktop with the second card on its drivers, a holder of its DRM node
/// run by `e2e-holder.service` (pid 4242), and a systemctl that stops it.
fn host(allowed: &[&str]) -> (tempfile::TempDir, PathBuf) {
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
    for n in ["card1", "renderD129"] {
        std::fs::create_dir_all(r.join(format!("sys/bus/pci/devices/{GPU}/drm/{n}"))).unwrap();
    }
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
        &format!(
            "#!/bin/sh\nR='{r}'\necho \"systemctl $*\" >> \"$R/systemctl.log\"\ncase \"$1 $2\" in\n\"is-active --quiet\") [ \"$3\" = e2e-holder.service ] && [ -d \"$R/proc/4242\" ] ;;\n\"stop e2e-holder.service\") rm -rf \"$R/proc/4242\" ;;\n\"start e2e-holder.service\") touch \"$R/holder-started\" ;;\nesac\n",
            r = r.display()
        ),
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
    let p = r.join("proc/4242");
    std::fs::create_dir_all(p.join("fd")).unwrap();
    std::fs::write(p.join("comm"), "e2e-holder\n").unwrap();
    std::fs::write(p.join("cgroup"), "0::/system.slice/e2e-holder.service\n").unwrap();
    std::os::unix::fs::symlink("/dev/dri/card1", p.join("fd/3")).unwrap();
}

fn run(root: &Path, script: &Path, op: &str, sub: &str) -> std::process::Output {
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("sh")
        .arg(script)
        .args(["win11", op, sub, "-"])
        .env("VFIO_ASSISTANT_ROOT", root)
        .env("VFIO_ASSISTANT_WAIT", "1")
        .env("PATH", path)
        .output()
        .unwrap()
}

fn log(r: &Path) -> String {
    read(r, "var/log/vfio-assistant-shared-gpu.log")
}

#[test]
fn a_holder_that_may_not_be_stopped_fails_the_start_by_name_and_the_card_stays() {
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
    assert!(!read(r, "systemctl.log").contains("stop e2e-holder"));
    assert!(!r.join("run/vfio-assistant-shared-gpu.state").exists());
}

/// Any local user names their own processes and scopes: a name with a
/// backslash (`\c` ends dash's `echo`), a newline or a space is logged as
/// one harmless word, and the holders after it are still named.
#[test]
fn a_hostile_process_name_cannot_hide_the_other_holders_from_the_log() {
    let (dir, script) = host(&[]);
    let r = dir.path();
    let p = r.join("proc/1111");
    std::fs::create_dir_all(p.join("fd")).unwrap();
    std::fs::write(p.join("comm"), "a\\cb x\nz\n").unwrap();
    std::fs::write(p.join("cgroup"), "0::/user.slice/run-x\\c2d.scope\n").unwrap();
    std::os::unix::fs::symlink("/dev/dri/card1", p.join("fd/5")).unwrap();
    let o = run(r, &script, "prepare", "begin");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let l = log(r);
    assert!(l.contains("1111:a_cb_xz(run-x_c2d.scope)"), "{l}");
    assert!(l.contains("4242:e2e-holder(e2e-holder.service)"), "{l}");
    assert_eq!(driver(r, GPU).as_deref(), Some("bochs-drm"));
}

#[test]
fn ten_cycles_lend_the_card_and_give_it_back_healthy() {
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
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    std::fs::write(r.join(".unbind-hangs"), "").unwrap();
    let started = std::time::Instant::now();
    let o = run(r, &script, "prepare", "begin");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(started.elapsed().as_secs() < 20, "bounded");
    let l = log(r);
    assert!(
        l.contains("did not let go within 1s") && l.contains("card stays with the host"),
        "{l}"
    );
    assert_eq!(
        read(r, &format!("sys/bus/pci/devices/{AUDIO}/driver_override")),
        ""
    );
    assert!(
        read(r, "systemctl.log").contains("start e2e-holder.service"),
        "its unit back"
    );
}

#[test]
fn a_card_that_does_not_come_back_is_said_unhealthy() {
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
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    std::fs::create_dir_all(r.join(format!("sys/bus/pci/devices/{AUDIO}/sound/card1"))).unwrap();
    let p = r.join("proc/777");
    std::fs::create_dir_all(p.join("fd")).unwrap();
    std::fs::write(p.join("comm"), "pipewire\n").unwrap();
    std::os::unix::fs::symlink("/dev/snd/controlC1", p.join("fd/9")).unwrap();
    let o = run(r, &script, "prepare", "begin");
    assert!(o.status.success(), "{o:?}\n{}", log(r));
    let l = log(r);
    assert!(
        l.contains("HDMI audio is open (pid:program): 777:pipewire"),
        "{l}"
    );
}
