//! Who holds the card, as both GPU hooks find it at a VM's start: by the
//! device — the device number of what every process has open or mapped —
//! never by a path (issue 41). A holder that mapped the card and closed
//! its fd counts; so does one that opened the card under another name in a
//! mount namespace of its own; a node that only has the card's name (a user
//! namespace's tmpfs `/dev` with a file `dri/card1`) does not.
//!
//! First on the hooks' test trees (single_gpu_hook.rs, shared_gpu_hook.rs),
//! then with real processes: the tree's `proc` is this machine's, the
//! card's device number that of `/dev/full` (1:7, which nothing here keeps
//! open), a root process in a mount namespace of its own holds it under
//! another name, and the second user `vfio-remote` fakes a holder from a
//! user namespace (`unshare -rm`, a tmpfs over `/dev`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::shared_gpu_hook::{driver, host, log};
use crate::single_gpu_hook::{desktop, read};
use crate::support::devnodes::{can_mknod, char_node, mapped, open_fd, process};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GPU: &str = "0000:01:00.0";

fn single(r: &Path, script: &Path) -> std::process::Output {
    crate::single_gpu_hook::run(r, script, "prepare", "begin", "win11")
}

fn shared(r: &Path, script: &Path) -> std::process::Output {
    crate::shared_gpu_hook::run(r, script, "prepare", "begin")
}

/// A CUDA job that mapped the card and closed its fd: missed when holders
/// were looked for in `/proc/*/fd` alone.
#[test]
fn a_holder_that_mapped_the_card_and_closed_its_fd_is_found() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = desktop();
    let r = dir.path();
    let card = char_node(r, "dev/dri/card0", 226, 0);
    let p = process(r, 5150, "cuda-job", "/system.slice/cuda-job.service");
    mapped(&p, "7f3a00000000-7f3a00100000", &card, 1021);
    let o = single(r, &script);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let l = read(r, "var/log/vfio-assistant-single-gpu.log");
    assert!(l.contains("5150:cuda-job"), "{l}");
    assert!(
        !read(r, "systemctl.log").contains("stop"),
        "the desktop left as it is"
    );

    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    let p = process(r, 5150, "cuda-job", "/system.slice/cuda-job.service");
    mapped(
        &p,
        "7f3a00000000-7f3a00100000",
        &r.join("dev/dri/renderD129"),
        1022,
    );
    let o = shared(r, &script);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        log(r).contains("5150:cuda-job(cuda-job.service)"),
        "{}",
        log(r)
    );
    assert_eq!(
        driver(r, GPU).as_deref(),
        Some("bochs-drm"),
        "the card stays"
    );
}

/// The card opened under another name (a container's own /dev, another
/// mount namespace): the same device, a holder all the same.
#[test]
fn the_card_under_another_name_is_the_card() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    let alias = char_node(r, "var/lib/containers/x/rootfs/dev/gpu0", 226, 1);
    let p = process(r, 6160, "inference", "/machine.slice/libpod-1234.scope");
    open_fd(&p, 4, &alias);
    let o = shared(r, &script);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        log(r).contains("6160:inference(libpod-1234.scope)"),
        "{}",
        log(r)
    );
    assert_eq!(driver(r, GPU).as_deref(), Some("bochs-drm"));
}

/// A user's fake: in a user namespace of their own, a tmpfs over /dev with
/// a file named like the card (only root can make a device node). Its fd
/// reads `/dev/dri/card1` — the card's name — and is nothing of the card's:
/// the start goes on. (It was refused: any user could stop every VM start.)
#[test]
fn a_fake_node_with_the_cards_name_holds_nothing() {
    if !can_mknod() {
        return;
    }
    let (dir, script) = host(&["e2e-holder.service"]);
    let r = dir.path();
    // What the kernel shows of the fake: the name inside its namespace
    // (here leading to no card at all), or a file of that name.
    let p = process(
        r,
        7170,
        "faker",
        "/user.slice/user-1001.slice/session-9.scope",
    );
    open_fd(&p, 3, "/dev/dri/card1");
    std::fs::create_dir_all(r.join("home/mallory/dev/dri")).unwrap();
    std::fs::write(r.join("home/mallory/dev/dri/card1"), "").unwrap();
    open_fd(&p, 4, r.join("home/mallory/dev/dri/card1"));
    let o = shared(r, &script);
    assert!(o.status.success(), "{o:?}\n{}", log(r));
    assert_eq!(driver(r, GPU).as_deref(), Some("vfio-pci"), "lent");
    assert!(!log(r).contains("faker"), "{}", log(r));
    assert!(
        crate::shared_gpu_hook::run(r, &script, "release", "end")
            .status
            .success()
    );

    let (dir, script) = desktop();
    let r = dir.path();
    let p = process(r, 7170, "faker", "/system.slice/faker.service");
    open_fd(&p, 3, "/dev/dri/card0");
    let o = single(r, &script);
    assert!(
        o.status.success(),
        "{o:?}\n{}",
        read(r, "var/log/vfio-assistant-single-gpu.log")
    );
}

/// A process that runs until killed, once `ready` (a file it writes when
/// its fd is open) is there.
fn spawn_until_ready(mut c: Command, ready: &Path) -> Option<Child> {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !ready.exists() {
        if t.elapsed() > Duration::from_secs(10) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            eprintln!("skipped: {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child)
}

fn stop(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// The shared-GPU hook's tree with this machine's processes: `proc` is
/// /proc, the card is 1:7 (`/dev/full`).
fn live_procs() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, script) = host(&[]);
    let r = dir.path();
    std::fs::remove_dir_all(r.join("proc")).unwrap();
    std::os::unix::fs::symlink("/proc", r.join("proc")).unwrap();
    let drm = r.join(format!("sys/bus/pci/devices/{GPU}/drm"));
    std::fs::write(drm.join("card1/dev"), "1:7\n").unwrap();
    std::fs::remove_dir_all(drm.join("renderD129")).unwrap();
    (dir, script)
}

/// Real processes: root in a mount namespace of its own holding the card
/// under another name is a holder; the second user's fake from a user
/// namespace (a tmpfs over /dev, a file `dri/card1`) is not.
#[test]
fn real_processes_in_other_namespaces_are_judged_by_the_device() {
    if !can_mknod() || !crate::support::devnodes::other_user() {
        return;
    }
    let (dir, script) = live_procs();
    let r = dir.path();
    let marks = crate::support::devnodes::open_dir();

    // The second user's fake holder: its fd reads /dev/dri/card1.
    let fake_ready = marks.path().join("fake-ready");
    let mut c = Command::new("runuser");
    c.args(["-u", "vfio-remote", "--", "unshare", "-rm", "sh", "-c"])
        .arg("mount -t tmpfs none /dev && mkdir /dev/dri && : > /dev/dri/card1 && exec 3</dev/dri/card1 && : > \"$0\" && exec sleep 60")
        .arg(&fake_ready);
    let fake = spawn_until_ready(c, &fake_ready);
    if let Some(fake) = fake {
        let o = shared(r, &script);
        let l = log(r);
        stop(fake);
        assert!(o.status.success(), "{o:?}\n{l}");
        assert!(!l.contains("still holding"), "{l}");
        assert!(
            crate::shared_gpu_hook::run(r, &script, "release", "end")
                .status
                .success()
        );
    }

    // Root, in a mount namespace of its own, the card under another name.
    let real_ready = marks.path().join("real-ready");
    let mut c = Command::new("unshare");
    c.args(["-m", "sh", "-c"])
        .arg("d=$(mktemp -d) && mount -t tmpfs none \"$d\" && mknod \"$d/gpu\" c 1 7 && exec 3<\"$d/gpu\" && : > \"$0\" && exec sleep 60")
        .arg(&real_ready);
    let Some(real) = spawn_until_ready(c, &real_ready) else {
        return;
    };
    let o = shared(r, &script);
    let l = log(r);
    stop(real);
    assert_eq!(o.status.code(), Some(1), "{o:?}\n{l}");
    assert!(
        l.contains(":sleep(") && l.contains("still holding the GPU"),
        "{l}"
    );
    assert_eq!(driver(r, GPU).as_deref(), Some("bochs-drm"));
}
