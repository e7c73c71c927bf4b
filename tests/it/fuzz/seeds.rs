//! Real journal entries to start from: written by a real `tune apply` and
//! `tune undo` on temporary hosts (with boot files too), and forgeries of
//! one made by hand, each proved refused before the fuzzing starts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use super::*;

/// `vfio-assistant --root ROOT ARGS…`, which must succeed.
pub(super) fn cli(root: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every entry.json the CLI wrote under `root`, as written but for the id
/// and the time (the same seeds every run, so the same mutants).
pub(super) fn entries(root: &Path) -> Vec<Vec<u8>> {
    let dir = root.join("var/lib/vfio-assistant/journal");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path().join("entry.json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let v: Value = serde_json::from_str(&text).unwrap();
            let (id, created) = (v["id"].as_str().unwrap(), v["created"].as_u64().unwrap());
            let text = text
                .replace(&format!("\"{id}\""), "\"001700000000-4242-0\"")
                .replace(
                    &format!("\"created\": {created},"),
                    "\"created\": 1700000000,",
                );
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                (&v["id"], &v["created"]),
                (&json!("001700000000-4242-0"), &json!(1700000000))
            );
            text.into_bytes()
        })
        .collect()
}

/// Real entries: a VM's whole tuning on Debian 12 (boot, values, binding),
/// applied and then undone; the isolation hook, Looking Glass and kvmfr;
/// the runtime knobs alone.
pub(super) fn real_entries() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let debian = tuning_host();
    let r = debian.path();
    cli(
        r,
        &[
            "tune", "apply", "--gpu", "0b:00.0", "--vcpus", "4", "--memory", "1G", "--yes",
        ],
    );
    out.extend(entries(r));
    cli(r, &["tune", "undo", "--last", "--yes"]);
    out.extend(entries(r));
    let hook = tuning_host();
    let r = hook.path();
    std::fs::create_dir_all(r.join("run/systemd/system")).unwrap();
    let put = |rel: &str, text: &str| crate::support::hosts::put(r, rel, text);
    put(
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nanna:x:1000:1000::/home/anna:/bin/bash\n",
    );
    put(
        "lib/modules/6.1.0-18-amd64/modules.dep",
        "kernel/drivers/vfio/pci/vfio-pci.ko:\nupdates/dkms/kvmfr.ko.xz:\n",
    );
    cli(
        r,
        &[
            "tune",
            "apply",
            "--cpus",
            "2-5",
            "--isolate-vm",
            "win11",
            "--looking-glass-mib",
            "64",
            "--kvmfr",
            "--qemu-as-me",
            "--user",
            "anna",
            "--yes",
        ],
    );
    out.extend(entries(r));
    let runtime = runtime_host();
    let r = runtime.path();
    cli(
        r,
        &[
            "tune",
            "apply",
            "--only",
            "thp,ksm,hugepages,governor",
            "--memory",
            "64M",
            "--yes",
        ],
    );
    out.extend(entries(r));
    out.extend(entries_with_boot_files());
    out.sort();
    out.dedup();
    out
}

/// An entry with its commands run (stand-ins for update-grub and
/// update-initramfs, as tuning_boot.rs does): generated boot files saved,
/// command output recorded, a boot id.
pub(super) fn entries_with_boot_files() -> Vec<Vec<u8>> {
    use vfio_assistant::host::scan;
    use vfio_assistant::sysroot::HostRoot;
    use vfio_assistant::tuning::apply::{Env, apply};
    use vfio_assistant::tuning::facts::gather;
    use vfio_assistant::tuning::model::Request;
    use vfio_assistant::tuning::plan::plan;
    const REL: &str = "6.1.0-18-amd64";
    let standins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/standins");
    let dir = tuning_host();
    let r = dir.path();
    let put = |rel: &str, text: &str| crate::support::hosts::put(r, rel, text);
    put(&format!("boot/vmlinuz-{REL}"), "");
    put("proc/sys/kernel/random/boot_id", "b00t-1\n");
    crate::support::hosts::bind(r, "0000:0b:00.0", "nouveau");
    crate::support::hosts::bind(r, "0000:0b:00.1", "snd_hda_intel");
    for f in ["0000:0b:00.0", "0000:0b:00.1"] {
        put(
            &format!("sys/devices/pci0000:00/{f}/driver_override"),
            "(null)\n",
        );
    }
    for f in ["bind", "unbind"] {
        put(&format!("sys/bus/pci/drivers/vfio-pci/{f}"), "");
    }
    for argv in [&["update-grub"][..], &["update-initramfs", "-u", "-k", REL]] {
        let st = Command::new(standins.join(argv[0]))
            .args(&argv[1..])
            .env("VFIO_ASSISTANT_ROOT", r)
            .status()
            .unwrap();
        assert!(st.success(), "{argv:?}");
    }
    let root = HostRoot::at(r);
    let req = Request {
        gpus: vec!["0b:00.0".parse().unwrap()],
        vcpus: Some(4),
        memory_mib: Some(1024),
        ..Request::default()
    };
    let p = plan(&scan(&root).unwrap(), &gather(&root), &req).unwrap();
    let mut env = Env::new(HostRoot::at(r), None, true);
    env.tool_dir = Some(standins);
    apply(&env, &gather(&root), &p, &req, &mut |_| {}).unwrap();
    let got = entries(r);
    assert!(
        got.iter()
            .any(|e| serde_json::from_slice::<Value>(e).unwrap()["artifacts"] != json!([])),
        "no boot files saved"
    );
    got
}

/// The forgeries of issue 30, each one edit away from a real entry.
pub(super) fn forgeries(real: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let base: Value = serde_json::from_slice(real).unwrap();
    let changes = base["plan"]["changes"].as_array().unwrap();
    let with_file = changes
        .iter()
        .position(|c| !c["files"].as_array().unwrap().is_empty());
    let with_value = changes
        .iter()
        .position(|c| !c["values"].as_array().unwrap().is_empty());
    let (fc, vc) = (with_file.unwrap(), with_value.unwrap());
    let saved = base["files"].as_array().unwrap();
    assert!(!saved.is_empty() && !base["values"].as_array().unwrap().is_empty());
    let shell =
        json!({"cmd": {"program": "sh", "argv": ["sh", "-c", "id"]}, "run": true, "why": "x"});
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = base.clone();
        f(&mut v);
        serde_json::to_vec_pretty(&v).unwrap()
    };
    let file_path = changes[fc]["files"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let value_path = changes[vc]["values"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    vec![
        (
            "an undo command that is a shell",
            edit(&|v| {
                v["plan"]["changes"][fc]["undo_commands"]
                    .as_array_mut()
                    .unwrap()
                    .push(shell.clone())
            }),
        ),
        (
            "a command replaced by a shell",
            edit(&|v| v["plan"]["changes"][fc]["undo_commands"] = json!([shell.clone()])),
        ),
        (
            "another kind's command",
            edit(
                &|v| v["plan"]["changes"][vc]["undo_commands"] = json!([{"cmd": {"program": "systemctl", "verb": "start", "unit": "libvirtd"}, "run": true, "why": "x"}]),
            ),
        ),
        (
            "a file restored to /etc/passwd",
            edit(&|v| {
                v["files"].as_array_mut().unwrap().push(json!({"path": "/etc/passwd", "saved_as": "0", "mode": 420, "uid": 0, "gid": 0, "written": null}))
            }),
        ),
        (
            "a change writing /etc/passwd",
            edit(&|v| {
                v["plan"]["changes"][fc]["files"][0]["path"] = json!("/etc/passwd");
                for f in v["files"].as_array_mut().unwrap() {
                    if f["path"] == json!(file_path) {
                        f["path"] = json!("/etc/passwd");
                    }
                }
            }),
        ),
        (
            "a file restored setuid (0o4755)",
            edit(&|v| v["files"][0]["mode"] = json!(2541)),
        ),
        (
            "a file restored writable by all",
            edit(&|v| v["files"][0]["mode"] = json!(0o666)),
        ),
        (
            "a saved copy outside the journal",
            edit(&|v| v["files"][0]["saved_as"] = json!("../../../etc/shadow")),
        ),
        (
            "a value restored to core_pattern",
            edit(&|v| {
                v["values"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!(["/proc/sys/kernel/core_pattern", "|/tmp/x"]))
            }),
        ),
        (
            "a change writing core_pattern",
            edit(&|v| {
                v["plan"]["changes"][vc]["values"][0]["path"] =
                    json!("/proc/sys/kernel/core_pattern");
                for p in v["values"].as_array_mut().unwrap() {
                    if p[0] == json!(value_path) {
                        p[0] = json!("/proc/sys/kernel/core_pattern");
                    }
                }
            }),
        ),
        (
            "an id that is a path",
            edit(&|v| v["id"] = json!("../../etc")),
        ),
    ]
}
