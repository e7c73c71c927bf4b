//! Host tuning as one transaction (`vfio-assistant tune`), tested as users
//! would meet it:
//! * the runtime knobs for real on this machine (THP, KSM, 2 MiB hugepages:
//!   the kernel here has them): apply, read the kernel's values back, plan
//!   again (nothing to do), undo, values back — and the originals restored
//!   by a guard even when an assertion fails. Never this machine's /etc or
//!   /boot: `--only` keeps to the runtime knobs and the journal is a temp dir;
//! * on temporary roots: every step of a transaction made to fail in turn
//!   leaves the tree byte-identical; applying twice is applying once; undo
//!   gives back the original tree; a file changed since the plan, a symlink
//!   planted where a file goes, and a read-only target are refused before
//!   anything changes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::tuning::{differ, kernel_gives_hugepages, tree, tuning_host};
use std::path::Path;
use std::process::Command;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::apply::{Env, apply, undo};
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::journal::EntryState;
use vfio_assistant::tuning::model::Request;
use vfio_assistant::tuning::plan::plan;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Puts THP, KSM and the 2 MiB pool back as they were, whatever happens.
struct Restore(Vec<(&'static str, String)>);
impl Drop for Restore {
    fn drop(&mut self) {
        for (p, v) in &self.0 {
            let v = v
                .split_whitespace()
                .find(|w| w.starts_with('['))
                .map_or(v.as_str(), |w| w.trim_matches(|c| c == '[' || c == ']'));
            let _ = std::fs::write(p, v);
        }
    }
}

const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
const KSM: &str = "/sys/kernel/mm/ksm/run";
const HP: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

#[test]
fn runtime_knobs_for_real_apply_read_back_and_undo() {
    let root_user = std::fs::metadata("/proc/self").map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    let writable = [THP, KSM, HP]
        .iter()
        .all(|p| std::fs::OpenOptions::new().write(true).open(p).is_ok());
    if !(root_user.unwrap_or(false) && writable) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with THP, KSM and hugepages writable"
        );
        eprintln!("skipped: needs root and writable THP/KSM/hugepages");
        return;
    }
    let _restore = Restore(vec![(THP, read(THP)), (KSM, read(KSM)), (HP, read(HP))]);
    // Something to do: THP 'always', KSM running, no 2 MiB pages.
    std::fs::write(THP, "always").unwrap();
    std::fs::write(KSM, "1").unwrap();
    std::fs::write(HP, "0").unwrap();
    let journal = tempfile::tempdir().unwrap();
    let j = journal.path().to_str().unwrap();
    let args = [
        "tune",
        "apply",
        "--only",
        "thp,ksm,hugepages",
        "--memory",
        "64M",
        "--yes",
        "--journal",
        j,
    ];
    let out = bin().args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(read(THP).contains("[madvise]"), "{}", read(THP));
    assert_eq!(read(KSM), "0");
    let pages: u64 = read(HP).parse().unwrap();
    assert!(pages >= 32, "the kernel gave {pages} pages: {text}");
    assert!(text.contains("verified thp"), "{text}");
    // Applied: the same request plans nothing for these knobs.
    let again = bin()
        .args(["tune", "plan", "--memory", "64M", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let ids: Vec<&str> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    for id in ["thp", "ksm", "hugepages"] {
        assert!(!ids.contains(&id), "{id} planned again: {ids:?}");
    }
    // Status, then undo: the values come back.
    let st = bin()
        .args(["tune", "status", "--json", "--journal", j])
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(s[0]["standing"], "applied", "{s}");
    let u = bin()
        .args(["tune", "undo", "--last", "--yes", "--journal", j])
        .output()
        .unwrap();
    assert_eq!(
        u.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&u.stdout)
    );
    assert!(read(THP).contains("[always]"), "{}", read(THP));
    assert_eq!(read(KSM), "1");
    assert_eq!(read(HP), "0");
    // The machine's /etc was not touched.
    assert!(!Path::new("/etc/tmpfiles.d/vfio-assistant.conf").exists());
}

fn request() -> Request {
    Request {
        gpus: vec!["0b:00.0".parse().unwrap()],
        vcpus: Some(4),
        memory_mib: Some(1024),
        ..Request::default()
    }
}

fn env(dir: &Path, fail_at: Option<usize>) -> Env {
    let mut e = Env::new(HostRoot::at(dir), None, false);
    e.fail_at = fail_at;
    e
}

fn steps(p: &vfio_assistant::tuning::Plan) -> usize {
    p.changes
        .iter()
        .map(|c| c.files.len() + c.values.len() + c.commands.len())
        .sum()
}

#[test]
fn a_failure_at_any_step_leaves_the_tree_as_it_was() {
    let dir = tuning_host();
    let root = HostRoot::at(dir.path());
    let snap = scan(&root).unwrap();
    let facts = gather(&root);
    let p = plan(&snap, &facts, &request()).unwrap();
    let ids: Vec<String> = p.changes.iter().map(|c| c.id.to_string()).collect();
    for id in [
        "cmdline",
        "vfio-boot",
        "thp",
        "ksm",
        "hugepages",
        "governor",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} in {ids:?}");
    }
    let before = tree(dir.path());
    let n = steps(&p);
    assert!(n > 10, "{n} steps");
    for at in 0..n {
        let e = env(dir.path(), Some(at));
        let o = apply(&e, &facts, &p, &request(), &mut |_| {}).unwrap();
        assert_eq!(o.state, EntryState::RolledBack, "step {at}");
        assert!(
            o.failure
                .as_deref()
                .unwrap_or("")
                .contains("injected failure"),
            "{o:?}"
        );
        assert_eq!(
            differ(&before, &tree(dir.path())),
            Vec::<String>::new(),
            "step {at}: not as before after the rollback"
        );
    }
}

#[test]
fn apply_twice_is_apply_once_and_undo_gives_the_original() {
    let dir = tuning_host();
    let root = HostRoot::at(dir.path());
    let original = tree(dir.path());
    let snap = scan(&root).unwrap();
    let facts = gather(&root);
    let p = plan(&snap, &facts, &request()).unwrap();
    let e = env(dir.path(), None);
    let mut lines = Vec::new();
    let o = apply(&e, &facts, &p, &request(), &mut |l| lines.push(l)).unwrap();
    assert_eq!(o.state, EntryState::Applied, "{o:?} {lines:?}");
    assert!(o.needs_reboot);
    kernel_gives_hugepages(dir.path());
    let once = tree(dir.path());
    assert_ne!(once, original);
    // Plan again on the changed host: nothing left to do.
    let facts2 = gather(&root);
    let snap2 = scan(&root).unwrap();
    let p2 = plan(&snap2, &facts2, &request()).unwrap();
    assert!(
        p2.changes.is_empty(),
        "planned again: {:#?}",
        p2.changes
            .iter()
            .map(|c| (&c.id, &c.title))
            .collect::<Vec<_>>()
    );
    // Undo: byte for byte the tree it started from.
    let u = undo(&e, &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.state, EntryState::Undone, "{u:?}");
    assert_eq!(u.failure, None);
    kernel_gives_hugepages(dir.path());
    assert_eq!(
        differ(&original, &tree(dir.path())),
        Vec::<String>::new(),
        "undo gives the original back"
    );
}

/// Undo refuses to put old files over someone's edit, but not over our
/// own write that a power cut lost: a file back as it was before the
/// transaction, or left empty by a cut (the host booted since).
#[test]
fn undo_tells_a_lost_write_of_ours_from_someones_edit() {
    let grub_d = "etc/default/grub.d/99-vfio-assistant.cfg";
    let setup = || {
        let dir = tuning_host();
        crate::support::hosts::put(dir.path(), "proc/sys/kernel/random/boot_id", "before\n");
        let root = HostRoot::at(dir.path());
        let (snap, facts) = (scan(&root).unwrap(), gather(&root));
        let p = plan(&snap, &facts, &request()).unwrap();
        let e = env(dir.path(), None);
        let o = apply(&e, &facts, &p, &request(), &mut |_| {}).unwrap();
        assert_eq!(o.state, EntryState::Applied);
        assert!(dir.path().join(grub_d).is_file());
        (dir, o.id)
    };
    let boot = |dir: &Path| {
        std::fs::write(
            dir.join("proc/sys/kernel/random/boot_id"),
            "after-the-cut\n",
        )
        .unwrap();
    };
    // The drop-in we created never reached the disk: gone after the cut.
    let (dir, id) = setup();
    std::fs::remove_file(dir.path().join(grub_d)).unwrap();
    boot(dir.path());
    let u = undo(&env(dir.path(), None), &id, false, &mut |_| {}).unwrap();
    assert_eq!(u.state, EntryState::Undone, "{u:?}");
    // Left empty by a cut: the host booted since.
    let (dir, id) = setup();
    std::fs::write(dir.path().join(grub_d), "").unwrap();
    boot(dir.path());
    let u = undo(&env(dir.path(), None), &id, false, &mut |_| {}).unwrap();
    assert_eq!(u.state, EntryState::Undone, "{u:?}");
    // Emptied without a boot since: someone did it; and an edit: refused.
    for (text, reboot) in [("", false), ("GRUB_TIMEOUT=3\n", true)] {
        let (dir, id) = setup();
        std::fs::write(dir.path().join(grub_d), text).unwrap();
        if reboot {
            boot(dir.path());
        }
        let err = undo(&env(dir.path(), None), &id, false, &mut |_| {}).unwrap_err();
        assert!(
            err.to_string().contains("changed since it was applied")
                && err.to_string().contains(grub_d),
            "{text:?}: {err}"
        );
    }
}

#[test]
fn refusals_before_anything_changes() {
    let dir = tuning_host();
    let root = HostRoot::at(dir.path());
    let snap = scan(&root).unwrap();
    let facts = gather(&root);
    let p = plan(&snap, &facts, &request()).unwrap();
    let before = tree(dir.path());
    // A file changed since the plan.
    crate::support::hosts::put(
        dir.path(),
        "etc/initramfs-tools/modules",
        "# edited by hand\n",
    );
    let changed = tree(dir.path());
    let err = apply(&env(dir.path(), None), &facts, &p, &request(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("changed since the plan"), "{err}");
    assert_eq!(differ(&changed, &tree(dir.path())), Vec::<String>::new());
    std::fs::write(
        dir.path().join("etc/initramfs-tools/modules"),
        &before["etc/initramfs-tools/modules"].0,
    )
    .unwrap();
    // A symlink planted where our drop-in goes, pointing outside the root.
    let outside = tempfile::tempdir().unwrap();
    let target = dir.path().join("etc/modprobe.d/vfio-assistant.conf");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(outside.path().join("owned"), &target).unwrap();
    let facts = gather(&root);
    let p = plan(&snap, &facts, &request()).unwrap();
    let err = apply(&env(dir.path(), None), &facts, &p, &request(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("link"), "{err}");
    assert!(!outside.path().join("owned").exists());
}

#[test]
fn the_cli_previews_and_lists_commands_it_will_not_run() {
    let dir = tuning_host();
    let r = dir.path().to_str().unwrap();
    let out = bin()
        .args([
            "--root", r, "tune", "plan", "--gpu", "0b:00.0", "--vcpus", "4", "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes = v["changes"].as_array().unwrap();
    let cmd = changes.iter().find(|c| c["id"] == "cmdline").unwrap();
    assert_eq!(
        cmd["files"][0]["path"], "/etc/default/grub.d/99-vfio-assistant.cfg",
        "host paths, not under the root"
    );
    assert_eq!(cmd["files"][0]["before"], serde_json::Value::Null);
    assert_eq!(cmd["commands"][0]["argv"][0], "grub-mkconfig");
    assert_eq!(cmd["commands"][0]["run"], false);
    // Bad input: exit 2 and one line why, in the mode asked for.
    let bad = bin()
        .args(["--root", r, "tune", "plan", "--gpu", "42:00.0", "--json"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let e: serde_json::Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert!(
        e["error"].as_str().unwrap().contains("no PCI device"),
        "{e}"
    );
    let bad = bin()
        .args(["--root", r, "tune", "plan", "--cpus", "0-4096"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not an online CPU"));
    // Apply without --yes and without a terminal: nothing changes.
    let before = tree(dir.path());
    let no = bin()
        .args(["--root", r, "tune", "apply", "--gpu", "0b:00.0"])
        .output()
        .unwrap();
    assert_eq!(no.status.code(), Some(2));
    assert_eq!(differ(&before, &tree(dir.path())), Vec::<String>::new());
    let yes = bin()
        .args(["--root", r, "tune", "apply", "--gpu", "0b:00.0", "--yes"])
        .output()
        .unwrap();
    assert_eq!(
        yes.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&yes.stdout)
    );
    assert!(String::from_utf8_lossy(&yes.stdout).contains("Reboot for the boot changes"));
    let st = bin()
        .args(["--root", r, "tune", "status"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&st.stdout).contains("waiting for a reboot"),
        "{}",
        String::from_utf8_lossy(&st.stdout)
    );
}

/// Dynamic isolation: the libvirt hook is written executable, verified,
/// planned once, rolled back at any failing step and undone byte for byte.
#[test]
fn the_isolation_hook_is_written_executable_and_undone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tuning_host();
    std::fs::create_dir_all(dir.path().join("run/systemd/system")).unwrap();
    let root = HostRoot::at(dir.path());
    let req = Request {
        cpus: Some(vec![2, 3, 4, 5]),
        isolation_hook: true,
        vm: Some("win11".into()),
        ..Request::default()
    };
    let snap = scan(&root).unwrap();
    let facts = gather(&root);
    let p = plan(&snap, &facts, &req).unwrap();
    let hook = p
        .changes
        .iter()
        .find(|c| c.id == "isolation-hook")
        .expect("an isolation-hook change");
    assert_eq!(hook.effect, vfio_assistant::tuning::Effect::AtVmStart);
    // The hook replaces isolcpus; the boot-only parameters stay.
    let cmdline = p.changes.iter().find(|c| c.id == "cmdline").unwrap();
    assert!(!cmdline.title.contains("isolcpus"), "{}", cmdline.title);
    assert!(cmdline.title.contains("nohz_full=2-5"), "{}", cmdline.title);
    // A bad name or no CPUs: refused, nothing planned.
    for bad in [
        Request {
            vm: Some("a'b".into()),
            ..req.clone()
        },
        Request {
            cpus: None,
            ..req.clone()
        },
    ] {
        assert!(plan(&snap, &facts, &bad).is_err());
    }
    let only = Request {
        only: vec!["isolation-hook".parse().unwrap()],
        ..req.clone()
    };
    let p = plan(&snap, &facts, &only).unwrap();
    assert_eq!(p.changes.len(), 1);
    let original = tree(dir.path());
    for at in 0..steps(&p) {
        let o = apply(&env(dir.path(), Some(at)), &facts, &p, &only, &mut |_| {}).unwrap();
        assert_eq!(o.state, EntryState::RolledBack, "step {at}");
        assert_eq!(differ(&original, &tree(dir.path())), Vec::<String>::new());
    }
    let e = env(dir.path(), None);
    let o = apply(&e, &facts, &p, &only, &mut |_| {}).unwrap();
    assert_eq!(o.state, EntryState::Applied, "{o:?}");
    let file = dir
        .path()
        .join("etc/libvirt/hooks/qemu.d/vfio-assistant-isolate");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("prepare/begin) cpus='0-1,6-11'"), "{text}");
    let again = plan(&scan(&root).unwrap(), &gather(&root), &only).unwrap();
    assert!(again.changes.is_empty(), "{:?}", again.changes);
    let u = undo(&e, &o.id, false, &mut |_| {}).unwrap();
    assert_eq!(u.state, EntryState::Undone, "{u:?}");
    assert_eq!(differ(&original, &tree(dir.path())), Vec::<String>::new());
}
