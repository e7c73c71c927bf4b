//! The one next step names the GPU the host does not show its screen on,
//! whatever the PCI order: on the most common desktop (the first card or
//! the iGPU for the host, a second card for the VM) it must never propose
//! the card with the console. Found from what the host says (boot_vga,
//! connected displays), on a real X570 listing with two NVIDIA cards.
//! And whose each card is (issue 31): one on vfio-pci is the VM's and the
//! steps speak of it; the host's own (the console, the only one left) is
//! never proposed nor warned about for its driver — on the X570 and on the
//! Debian host the real-host run captured.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::{base_host, put};
use vfio_assistant::host::scan;
use vfio_assistant::report::findings::{FindingsRequest, host_findings};
use vfio_assistant::report::next_step::{NextAction, next_step, next_step_with};
use vfio_assistant::sysroot::HostRoot;

fn device_named(boot_vga_on: &str) -> Option<String> {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let r = dir.path();
    for (gpu, vga) in [("0000:0b:00.0", "0"), ("0000:0c:00.0", "0")] {
        let v = if gpu == boot_vga_on { "1" } else { vga };
        put(
            r,
            &format!("sys/devices/pci0000:00/{gpu}/boot_vga"),
            &format!("{v}\n"),
        );
        crate::support::hosts::bind(r, gpu, "nouveau");
    }
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let findings = host_findings(&root, &snap, &FindingsRequest::default());
    // Two cards: asked which is the VM's, the one without the console
    // first (they are equals here: the listing shows no link or memory).
    let first = match next_step(&snap, &findings).action {
        NextAction::ChooseGpu { cards } => cards[0].address.clone(),
        other => panic!("{other:?}"),
    };
    // That one taken, it is the one bound.
    match next_step_with(&snap, &findings, Some(&first)).action {
        NextAction::Tuning {
            change: vfio_assistant::tuning::kinds::Kind::VfioBoot,
            device,
        } => device,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_next_step_never_names_the_card_with_the_console() {
    // The console on the first card in PCI order: the second one goes.
    assert_eq!(
        device_named("0000:0b:00.0").as_deref(),
        Some("0000:0c:00.0")
    );
    // On the second: the first goes.
    assert_eq!(
        device_named("0000:0c:00.0").as_deref(),
        Some("0000:0b:00.0")
    );
}

/// A GPU whose functions are all on vfio-pci is the VM's; the one the host
/// is left to show its screen on is the host's: never proposed for a VM,
/// never warned about for its own driver holding it.
mod whose_gpu {
    use crate::support::hosts::good_host;
    use crate::support::tree::copy_tree;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::Path;
    use vfio_assistant::checks::model::{Finding, Status};
    use vfio_assistant::host::scan;
    use vfio_assistant::report::findings::{FindingsRequest, host_findings};
    use vfio_assistant::report::next_step::{NextAction, NextStep, next_step};
    use vfio_assistant::sysroot::HostRoot;

    /// The Overview's next step and the findings under it, as `check` has them.
    fn overview(root: &Path) -> (NextStep, Vec<Finding>) {
        let root = HostRoot::at(root);
        let snap = scan(&root).unwrap();
        let findings = host_findings(&root, &snap, &FindingsRequest::default());
        (next_step(&snap, &findings), findings)
    }

    fn about<'a>(f: &'a [Finding], id: &str, device: &str) -> &'a Finding {
        f.iter()
            .find(|x| x.id == id && x.device.as_deref() == Some(device))
            .unwrap_or_else(|| panic!("no {id} for {device}: {f:#?}"))
    }

    /// No finding on `device` warns or fails because a host driver holds it.
    fn not_warned_for_its_driver(f: &[Finding], device: &str) {
        let bound = about(f, "device.bound", device);
        assert_eq!(bound.status, Status::Pass, "{bound:#?}");
        assert!(bound.title.contains("host"), "{}", bound.title);
        assert!(bound.why.len() > 20, "{bound:#?}");
    }

    #[test]
    fn on_the_x570_the_step_is_about_the_card_already_on_vfio_pci() {
        // The GTX 1080 Ti (0b:00.0/.1) on vfio-pci, the GT 710 on nouveau.
        for host in [good_host(), crate::support::tuning::runtime_host()] {
            let (step, f) = overview(host.path());
            assert!(
                step.sentence.contains("GTX 1080 Ti"),
                "the step names the VM's card: {step:#?}"
            );
            assert!(!step.sentence.contains("GT 710"), "{step:#?}");
            assert_ne!(
                step.action,
                NextAction::Tuning {
                    change: vfio_assistant::tuning::kinds::Kind::VfioBoot,
                    device: Some("0000:0c:00.0".into())
                }
            );
            not_warned_for_its_driver(&f, "0000:0c:00.0");
        }
        // Set up right, nothing else to do: the VM, with that card.
        let (step, _) = overview(good_host().path());
        assert_eq!(step.action, NextAction::NewVm, "{step:#?}");
    }

    #[test]
    fn the_card_holding_the_boot_framebuffer_is_the_hosts() {
        // The X570 with both cards on nouveau, no boot_vga said, and the
        // firmware's framebuffer (BOOTFB) in the BAR 1 of the GTX 1080 Ti,
        // the first card in PCI order: the console is there, the GT 710 goes.
        let dir = crate::support::hosts::base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
        let r = dir.path();
        for gpu in ["0000:0b:00.0", "0000:0c:00.0"] {
            crate::support::hosts::bind(r, gpu, "nouveau");
        }
        crate::support::hosts::put(
            r,
            "sys/devices/pci0000:00/0000:0b:00.0/resource",
            "0x00000000f6000000 0x00000000f6ffffff 0x0000000000040200\n0x00000000e0000000 0x00000000e7ffffff 0x000000000004220c\n",
        );
        crate::support::hosts::put(
            r,
            "proc/iomem",
            "e0000000-efffffff : PCI Bus 0000:0b\n  e0000000-e7ffffff : 0000:0b:00.0\n    e0000000-e02fffff : BOOTFB\n",
        );
        // Two cards: the user is asked which is the VM's; the 1080 Ti's
        // reason says the console is on it.
        let (step, f) = overview(r);
        let NextAction::ChooseGpu { cards } = &step.action else {
            panic!("{step:#?}")
        };
        let ti = cards.iter().find(|c| c.address == "0000:0b:00.0").unwrap();
        assert!(ti.why.contains("boot framebuffer"), "{ti:#?}");
        // The GT 710 chosen: it is the one bound.
        let root = HostRoot::at(r);
        let snap = scan(&root).unwrap();
        let step = vfio_assistant::report::next_step::next_step_with(&snap, &f, Some("0c:00.0"));
        assert_eq!(
            step.action,
            NextAction::Tuning {
                change: vfio_assistant::tuning::kinds::Kind::VfioBoot,
                device: Some("0000:0c:00.0".into())
            },
            "{step:#?}"
        );
        not_warned_for_its_driver(&f, "0000:0b:00.0");
        assert!(
            about(&f, "device.bound", "0000:0b:00.0")
                .why
                .contains("boot framebuffer"),
            "{f:#?}"
        );
    }

    /// The real-host run's Debian 12 guest (tests/fixtures/hosts): 00:02.0
    /// virtio-vga is the boot GPU, 01:00.0/.1 (VGA + HD audio, behind a
    /// root port) the card for a VM.
    fn e2e() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/e2e-debian12-grub"),
            dir.path(),
        );
        dir
    }

    const CARD: &str = "sys/devices/pci0000:00/0000:00:1c.0/0000:01:00";

    #[test]
    fn on_the_debian_host_the_boot_gpu_is_never_the_vms() {
        // Both cards on their host drivers: the other one is proposed.
        let host = e2e();
        let (step, f) = overview(host.path());
        assert_eq!(
            step.action,
            NextAction::Tuning {
                change: vfio_assistant::tuning::kinds::Kind::VfioBoot,
                device: Some("0000:01:00.0".into())
            },
            "{step:#?}"
        );
        not_warned_for_its_driver(&f, "0000:00:02.0");
        let vga = about(&f, "device.boot_vga", "0000:00:02.0");
        assert_eq!(vga.status, Status::Info, "{vga:#?}");

        // The other card on vfio-pci: the step is about it, never the boot GPU.
        let r = host.path();
        for func in ["0", "1"] {
            let link = r.join(format!("{CARD}.{func}/driver"));
            fs::remove_file(&link).unwrap();
            symlink("../../../../bus/pci/drivers/vfio-pci", &link).unwrap();
        }
        fs::create_dir_all(r.join("sys/bus/pci/drivers/vfio-pci")).unwrap();
        let (step, f) = overview(r);
        assert!(
            step.sentence.contains("device 1234:1111"),
            "the VM's card: {step:#?}"
        );
        assert!(!step.sentence.contains("Virtio"), "{step:#?}");
        assert!(
            !matches!(
                step.action,
                NextAction::Tuning {
                    change: vfio_assistant::tuning::kinds::Kind::VfioBoot,
                    ..
                }
            ),
            "{step:#?}"
        );
        not_warned_for_its_driver(&f, "0000:00:02.0");
    }

    #[test]
    fn the_only_gpu_is_the_hosts_single_gpu_never_bound_at_boot() {
        // The Debian host without its virtio-vga (a paravirtual display,
        // never a VM's card): the VGA behind the root port is all there is,
        // as on the harness's single-GPU host.
        let host = e2e();
        let r = host.path();
        fs::remove_dir_all(r.join("sys/devices/pci0000:00/0000:00:02.0")).unwrap();
        fs::remove_file(r.join("sys/bus/pci/devices/0000:00:02.0")).unwrap();
        fs::remove_dir_all(r.join("sys/kernel/iommu_groups/1")).unwrap();
        for l in ["card1", "card1-Virtual-2", "renderD128"] {
            fs::remove_file(r.join("sys/class/drm").join(l)).unwrap();
        }
        let (step, f) = overview(r);
        assert!(step.sentence.contains("single-GPU"), "{step:#?}");
        assert!(
            !matches!(
                step.action,
                NextAction::Tuning {
                    change: vfio_assistant::tuning::kinds::Kind::VfioBoot,
                    ..
                }
            ),
            "{step:#?}"
        );
        assert!(!step.sentence.contains("Bind"), "{step:#?}");
        assert!(!step.sentence.contains("vfio-pci"), "{step:#?}");
        assert!(!step.why.contains("Binding"), "{step:#?}");
        not_warned_for_its_driver(&f, "0000:01:00.0");
        // Its being the only GPU is still said: that is a fact about the host.
        assert_eq!(
            about(&f, "device.host_display", "0000:01:00.0").status,
            Status::Warn
        );
    }
}
