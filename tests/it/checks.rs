//! Prerequisite checks on hosts built to pass and built to fail. Each host starts
//! from a real machine (an IOMMU listing users published, a real CPU topology)
//! and gets the files the checks read written on top, so every check is seen
//! both ways. Plus: the live host next to `virt-host-validate qemu`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{bad_host, good_host};
use std::collections::BTreeMap;
use std::path::Path;
use vfio_assistant::checks::model::{Finding, Status};
use vfio_assistant::checks::{AREAS, check_ids, run_checks};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

fn findings(root: &Path, device: Option<&str>) -> Vec<Finding> {
    run_checks(&scan(&HostRoot::at(root)).unwrap(), device)
}

/// Status by id; for per-device checks the key is `id@address`.
fn by_id(f: &[Finding]) -> BTreeMap<String, Status> {
    f.iter()
        .map(|x| {
            (
                match &x.device {
                    Some(d) => format!("{}@{d}", x.id),
                    None => x.id.clone(),
                },
                x.status,
            )
        })
        .collect()
}

#[test]
fn a_well_set_up_host_passes() {
    let dir = good_host();
    let f = findings(dir.path(), None);
    let s = by_id(&f);
    for x in &f {
        assert!(x.status != Status::Fail, "unexpected failure: {x:#?}");
        assert!(!x.evidence.is_empty(), "{}: no evidence", x.id);
        assert!(x.why.len() > 20, "{}: no why", x.id);
        if matches!(x.status, Status::Fail | Status::Warn) {
            assert!(x.fix.is_some(), "{}: no fix", x.id);
        }
    }
    for id in [
        "cpu.virtualization",
        "kvm.device",
        "iommu.firmware",
        "iommu.enabled",
        "iommu.passthrough_mode",
        "iommu.interrupt_remapping",
        "vfio.modules",
        "boot.reboot_pending",
        "mem.thp",
        "mem.hugepages",
        "mem.fragmentation",
        "mem.ksm",
        "time.clocksource",
        "cpu.governor",
        "cpu.split_lock",
        "kvm.ignore_msrs",
        "dev.vhost_net",
        "dev.tun",
        "cgroup.controllers",
        "libvirt.running",
        "libvirt.hooks",
        "firmware.ovmf",
        "tpm.swtpm",
        "device.viable@0000:0b:00.0",
        "device.bound@0000:0b:00.0",
        "device.reset@0000:0b:00.0",
        "device.host_display@0000:0b:00.0",
    ] {
        assert_eq!(
            s.get(id),
            Some(&Status::Pass),
            "{id}: {:#?}",
            f.iter().find(|x| x.id == id.split('@').next().unwrap())
        );
    }
    // The GT 710 is the host's (the 1080 Ti is on vfio-pci, so it is the
    // one left for the host's screen): nouveau holding it is right, not a
    // warning, and it says why.
    assert_eq!(s.get("device.bound@0000:0c:00.0"), Some(&Status::Pass));
    let host_card = f
        .iter()
        .find(|x| x.id == "device.bound" && x.device.as_deref() == Some("0000:0c:00.0"))
        .unwrap();
    assert!(
        host_card.title.contains("the host's card"),
        "{host_card:#?}"
    );
    assert!(
        host_card.why.contains("vfio-pci for the VM"),
        "{host_card:#?}"
    );
}

#[test]
fn a_badly_set_up_host_fails_each_check_with_the_fix() {
    let dir = bad_host();
    let f = findings(dir.path(), None);
    let s = by_id(&f);
    let expect = [
        ("cpu.virtualization", Status::Fail),
        ("kvm.device", Status::Fail),
        ("iommu.acs_override", Status::Warn),
        ("boot.reboot_pending", Status::Warn),
        // Its /proc/modules lacks vfio_pci, but the real listing has cards
        // bound to vfio-pci: the driver is there (built in).
        ("vfio.modules", Status::Pass),
        ("mem.thp", Status::Warn),
        ("mem.hugepages", Status::Info),
        ("mem.fragmentation", Status::Warn),
        ("mem.ksm", Status::Warn),
        ("time.clocksource", Status::Warn),
        ("cpu.governor", Status::Warn),
        ("cpu.isolation", Status::Warn),
        ("cpu.irq_affinity", Status::Warn),
        ("cpu.split_lock", Status::Warn),
        ("kvm.ignore_msrs", Status::Info),
        ("dev.vhost_net", Status::Warn),
        ("cgroup.controllers", Status::Warn),
        ("libvirt.hooks", Status::Fail),
        ("device.host_driver_first@0000:01:00.0", Status::Fail),
        ("device.boot_vga@0000:01:00.0", Status::Warn),
        ("device.reset@0000:4c:00.0", Status::Warn),
        ("device.bound@0000:01:00.0", Status::Warn),
        ("device.bound@0000:21:00.0", Status::Pass),
    ];
    for (id, want) in expect {
        assert_eq!(s.get(id), Some(&want), "{id}");
        let x = f
            .iter()
            .find(|x| match &x.device {
                Some(d) => format!("{}@{d}", x.id) == id,
                None => x.id == id,
            })
            .unwrap();
        if matches!(want, Status::Fail | Status::Warn) {
            assert!(x.fix.is_some(), "{id}: a problem without a fix");
        }
    }
    let find = |id: &str| f.iter().find(|x| x.id == id).unwrap();
    // The evidence names the file and the value.
    let kvm = find("kvm.device");
    assert!(
        kvm.evidence
            .iter()
            .any(|e| e.source == "/dev/kmsg" && e.value.contains("disabled by bios"))
    );
    assert!(
        kvm.fix.as_deref().unwrap().contains("SVM Mode"),
        "AMD firmware wording"
    );
    let boot = f.iter().find(|x| x.id == "device.boot_vga").unwrap();
    assert!(
        boot.evidence.iter().any(|e| e.value.contains("efifb")),
        "efifb inside the BAR: {:#?}",
        boot.evidence
    );
    let reboot = find("boot.reboot_pending");
    assert!(reboot.fix.as_deref().unwrap().contains("amd_iommu=on"));
    let iso = find("cpu.isolation");
    assert!(iso.fix.as_deref().unwrap().contains("CPU 0 is isolated"));
    // Failures come first.
    assert_eq!(f[0].status, Status::Fail);
}

#[test]
fn every_finding_id_is_declared_and_documented() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/check-json.md"))
            .unwrap();
    for id in check_ids() {
        assert!(
            doc.contains(&format!("`{}`", id.as_str())),
            "{id:?} missing from docs/check-json.md"
        );
    }
    // Each area gives only the ids it declares in its line of the table
    // (a check added to a file without its id there fails here).
    for host in [good_host(), bad_host()] {
        let snap = scan(&HostRoot::at(host.path())).unwrap();
        for area in AREAS {
            let Some(run) = area.run else { continue };
            let mut out = Vec::new();
            run(&snap, None, &mut out);
            for f in out {
                assert!(
                    area.ids.iter().any(|c| c.as_str() == f.id),
                    "{} is not among {}'s ids",
                    f.id,
                    area.name
                );
            }
        }
    }
    // No id in two areas.
    let mut all: Vec<_> = check_ids().collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "an id declared twice");
}

#[test]
fn a_named_device_is_checked_alone() {
    let dir = bad_host();
    let f = findings(dir.path(), Some("21:00.0"));
    let devices: std::collections::BTreeSet<&str> =
        f.iter().filter_map(|x| x.device.as_deref()).collect();
    assert_eq!(
        devices.into_iter().collect::<Vec<_>>(),
        vec!["0000:21:00.0"]
    );
    let f = findings(dir.path(), Some("99:00.0"));
    assert!(
        f.iter()
            .any(|x| x.id == "device.exists" && x.status == Status::Fail)
    );
}

#[test]
fn check_cli_exit_codes() {
    let bin = env!("CARGO_BIN_EXE_vfio-assistant");
    let good = good_host();
    let out = std::process::Command::new(bin)
        .args(["check", "--root"])
        .arg(good.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let bad = bad_host();
    let out = std::process::Command::new(bin)
        .args(["check", "--json", "--root"])
        .arg(bad.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["counts"]["fail"].as_u64().unwrap() >= 3);
    assert!(v["findings"][0]["evidence"][0]["source"].is_string());
    let out = std::process::Command::new(bin)
        .args(["check", "--root", "/no/such/dir"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `virt-host-validate qemu` lines: "QEMU: Checking for X : PASS|WARN|FAIL (...)".
fn vhv() -> Option<BTreeMap<String, String>> {
    let out = match std::process::Command::new("virt-host-validate")
        .arg("qemu")
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "virt-host-validate is required in CI: {e}"
            );
            eprintln!("skipped: virt-host-validate not installed ({e})");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    Some(
        text.lines()
            .filter_map(|l| {
                let (what, verdict) = l.split_once(": Checking ")?.1.rsplit_once(':')?;
                Some((
                    what.trim().to_string(),
                    verdict.split_whitespace().next()?.to_string(),
                ))
            })
            .collect(),
    )
}

#[test]
fn live_host_agrees_with_virt_host_validate() {
    let Some(theirs) = vhv() else { return };
    let snap = scan(&HostRoot::live()).unwrap();
    let ours = by_id(&run_checks(&snap, None));
    let mut compared = 0;
    let mut agree = |their_key: &str, our_id: &str| {
        let (Some(t), Some(o)) = (theirs.get(their_key), ours.get(our_id)) else {
            return;
        };
        compared += 1;
        assert_eq!(
            t == "PASS",
            *o == Status::Pass,
            "{their_key}: virt-host-validate {t}, ours {o:?}"
        );
    };
    agree("if device /dev/vhost-net exists", "dev.vhost_net");
    agree("if device /dev/net/tun exists", "dev.tun");
    agree("if device /dev/kvm exists", "kvm.device");
    agree("for device assignment IOMMU support", "iommu.enabled");
    // Hardware virtualization: virt-host-validate reads only the cpuinfo flags.
    // On a nested host whose hypervisor hides vmx but still offers /dev/kvm it
    // says FAIL where we say WARN (KVM works, passthrough needs the real host);
    // anywhere else the two agree.
    if let (Some(t), Some(o)) = (
        theirs.get("for hardware virtualization"),
        ours.get("cpu.virtualization"),
    ) {
        compared += 1;
        if snap.cpu.hypervisor && snap.firmware.dev_kvm && snap.cpu.virtualization().is_none() {
            assert_eq!((t.as_str(), *o), ("FAIL", Status::Warn));
        } else {
            assert_eq!(
                t == "PASS",
                *o == Status::Pass,
                "hardware virtualization: {t} vs {o:?}"
            );
        }
    }
    assert!(compared >= 3, "compared only {compared}: {theirs:?}");
}
