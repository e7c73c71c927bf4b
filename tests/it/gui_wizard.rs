//! The New VM wizard end to end through the accessibility tree (egui_kittest):
//! on the real X570 host, pick the GTX 1080 Ti, walk the steps, and define the
//! domain on libvirt's test driver, validate it, and save it to a file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use vfio_assistant::domain::xml::Document;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};
use vfio_assistant::ui::vm_model::VmModel;
use vfio_assistant::ui::wizard_state::{Step, WizardState};

fn wizard_harness(
    dir: &std::path::Path,
    wizard: WizardState,
    vm: VmModel,
) -> Harness<'static, App> {
    let snap = scan(&HostRoot::at(dir)).unwrap();
    let state = State {
        page: Page::NewVm,
        wizard,
        vm,
        ..State::default()
    };
    let app = App::with_snapshot(snap, state);
    let mut h = crate::support::gui::harness(app, [1200.0, 900.0]);
    h.run();
    h
}

/// Step until the running libvirt job has answered.
fn settle(h: &mut Harness<'static, App>) {
    for _ in 0..500 {
        h.step();
        if !h.state().is_busy() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    h.run();
    assert!(!h.state().is_busy(), "libvirt job did not finish");
}

#[test]
fn wizard_walks_from_gpu_to_a_defined_domain() {
    let host = crate::support::hosts::good_host();
    let save = tempfile::tempdir().unwrap();
    let save_path = save.path().join("win11.xml");
    let mut h = wizard_harness(
        host.path(),
        WizardState {
            uri: "test:///default".into(),
            save_path: save_path.display().to_string(),
            disk: "/var/lib/libvirt/images/win11.qcow2".into(),
            ..WizardState::default()
        },
        VmModel {
            install_iso: "/srv/Win11.iso".into(),
            ..VmModel::default()
        },
    );
    settle(&mut h); // the capabilities request
    // Step 1: the GPUs with their verdicts; pick the 1080 Ti.
    h.get_by_label_contains("can be passed through together with 0b:00.1");
    h.get_by_label_contains("0000:0b:00.0  NVIDIA GP102")
        .click();
    h.run();
    assert_eq!(h.state().state.vm.gpu.as_deref(), Some("0000:0b:00.0"));
    h.get_by_label_contains("Goes with: 0000:0b:00.1");
    // Step 2: the pinning plan, explained.
    h.get_by_label("Next").click();
    h.run();
    assert_eq!(h.state().state.wizard.step, Step::Cpu);
    h.get_by_label_contains("4 vCPUs pinned to CPUs");
    // Steps 3–7.
    for want in [
        Step::Memory,
        Step::Storage,
        Step::Network,
        Step::UseIt,
        Step::Features,
    ] {
        h.get_by_label("Next").click();
        h.run();
        assert_eq!(h.state().state.wizard.step, want);
    }
    // The name comes first; each part is a line that opens to its why.
    h.get_by_label("Name");
    h.get_by_label_contains("TPM 2.0 (tpm-crb").click();
    h.run();
    h.get_by_label_contains("Windows 11 refuses to install without TPM 2.0");
    h.get_by_label("Windows 10").click();
    h.run();
    assert!(
        h.query_by_label_contains("TPM 2.0 (tpm-crb").is_none(),
        "no TPM for 10"
    );
    h.get_by_label("Next").click();
    h.run();
    assert_eq!(h.state().state.wizard.step, Step::Review);
    h.get_by_label_contains("<hostdev mode='subsystem' type='pci' managed='yes'>");

    h.get_by_label("Validate").click();
    settle(&mut h);
    let (_, pre) = h.state().wizard.preflight.clone().unwrap();
    let pre = pre.unwrap();
    let ids: Vec<&str> = pre.findings.iter().map(|f| f.id.as_str()).collect();
    for id in [
        "preflight.schema",
        "preflight.trial",
        "preflight.hostdev",
        "preflight.network",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    // This host has 1 GiB pages reserved: the memory is checked against them.
    assert!(
        ids.contains(&"preflight.hugepages") || ids.contains(&"preflight.memory"),
        "{ids:?}"
    );
    // The same preflight as `domain validate`: the page lists its findings.
    h.get_by_label_contains("trial start");
    if std::env::var_os("CI").is_some() {
        h.get_by_label("libvirt's domain schema accepts it");
    }

    h.get_by_label("Define in libvirt").click();
    settle(&mut h);
    h.get_by_label("Defined 'win11'.");
    // The VM's buttons, with its state read live from libvirt.
    h.get_by_label("Start");
    h.get_by_label("Force off");

    h.get_by_label("Save XML").click();
    h.run();
    let saved = std::fs::read_to_string(&save_path).unwrap();
    let doc = Document::parse(&saved).unwrap();
    assert_eq!(doc.root.child("name").unwrap().text(), "win11");
    assert!(doc.root.child("devices").unwrap().child("tpm").is_none());
    h.get_by_label_contains("Saved to");
}

#[test]
fn wizard_says_why_it_cannot_build_and_recovers() {
    let host = crate::support::hosts::good_host();
    let mut h = wizard_harness(
        host.path(),
        WizardState {
            uri: "test:///default".into(),
            step: Step::Cpu,
            disk: "/var/lib/libvirt/images/win11.qcow2".into(),
            ..WizardState::default()
        },
        VmModel {
            gpu: Some("0000:0b:00.0".into()),
            install_iso: "/srv/Win11.iso".into(),
            ..VmModel::default()
        },
    );
    h.state_mut().state.board.set_vcpus(64);
    settle(&mut h);
    h.get_by_label_contains("Cannot build the VM yet");
    h.state_mut().state.board.set_vcpus(4);
    h.run();
    assert!(
        h.query_by_label_contains("Cannot build the VM yet")
            .is_none()
    );
    // A define that libvirt refuses shows libvirt's message and what to try.
    h.state_mut().state.wizard.uri = "qemu+unix:///system?socket=/nonexistent".into();
    h.state_mut().state.wizard.step = Step::Review;
    settle(&mut h);
    h.get_by_label("Define in libvirt").click();
    settle(&mut h);
    h.get_by_label_contains("Define failed:");
    h.get_by_label_contains("what to try");
}

/// A VM with no disk cannot get past Storage, and the Review says why; the
/// memory default follows the host (16 GiB did not fit a 7 GiB host).
#[test]
fn no_disk_no_review_and_memory_fits_the_host() {
    let host = crate::support::hosts::good_host();
    let mut h = wizard_harness(
        host.path(),
        WizardState {
            uri: "test:///default".into(),
            step: Step::Storage,
            create_disk: false,
            ..WizardState::default()
        },
        VmModel::default(),
    );
    settle(&mut h);
    h.get_by_label_contains("The VM needs a disk");
    h.get_by_label("Next").click();
    h.run();
    assert_eq!(
        h.state().state.wizard.step,
        Step::Storage,
        "Next is off without a disk"
    );
    h.state_mut().state.wizard.step = Step::Review;
    h.run();
    h.get_by_label_contains("The VM has no disk");
    assert!(h.query_by_label("Define in libvirt").is_none());
    let snap = scan(&HostRoot::at(host.path())).unwrap();
    let total = snap.kernel.mem_total_kib;
    let gib = h.state().state.vm.memory_for(total);
    match total {
        Some(t) => assert!(
            gib * 1024 * 1024 <= t / 2 + 1024 * 1024,
            "{gib} GiB on {t} kB"
        ),
        None => assert_eq!(gib, 8),
    }
    assert_eq!(
        vfio_assistant::ui::wizard_state::default_memory_gib(Some(7 * 1024 * 1024)),
        3
    );
}

#[test]
fn browse_opens_a_file_dialog_or_says_why_not() {
    let host = crate::support::hosts::good_host();
    let mut h = wizard_harness(
        host.path(),
        WizardState {
            uri: "test:///default".into(),
            step: Step::Storage,
            create_disk: false,
            ..WizardState::default()
        },
        VmModel::default(),
    );
    settle(&mut h);
    h.get_all_by_label("Browse…").next().unwrap().click();
    settle(&mut h);
    // No desktop portal here (tests run without a session bus): the field
    // stays empty and the page says what to do instead.
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() {
        assert!(h.state().state.wizard.disk.is_empty());
        h.get_by_label_contains("this desktop has no xdg-desktop-portal");
    }
}

#[test]
fn the_disk_bus_choice_reaches_the_xml() {
    let host = crate::support::hosts::good_host();
    let mut h = wizard_harness(
        host.path(),
        WizardState {
            uri: "test:///default".into(),
            step: Step::Storage,
            disk: "/dev/nvme1n1".into(),
            ..WizardState::default()
        },
        VmModel {
            gpu: Some("0000:0b:00.0".into()),
            install_iso: "/srv/Win11.iso".into(),
            virtio_iso: "/srv/virtio-win.iso".into(),
            ..VmModel::default()
        },
    );
    settle(&mut h);
    h.get_by_label("virtio-scsi").click();
    h.run();
    h.state_mut().state.wizard.step = Step::Review;
    settle(&mut h);
    h.get_by_label_contains("<controller type='scsi' index='0' model='virtio-scsi'>");
    h.get_by_label_contains("<target dev='sda' bus='scsi'/>");
}
