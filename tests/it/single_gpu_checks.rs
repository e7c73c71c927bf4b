//! The checks before single-GPU passthrough (report::single_gpu) on a real
//! machine's PCI tree (Gigabyte B550 with an RX 6950 XT, published listing)
//! laid out with what each check reads, as the kernel shows it: the card's
//! /dev/dri nodes under its sysfs `drm/`, the processes' open files as
//! /proc/PID/fd links, their cgroup, /proc/net/tcp, the boot framebuffer's
//! platform device and its BOOTFB line in /proc/iomem, modules.builtin.
//! A system service holding the card is named with its unit; the desktop's
//! processes are not a problem; the framebuffer without
//! initcall_blacklist=sysfb_init is; SSH is looked for. The plan for
//! --single-gpu puts initcall_blacklist=sysfb_init on the command line.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{base_host, put};
use std::os::unix::fs::symlink;
use std::path::Path;
use vfio_assistant::finding::{Finding, Status};
use vfio_assistant::host::scan;
use vfio_assistant::report::single_gpu::{for_gpus, single_gpu_findings};
use vfio_assistant::sysroot::HostRoot;

const GPU: &str = "0000:08:00.0";

fn process(r: &Path, pid: u32, comm: &str, cgroup: &str, node: &str) {
    put(r, &format!("proc/{pid}/comm"), &format!("{comm}\n"));
    put(r, &format!("proc/{pid}/cgroup"), &format!("0::{cgroup}\n"));
    std::fs::create_dir_all(r.join(format!("proc/{pid}/fd"))).unwrap();
    symlink("/dev/null", r.join(format!("proc/{pid}/fd/0"))).unwrap();
    symlink(node, r.join(format!("proc/{pid}/fd/7"))).unwrap();
}

const TCP_HEAD: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";

/// The desktop on the 6950 XT (boot_vga), gnome-shell and a system
/// service (ollama) with its nodes open, simpledrm left on the boot
/// framebuffer, vfio-pci built in, sshd listening.
fn desktop() -> tempfile::TempDir {
    let dir = base_host("gigabyte-b550-aorus-pro-ryzen9-3900x.txt");
    let r = dir.path();
    let dev = format!("sys/devices/pci0000:00/{GPU}");
    put(r, &format!("{dev}/boot_vga"), "1\n");
    for n in ["card1", "renderD128"] {
        std::fs::create_dir_all(r.join(format!("{dev}/drm/{n}"))).unwrap();
    }
    process(
        r,
        1811,
        "gnome-shell",
        "/user.slice/user-1000.slice/session-2.scope",
        "/dev/dri/card1",
    );
    process(
        r,
        944,
        "ollama",
        "/system.slice/ollama.service",
        "/dev/dri/renderD128",
    );
    process(r, 1, "systemd", "/init.scope", "/dev/null");
    // gdm3's postinst makes this link: the display manager the hook stops.
    std::fs::create_dir_all(r.join("etc/systemd/system")).unwrap();
    symlink(
        "/lib/systemd/system/gdm.service",
        r.join("etc/systemd/system/display-manager.service"),
    )
    .unwrap();
    put(
        r,
        "proc/net/tcp",
        &format!(
            "{TCP_HEAD}   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 20311 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21121 1 0000000000000000 100 0 0 10 0\n"
        ),
    );
    std::fs::create_dir_all(r.join("sys/bus/platform/drivers/simple-framebuffer")).unwrap();
    std::fs::create_dir_all(r.join("sys/devices/platform/simple-framebuffer.0")).unwrap();
    symlink(
        "../../../bus/platform/drivers/simple-framebuffer",
        r.join("sys/devices/platform/simple-framebuffer.0/driver"),
    )
    .unwrap();
    std::fs::create_dir_all(r.join("sys/bus/platform/devices")).unwrap();
    symlink(
        "../../../devices/platform/simple-framebuffer.0",
        r.join("sys/bus/platform/devices/simple-framebuffer.0"),
    )
    .unwrap();
    put(
        r,
        "proc/iomem",
        "00000000-00000fff : Reserved\nd0000000-dfffffff : PCI Bus 0000:08\n  d0000000-d02fffff : BOOTFB\n",
    );
    put(r, "proc/sys/kernel/osrelease", "6.1.0-13-amd64\n");
    put(
        r,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz-6.1.0-13-amd64 root=/dev/nvme0n1p2 ro quiet iommu=pt\n",
    );
    put(
        r,
        "usr/lib/modules/6.1.0-13-amd64/modules.builtin",
        "kernel/drivers/vfio/vfio.ko\nkernel/drivers/vfio/pci/vfio-pci.ko\n",
    );
    dir
}

fn by_id<'a>(f: &'a [Finding], id: &str) -> &'a Finding {
    f.iter()
        .find(|x| x.id == id)
        .unwrap_or_else(|| panic!("{id} missing: {f:#?}"))
}

fn evidence(f: &Finding) -> String {
    f.evidence
        .iter()
        .map(|e| format!("{} = {}", e.source, e.value))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_service_holding_the_card_the_boot_framebuffer_and_ssh_are_found() {
    let dir = desktop();
    let root = HostRoot::at(dir.path());
    let snap = scan(&root).unwrap();
    let f = single_gpu_findings(&root, &snap, GPU);
    let display = by_id(&f, "single_gpu.display");
    assert_eq!(display.status, Status::Info, "{display:#?}");
    let holders = by_id(&f, "single_gpu.holders");
    assert_eq!(holders.status, Status::Warn, "{holders:#?}");
    assert!(holders.title.contains("ollama"), "{}", holders.title);
    assert!(!holders.title.contains("gnome-shell"), "{}", holders.title);
    let ev = evidence(holders);
    assert!(ev.contains("/dev/dri/card1 /dev/dri/renderD128"), "{ev}");
    assert!(
        ev.contains("ollama (pid 944, ollama.service) has /dev/dri/renderD128"),
        "{ev}"
    );
    assert!(
        ev.contains("with the desktop = gnome-shell (pid 1811, session-2.scope)"),
        "{ev}"
    );
    assert!(holders.fix_text().unwrap().contains("ollama.service"));
    let sysfb = by_id(&f, "single_gpu.sysfb");
    assert_eq!(sysfb.status, Status::Warn, "{sysfb:#?}");
    let ev = evidence(sysfb);
    assert!(
        ev.contains("simple-framebuffer.0 = bound to simple-framebuffer"),
        "{ev}"
    );
    assert!(ev.contains("BOOTFB"), "{ev}");
    assert!(
        sysfb
            .fix_text()
            .unwrap()
            .contains("initcall_blacklist=sysfb_init")
    );
    assert_eq!(by_id(&f, "single_gpu.vfio").status, Status::Info);
    assert_eq!(by_id(&f, "single_gpu.ssh").status, Status::Pass);
    // Without a GPU named: the one the host shows its screen on.
    assert_eq!(for_gpus(&root, &snap, None), f);
}

#[test]
fn only_the_desktop_no_framebuffer_and_no_ssh() {
    let dir = desktop();
    let r = dir.path();
    std::fs::remove_dir_all(r.join("proc/944")).unwrap();
    put(
        r,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz-6.1.0-13-amd64 root=/dev/nvme0n1p2 ro quiet iommu=pt initcall_blacklist=sysfb_init\n",
    );
    put(
        r,
        "proc/net/tcp",
        &format!(
            "{TCP_HEAD}   1: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21121 1 0000000000000000 100 0 0 10 0\n"
        ),
    );
    put(
        r,
        "usr/lib/modules/6.1.0-13-amd64/modules.builtin",
        "kernel/drivers/vfio/vfio.ko\n",
    );
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let f = single_gpu_findings(&root, &snap, GPU);
    assert_eq!(by_id(&f, "single_gpu.holders").status, Status::Pass);
    assert_eq!(by_id(&f, "single_gpu.sysfb").status, Status::Pass);
    assert_eq!(by_id(&f, "single_gpu.vfio").status, Status::Pass);
    let ssh = by_id(&f, "single_gpu.ssh");
    assert_eq!(ssh.status, Status::Warn);
    assert!(evidence(ssh).contains("listening: 631"), "{ssh:#?}");
    // The other GPU: not the host's screen, no hook needed.
    let other = single_gpu_findings(&root, &snap, "0000:04:00.0");
    let d = by_id(&other, "single_gpu.display");
    assert_eq!(d.status, Status::Warn, "{d:#?}");
    assert!(d.title.contains("0000:08:00.0"), "{}", d.title);
}

#[test]
fn unreadable_processes_make_the_holders_unknown_not_fine() {
    let dir = desktop();
    let r = dir.path();
    std::fs::remove_dir_all(r.join("proc/944")).unwrap();
    std::fs::remove_dir_all(r.join("proc/1811")).unwrap();
    // Another user's process: its fd folder cannot be listed (a file
    // stands where the folder is, as permission denied would).
    put(r, "proc/2001/comm", "Xwayland\n");
    put(r, "proc/2001/fd", "");
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let f = single_gpu_findings(&root, &snap, GPU);
    let h = by_id(&f, "single_gpu.holders");
    assert_eq!(h.status, Status::Unknown, "{h:#?}");
}

#[test]
fn the_single_gpu_plan_keeps_the_boot_framebuffer_off_the_card() {
    use vfio_assistant::tuning::facts::gather;
    use vfio_assistant::tuning::model::Request;
    use vfio_assistant::tuning::plan::plan;
    let dir = crate::support::tuning::tuning_host();
    let root = HostRoot::at(dir.path());
    let snap = scan(&root).unwrap();
    let req = Request {
        single_gpu: true,
        vm: Some("win11".into()),
        ..Request::default()
    };
    let p = plan(&snap, &gather(&root), &req).unwrap();
    assert!(
        p.changes.iter().any(|c| c.id == "single-gpu-hook"),
        "{p:#?}"
    );
    let all = serde_json::to_string(&p).unwrap();
    assert!(all.contains("initcall_blacklist=sysfb_init"), "{all}");
}

#[test]
fn a_desktop_started_without_a_display_manager_is_not_fine() {
    let dir = desktop();
    let r = dir.path();
    std::fs::remove_dir_all(r.join("proc/944")).unwrap();
    // sway from a TTY: a session, and no display manager to stop it.
    std::fs::remove_file(r.join("etc/systemd/system/display-manager.service")).unwrap();
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let f = single_gpu_findings(&root, &snap, GPU);
    let h = by_id(&f, "single_gpu.holders");
    assert_eq!(h.status, Status::Warn, "{h:?}");
    assert!(h.title.contains("gnome-shell"), "{}", h.title);
    assert!(h.why.contains("No display manager"), "{h:?}");
}
