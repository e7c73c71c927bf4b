//! A snapshot is the user's alone and carries no secrets (issue 30): the
//! snapshot file is created 0600, the folders it is fetched or unpacked
//! into 0700 and everything unpacked 0700/0600 — checked by mode and by
//! reading them as another user (`vfio-remote`, made by `scripts/setup.sh
//! test`; needs root, skipped elsewhere, CI runs as root) — whatever the
//! umask; a real qemu.conf with its passwords set gives none of them away;
//! and honest snapshots (every fixture, the demo, this machine) still
//! unpack under the link rules.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{copy_tree, good_host, put};
use crate::support::sshd::{script, sshd};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vfio_assistant::sysroot::{HostRoot, open_root};

const OTHER: &str = "vfio-remote";

fn ours() -> &'static str {
    env!("CARGO_BIN_EXE_vfio-assistant")
}

fn manifest(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Our program with the umask at 000: nothing it makes may rely on it.
fn run_umask_0(args: &[&str]) -> Output {
    Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" \"$@\"", ours()])
        .args(args)
        .output()
        .unwrap()
}

/// Whether another user can be tried: root, and the user there.
fn other_user() -> bool {
    let root = rustix::process::geteuid().is_root();
    let there = Command::new("id")
        .arg(OTHER)
        .output()
        .is_ok_and(|o| o.status.success());
    if root && there {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs as root with the user {OTHER} (scripts/setup.sh test)"
    );
    eprintln!("skipped: reading as another user needs root and the user {OTHER}");
    false
}

/// `cmd path` run as the other user.
fn as_other(cmd: &str, path: &Path) -> Output {
    Command::new("runuser")
        .args(["-u", OTHER, "--", cmd])
        .arg(path)
        .output()
        .unwrap()
}

/// The other user is refused `path` (`cat` a file, `ls` a folder).
fn denied(path: &Path) {
    let cmd = if path.is_dir() { "ls" } else { "cat" };
    let out = as_other(cmd, path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Permission denied"),
        "{OTHER} could {cmd} {}: {err}",
        path.display()
    );
}

/// A folder the other user may pass through (as /tmp is), with a file in
/// it they can read: the refusals below come from the modes we set.
fn open_place() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let control = dir.path().join("control");
    std::fs::write(&control, "anyone's").unwrap();
    std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o644)).unwrap();
    dir
}

fn readable_by_other(place: &Path) -> bool {
    let control = as_other("cat", &place.join("control"));
    assert!(
        control.status.success(),
        "the control file: {}",
        String::from_utf8_lossy(&control.stderr)
    );
    true
}

/// Every folder below `top` 0700 and every file 0600 (0700 if executable).
fn all_private(top: &Path) -> usize {
    let mut seen = 0;
    for e in std::fs::read_dir(top).unwrap() {
        let p = e.unwrap().path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            assert_eq!(mode(&p), 0o700, "{}", p.display());
            seen += all_private(&p);
        } else if m.is_file() {
            assert!(
                matches!(mode(&p), 0o600 | 0o700),
                "{}: {:o}",
                p.display(),
                mode(&p)
            );
        }
        seen += 1;
    }
    seen
}

#[test]
fn a_snapshot_file_is_the_users_alone_whatever_the_umask() {
    let place = open_place();
    let root = manifest("tests/fixtures/hosts/e2e-debian12-grub");
    let out = place.path().join("host.tar.gz");
    let taken = run_umask_0(&[
        "--root",
        root.to_str().unwrap(),
        "snapshot",
        out.to_str().unwrap(),
    ]);
    assert!(
        taken.status.success(),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
    assert_eq!(mode(&out), 0o600);
    // Replacing a file anyone could read: the snapshot is still 0600.
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    let again = run_umask_0(&[
        "--root",
        root.to_str().unwrap(),
        "snapshot",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert!(again.status.success());
    assert_eq!(mode(&out), 0o600);
    if other_user() && readable_by_other(place.path()) {
        denied(&out);
    }
}

#[test]
fn an_unpacked_snapshot_is_the_users_alone() {
    let host = good_host();
    let hook = host.path().join("etc/libvirt/hooks/qemu");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("host.tar.gz");
    vfio_assistant::capture::capture(&HostRoot::at(host.path()), &archive, false).unwrap();

    // As `--root FILE` opens it: a private folder, private all through, the
    // hook still executable to the checks.
    let opened = open_root(&archive).unwrap();
    let base = opened.root().base().to_path_buf();
    assert_eq!(mode(&base), 0o700);
    assert!(all_private(&base) > 20);
    assert_eq!(mode(&base.join("etc/libvirt/hooks/qemu")), 0o700);
    let hooks = vfio_assistant::host::scan(opened.root())
        .unwrap()
        .system
        .libvirt_hooks;
    assert!(hooks.iter().all(|h| h.executable), "{hooks:?}");
    // The bundled demo too.
    let (demo, _guard) = vfio_assistant::demo::unpack_demo().unwrap();
    assert_eq!(mode(demo.base()), 0o700);
    all_private(demo.base());

    // Unpacked into a folder anyone may pass through: still nobody else's.
    if !other_user() {
        return;
    }
    let place = open_place();
    assert!(readable_by_other(place.path()));
    let dest = place.path().join("dest");
    std::fs::create_dir(&dest).unwrap();
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bytes = std::fs::read(&archive).unwrap();
    vfio_assistant::capture::extract(&bytes, &dest).unwrap();
    for p in ["SNAPSHOT.txt", "etc", "proc", "sys"] {
        denied(&dest.join(p));
    }
    denied(&base); // and the folder --root made
}

/// `--host ssh://…` fetches the other machine's snapshot into a folder of
/// its own: 0700, seen from the ssh it runs while the folder is there.
#[test]
fn the_fetch_folder_is_the_users_alone() {
    let s = sshd();
    let tmp = tempfile::tempdir().unwrap();
    let log = s.dir.path().join("modes.log");
    let wrapper = s.dir.path().join("ssh-recording");
    let ssh = s.ssh("client", &s.known_hosts());
    script(
        &wrapper,
        &format!(
            "#!/bin/sh\nfor d in \"$TMPDIR\"/* \"$TMPDIR\"/.tmp*; do [ -d \"$d\" ] && stat -c %a \"$d\" >> {log}; done\nexec {ssh} \"$@\"\n",
            log = log.display()
        ),
    );
    let target = s.target(Some(&manifest("tests/fixtures/hosts/e2e-debian12-grub")));
    let out = Command::new(ours())
        .args(["scan", "--json", "--host", &target])
        .env("TMPDIR", tmp.path())
        .env("VFIO_ASSISTANT_SSH", &wrapper)
        .env("VFIO_ASSISTANT_REMOTE_PROGRAM", ours())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let modes = std::fs::read_to_string(&log).unwrap();
    assert!(
        !modes.is_empty() && modes.lines().all(|m| m == "700"),
        "{modes}"
    );
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "nothing left behind"
    );
}

/// Debian 12's own qemu.conf (tests/fixtures/libvirt-conf/SOURCE.txt) with
/// its passwords set, a hook holding one and a private key beside it.
#[test]
fn a_snapshot_holds_no_secret() {
    let root = tempfile::tempdir().unwrap();
    copy_tree(
        &manifest("tests/fixtures/hosts/e2e-debian12-grub"),
        root.path(),
    );
    let default =
        std::fs::read_to_string(manifest("tests/fixtures/libvirt-conf/debian12-qemu.conf"))
            .unwrap();
    let secrets = [
        (
            "#vnc_password = \"XYZ12345\"",
            "vnc_password = \"Vnc-Secret-1\"",
        ),
        (
            "#spice_password = \"XYZ12345\"",
            "spice_password = \"Spice-Secret-2\"",
        ),
        (
            "#vnc_tls_x509_secret_uuid = \"00000000-0000-0000-0000-000000000000\"",
            "vnc_tls_x509_secret_uuid = \"Uuid-Secret-3\"",
        ),
    ];
    let mut conf = default.clone();
    for (from, to) in secrets {
        assert!(conf.contains(from), "{from}");
        conf = conf.replace(from, to);
    }
    conf.push_str("user = \"gamer\"\nvnc_tls_x509_cert_dir = \"/etc/pki/libvirt-vnc\"\n");
    put(root.path(), "etc/libvirt/qemu.conf", &conf);
    put(
        root.path(),
        "etc/libvirt/hooks/qemu",
        "#!/bin/sh\nexport RDP_PASSWORD='Hook-Secret-4'\n",
    );
    std::fs::set_permissions(
        root.path().join("etc/libvirt/hooks/qemu"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    put(
        root.path(),
        "etc/libvirt/hooks/server-key.pem",
        "-----BEGIN PRIVATE KEY-----\nKey-Secret-5\n-----END PRIVATE KEY-----\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("host.tar.gz");
    let out = Command::new(ours())
        .args(["--root", root.path().to_str().unwrap(), "snapshot"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("1 private key(s) left out"), "{said}");

    let entries = entries_of(&archive);
    for (name, data) in &entries {
        for secret in ["Secret-1", "Secret-2", "Secret-3", "Secret-4", "Secret-5"] {
            assert!(!data.contains(secret), "{name} holds {secret}");
        }
    }
    let text = |name: &str| &entries.iter().find(|(n, _)| n == name).unwrap().1;
    // The names stay, the values go; every other line is as it was.
    let kept = text("etc/libvirt/qemu.conf");
    for line in [
        "vnc_password = \"(masked)\"",
        "spice_password = \"(masked)\"",
        "vnc_tls_x509_secret_uuid = \"(masked)\"",
        "user = \"gamer\"",
        "vnc_tls_x509_cert_dir = \"/etc/pki/libvirt-vnc\"",
    ] {
        assert!(kept.lines().any(|l| l == line), "{line}");
    }
    let changed: Vec<(&str, &str)> = conf
        .lines()
        .zip(kept.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(conf.lines().count(), kept.lines().count());
    assert!(
        changed
            .iter()
            .all(|(a, _)| a.contains("password") || a.contains("secret_uuid")),
        "{changed:#?}"
    );
    assert!(text("etc/libvirt/hooks/qemu").contains("RDP_PASSWORD='(masked)'"));
    assert_eq!(text("etc/libvirt/hooks/server-key.pem"), "");
    // SNAPSHOT.txt names what was masked, never the value.
    let readme = text("SNAPSHOT.txt");
    assert!(
        readme.contains(
            "  etc/libvirt/qemu.conf: vnc_tls_x509_secret_uuid, vnc_password, spice_password"
        ),
        "{readme}"
    );
    assert!(
        readme.contains("  etc/libvirt/hooks/qemu: RDP_PASSWORD"),
        "{readme}"
    );
    assert!(
        readme.contains(
            "Private keys left out (empty placeholders):\n  etc/libvirt/hooks/server-key.pem"
        ),
        "{readme}"
    );
    // And the snapshot still reads as the host: the hook runs.
    let v: serde_json::Value = serde_json::from_slice(
        &Command::new(ours())
            .args(["scan", "--json", "--root"])
            .arg(&archive)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        v["system"]["libvirt_hooks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["executable"] == true),
        "{v}"
    );
}

/// Credentials wherever they stand (issue 41): an iSCSI target's and a
/// CIFS URL's `user:password@`, `cifspass=`, `rd.iscsi.password=` on the
/// kernel command line and in GRUB's settings, in the shapes dracut's manual
/// documents; every other word stays, and SNAPSHOT.txt names what went.
#[test]
fn credentials_on_the_command_line_are_masked() {
    let root = tempfile::tempdir().unwrap();
    copy_tree(
        &manifest("tests/fixtures/hosts/e2e-debian12-grub"),
        root.path(),
    );
    let cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-50-amd64 root=UUID=00000000-0000-0000-0000-000000000000 ro netroot=iscsi:admin:Iscsi-Secret-1@192.168.50.1::3260::iqn.2009-06.dracut:target0 rd.iscsi.password=Iscsi-Secret-2 cifsuser=bob cifspass=Cifs-Secret-3 iommu.passthrough=1 console=ttyS0,115200 quiet\n";
    put(root.path(), "proc/cmdline", cmdline);
    let grub = std::fs::read_to_string(root.path().join("etc/default/grub")).unwrap();
    let grub = format!(
        "{grub}GRUB_CMDLINE_LINUX=\"root=cifs://bob:Cifs-Secret-4@10.0.0.1/srv rootflags=username=bob,password=Cifs-Secret-5,vers=3.0\"\n"
    );
    put(root.path(), "etc/default/grub", &grub);
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("host.tar.gz");
    let out = Command::new(ours())
        .args(["--root", root.path().to_str().unwrap(), "snapshot"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = entries_of(&archive);
    for (name, data) in &entries {
        assert!(!data.contains("Secret-"), "{name} holds a secret: {data}");
    }
    let text = |name: &str| &entries.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(
        text("proc/cmdline"),
        "BOOT_IMAGE=/boot/vmlinuz-6.1.0-50-amd64 root=UUID=00000000-0000-0000-0000-000000000000 ro netroot=iscsi:(masked)@192.168.50.1::3260::iqn.2009-06.dracut:target0 rd.iscsi.password=(masked) cifsuser=bob cifspass=(masked) iommu.passthrough=1 console=ttyS0,115200 quiet\n"
    );
    assert!(
        text("etc/default/grub").contains(
            "GRUB_CMDLINE_LINUX=\"root=cifs://bob:(masked)@10.0.0.1/srv rootflags=username=bob,password=(masked),vers=3.0\""
        ),
        "{}",
        text("etc/default/grub")
    );
    let readme = text("SNAPSHOT.txt");
    assert!(
        readme.contains("  proc/cmdline: user:password@ (a URL's or an iSCSI target's), rd.iscsi.password, cifspass"),
        "{readme}"
    );
    assert!(
        readme.contains(
            "  etc/default/grub: user:password@ (a URL's or an iSCSI target's), password"
        ),
        "{readme}"
    );
}

/// Every entry of a snapshot archive: name and text.
fn entries_of(archive: &Path) -> Vec<(String, String)> {
    let file = std::fs::File::open(archive).unwrap();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    tar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().display().to_string();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (name, String::from_utf8_lossy(&data).into_owned())
        })
        .collect()
}

/// Honest snapshots still unpack under the link rules: every fixture tree,
/// this machine's own (sysfs's links as they are) and the bundled demo.
#[test]
fn honest_snapshots_still_unpack() {
    let mut roots: Vec<PathBuf> = std::fs::read_dir(manifest("tests/fixtures/topology"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    roots.push(manifest("tests/fixtures/pci-sysfs/prometheus-procfs"));
    roots.push(manifest("tests/fixtures/hosts/e2e-debian12-grub"));
    roots.sort();
    let dir = tempfile::tempdir().unwrap();
    let mut links = 0;
    for (n, root) in roots
        .iter()
        .map(HostRoot::at)
        .chain([HostRoot::live()])
        .enumerate()
    {
        let archive = dir.path().join(format!("{n}.tar.gz"));
        vfio_assistant::capture::capture(&root, &archive, false).unwrap();
        let dest = dir.path().join(format!("{n}"));
        std::fs::create_dir(&dest).unwrap();
        let file = std::fs::File::open(&archive).unwrap();
        let report = vfio_assistant::unpack::unpack_tar_gz(
            file,
            &archive.display().to_string(),
            &dest,
            &vfio_assistant::unpack::Limits::SNAPSHOT,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", root.base().display()));
        links += report.symlinks;
    }
    assert!(links > 100, "sysfs's links were there: {links}");
    vfio_assistant::demo::unpack_demo().unwrap();
}
