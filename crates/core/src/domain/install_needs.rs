//! What a new VM needs before it is worth defining: a GPU to pass through
//! (unless the user says it has none), something to install Windows from
//! (unless the disk already holds a system), and the driver media for a
//! virtio disk that setup would not see otherwise. libvirt accepts a domain
//! without any of them; a user who defines it finds out at the first boot.
//! The wizard's Review shows each as a blocker with a way back to its step.

use super::from_host::Choices;
use super::template::DiskBus;

/// Which of the wizard's steps fixes a need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeedStep {
    Gpu,
    Storage,
}

/// One thing the VM lacks, in words, and where it is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub what: &'static str,
    pub why: &'static str,
    pub step: NeedStep,
}

/// What the choices leave out. `new_disk`: the disk is made empty for this
/// VM (an existing disk may hold an installed Windows and its drivers);
/// `no_passthrough`: the user said this VM has no GPU of its own.
pub fn missing(c: &Choices, new_disk: bool, no_passthrough: bool) -> Vec<Need> {
    let mut out = Vec::new();
    if c.gpu.is_none() && !no_passthrough {
        out.push(Need {
            what: "No GPU is chosen for the VM.",
            why: "A passthrough VM without its card shows its desktop only in a SPICE window. Choose the card on the GPU step, or tick \"No passthrough\" there for a VM without one.",
            step: NeedStep::Gpu,
        });
    }
    let has = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.trim().is_empty());
    if new_disk && !has(&c.install_iso) {
        out.push(Need {
            what: "No Windows installer ISO.",
            why: "The new disk is empty and the VM has nothing to boot Windows setup from. Name the installer ISO on the Storage step, or use a disk that has Windows on it already.",
            step: NeedStep::Storage,
        });
    }
    let bus = c.disk_bus.unwrap_or(if has(&c.virtio_iso) {
        DiskBus::Virtio
    } else {
        DiskBus::Sata
    });
    if new_disk && bus != DiskBus::Sata && !has(&c.virtio_iso) {
        out.push(Need {
            what: "A virtio disk without the virtio-win driver ISO.",
            why: "Windows setup does not see a virtio disk without its driver (viostor / vioscsi) from the virtio-win ISO. Name that ISO on the Storage step, or choose SATA there.",
            step: NeedStep::Storage,
        });
    }
    out
}

/// What an unattended install ("Install Windows for me") still lacks: the
/// virtio-win ISO (its drivers go on the answer media) and an account name
/// Windows accepts (install/unattend.rs's rules).
pub fn unattended_missing(c: &Choices, user: &str) -> Vec<Need> {
    let mut out = Vec::new();
    if c.virtio_iso.as_deref().is_none_or(|s| s.trim().is_empty()) {
        out.push(Need {
            what: "\"Install Windows for me\" needs the virtio-win ISO.",
            why: "The answer media carries the disk, network and serial drivers from it, and the first logon installs the guest tools from it. Name it on the Storage step.",
            step: NeedStep::Storage,
        });
    }
    if crate::install::unattend::check_user(user.trim()).is_err() {
        out.push(Need {
            what: "No Windows account name Windows accepts.",
            why: "The unattended install creates this administrator account: 1 to 20 letters, digits, spaces, dots, dashes or underscores, not Administrator or Guest. Name it on the Storage step.",
            step: NeedStep::Storage,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Choices {
        Choices {
            gpu: Some("0000:0b:00.0".into()),
            disk: Some("/var/lib/libvirt/images/w.qcow2".into()),
            install_iso: Some("/isos/Win11.iso".into()),
            virtio_iso: Some("/isos/virtio-win.iso".into()),
            ..Choices::default()
        }
    }

    #[test]
    fn each_missing_piece_is_one_need() {
        assert!(missing(&full(), true, false).is_empty());
        let mut c = full();
        c.gpu = None;
        assert_eq!(missing(&c, true, false)[0].step, NeedStep::Gpu);
        assert!(missing(&c, true, true).is_empty(), "no passthrough, said");
        let mut c = full();
        c.install_iso = Some("  ".into());
        assert_eq!(missing(&c, true, false).len(), 1);
        assert!(missing(&c, false, false).is_empty(), "an existing disk");
        let mut c = full();
        c.virtio_iso = None;
        assert!(missing(&c, true, false).is_empty(), "SATA by default");
        c.disk_bus = Some(DiskBus::Virtio);
        assert_eq!(missing(&c, true, false).len(), 1);
    }

    #[test]
    fn an_unattended_install_needs_the_drivers_and_an_account() {
        assert!(unattended_missing(&full(), "Ada").is_empty());
        assert_eq!(unattended_missing(&full(), "").len(), 1);
        assert_eq!(unattended_missing(&full(), "Guest").len(), 1);
        let mut c = full();
        c.virtio_iso = None;
        assert_eq!(unattended_missing(&c, "Ada")[0].step, NeedStep::Storage);
    }
}
