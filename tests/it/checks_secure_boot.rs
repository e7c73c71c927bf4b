//! Secure Boot and the modules a passthrough desktop adds (issue 33): on a
//! host with Secure Boot on, a DKMS module without a signature is refused
//! by the kernel, so the VM that needs it would fail at its start. The area
//! was added the way docs/ARCHITECTURE.md says: its file
//! (checks/secure_boot.rs, with its `AREA`) and one line in `checks::AREAS`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{good_host, put};
use std::path::Path;
use vfio_assistant::checks::model::{Finding, Status};
use vfio_assistant::checks::run_checks;
use vfio_assistant::host::scan;
use vfio_assistant::host::signing::SIGNATURE_MAGIC;
use vfio_assistant::sysroot::HostRoot;

const RELEASE: &str = "6.1.0-18-amd64";

fn secure_boot_host(on: bool) -> tempfile::TempDir {
    let dir = good_host();
    let r = dir.path();
    let var = "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";
    put(
        r,
        var,
        if on {
            "\u{6}\0\0\0\u{1}"
        } else {
            "\u{6}\0\0\0\0"
        },
    );
    put(
        r,
        "sys/kernel/security/lockdown",
        "none [integrity] confidentiality\n",
    );
    put(r, "proc/sys/kernel/osrelease", &format!("{RELEASE}\n"));
    let m = format!("lib/modules/{RELEASE}");
    put(
        r,
        &format!("{m}/modules.dep"),
        "kernel/drivers/net/e1000e/e1000e.ko.xz:\nupdates/dkms/kvmfr.ko:\nupdates/dkms/vendor-reset.ko:\nupdates/dkms/nvidia.ko.xz: kernel/drivers/video/fbdev/core/fb.ko.xz\n",
    );
    // A real module's bytes matter not; its end does.
    let body = "\u{7f}ELF".to_string() + &"x".repeat(10_000);
    let signed = body.clone() + "PKCS7..." + std::str::from_utf8(SIGNATURE_MAGIC).unwrap();
    put(r, &format!("{m}/updates/dkms/kvmfr.ko"), &signed);
    put(r, &format!("{m}/updates/dkms/vendor-reset.ko"), &body);
    put(r, &format!("{m}/updates/dkms/nvidia.ko.xz"), "\u{fd}7zXZ");
    dir
}

fn ours(f: &[Finding]) -> Vec<(String, Status)> {
    f.iter()
        .filter(|x| x.id.starts_with("boot.secure_boot") || x.id == "boot.module_signed")
        .map(|x| (x.title.clone(), x.status))
        .collect()
}

fn findings(root: &Path) -> Vec<Finding> {
    run_checks(&scan(&HostRoot::at(root)).unwrap(), None)
}

#[test]
fn an_unsigned_dkms_module_under_secure_boot_is_refused_before_the_vm_needs_it() {
    let host = secure_boot_host(true);
    let f = findings(host.path());
    let got = ours(&f);
    assert!(
        got.contains(&("Secure Boot is on".into(), Status::Info)),
        "{got:?}"
    );
    assert!(
        got.contains(&("kvmfr is signed".into(), Status::Pass)),
        "{got:?}"
    );
    assert!(
        got.contains(&(
            "vendor_reset is not signed: Secure Boot's kernel refuses it".into(),
            Status::Fail
        )),
        "{got:?}"
    );
    assert!(
        got.contains(&(
            "Whether nvidia is signed was not read".into(),
            Status::Unknown
        )),
        "{got:?}"
    );
    let refused = f
        .iter()
        .find(|x| x.status == Status::Fail && x.id == "boot.module_signed")
        .unwrap();
    let fix = refused.fix.as_deref().unwrap();
    assert!(
        fix.contains("mokutil --import") && fix.contains("What it costs"),
        "{fix}"
    );
    let sb = f.iter().find(|x| x.id == "boot.secure_boot").unwrap();
    assert!(sb.why.contains("locked down (integrity)"), "{}", sb.why);
    // The kernel's own modules are not ours to judge.
    assert!(!got.iter().any(|(t, _)| t.contains("e1000e")), "{got:?}");
}

#[test]
fn with_secure_boot_off_modules_are_not_read_and_nothing_fails() {
    let host = secure_boot_host(false);
    let got = ours(&findings(host.path()));
    assert_eq!(got, vec![("Secure Boot is off".to_string(), Status::Info)]);
}

/// A snapshot keeps a module's end (NVIDIA's alone is tens of megabytes):
/// the capture answers as the host did.
#[test]
fn a_snapshot_answers_as_the_host_did() {
    let host = secure_boot_host(true);
    let before = ours(&findings(host.path()));
    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("host.tar.gz");
    vfio_assistant::capture::capture(&HostRoot::at(host.path()), &archive, false).unwrap();
    let opened = vfio_assistant::sysroot::open_root(&archive).unwrap();
    let after = ours(&run_checks(&scan(opened.root()).unwrap(), None));
    assert_eq!(before, after);
}
