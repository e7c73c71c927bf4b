//! Secure Boot and the modules a passthrough desktop adds. Under Secure Boot
//! the kernel loads only modules signed by a key it trusts; kvmfr (Looking
//! Glass), vendor-reset and NVIDIA's driver are built on the machine by DKMS
//! and are unsigned unless DKMS was given a key that is enrolled. Such a
//! module is refused at load, and the VM that needs it fails at its start
//! (or the host's NVIDIA card has no driver): said before that, with the way
//! to sign them and what it costs.

use super::model::{Finding, Status};
use crate::host::HostSnapshot;
use crate::host::signing::ModuleSigning;

/// This file's line in `checks::AREAS`.
pub const AREA: super::Area = super::Area {
    name: "secure_boot",
    ids: &[
        super::CheckId("boot.secure_boot"),
        super::CheckId("boot.module_signed"),
    ],
    run: Some(|s, _, out| check(s, out)),
};

const SECURE_BOOT_VAR: &str =
    "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";

const MOK_FIX: &str = "Sign it with a Machine Owner Key: DKMS keeps one (Debian and Ubuntu: /var/lib/dkms/mok.pub; Fedora: /etc/pki/akmods/certs/public_key.der). `sudo mokutil --import /var/lib/dkms/mok.pub` asks for a one-time password; reboot, choose \"Enroll MOK\" on the blue screen and type it; then `sudo dkms autoinstall` builds and signs the modules again. What it costs: one reboot at the console, and from then on the key on this disk signs what your kernel trusts (whoever is root here can sign a module with it).";

fn what_it_is_for(name: &str) -> &'static str {
    match name {
        "kvmfr" => {
            "Looking Glass's shared memory device (/dev/kvmfr0): the VM with kvmfr in its QEMU arguments fails at its start"
        }
        "vendor_reset" => {
            "the AMD reset quirk: the card is not reset between VM starts and the second start hangs or shows nothing"
        }
        _ => {
            "NVIDIA's driver: the host's NVIDIA card gets no driver (no picture beyond the firmware's, no CUDA)"
        }
    }
}

fn module_finding(m: &ModuleSigning) -> Finding {
    let file = m.file.as_deref().unwrap_or("(loaded)");
    let name = &m.name;
    let f = match (m.signed, m.loaded) {
        (Some(true), _) | (None, true) => Finding::new(
            "boot.module_signed",
            format!("{name} is signed"),
            Status::Pass,
        )
        .why(if m.loaded {
            "It is loaded under Secure Boot: the kernel checked its signature against a key it trusts."
        } else {
            "The kernel checks its signature against the keys it trusts (the distribution's and the enrolled Machine Owner Keys) when it loads it."
        }),
        (Some(false), true) => Finding::new(
            "boot.module_signed",
            format!("{name} is loaded though it is not signed"),
            Status::Warn,
        )
        .why("Secure Boot is on, yet an unsigned module loaded: shim's validation is off (`mokutil --disable-validation`) or the kernel does not enforce signatures. The next kernel or firmware update may enforce them again, and then it stops loading.")
        .fix(MOK_FIX),
        (Some(false), false) => Finding::new(
            "boot.module_signed",
            format!("{name} is not signed: Secure Boot's kernel refuses it"),
            Status::Fail,
        )
        .why(format!("It is {}.", what_it_is_for(name)))
        .fix(MOK_FIX),
        (None, false) => Finding::new(
            "boot.module_signed",
            format!("Whether {name} is signed was not read"),
            Status::Unknown,
        )
        .why("Its file is compressed, and the signature is inside. Under Secure Boot an unsigned module is refused at load.")
        .fix(format!("`modinfo {name} | grep -i signer` says who signed it (nothing: unsigned).")),
    };
    f.evidence(
        format!("/lib/modules/…/{file}"),
        match m.signed {
            Some(true) => "ends with the module signature",
            Some(false) => "no module signature at its end",
            None => "not read",
        },
    )
}

pub fn check(s: &HostSnapshot, out: &mut Vec<Finding>) {
    let sg = &s.system.signing;
    match sg.secure_boot {
        None => return,
        Some(false) => {
            out.push(
                Finding::new("boot.secure_boot", "Secure Boot is off", Status::Info)
                    .why("Every module loads, signed or not (kvmfr, vendor-reset, NVIDIA's from DKMS). Turning Secure Boot on later means signing those first.")
                    .evidence(SECURE_BOOT_VAR, "0"),
            );
            return;
        }
        Some(true) => {
            let mut f = Finding::new("boot.secure_boot", "Secure Boot is on", Status::Info)
                .why("The kernel loads only modules signed by a key it trusts, and is locked down: what is built on this machine (DKMS) must be signed with an enrolled key.")
                .evidence(SECURE_BOOT_VAR, "1");
            if let Some(mode) = &sg.lockdown {
                f = f.evidence("/sys/kernel/security/lockdown", mode.clone());
                if mode != "none" {
                    f = f.why(format!("The kernel loads only modules signed by a key it trusts, and is locked down ({mode}): debugfs is closed, so the monitor reads KVM's counters from libvirt or QEMU instead; module signatures are enforced."));
                }
            }
            out.push(f);
        }
    }
    out.extend(sg.modules.iter().map(module_finding));
}
