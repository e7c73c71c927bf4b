//! The New VM page is `domain new` (docs/cli.md says so): the same choices
//! through the window and through the command line write the same domain —
//! a virtio disk and both CD-ROMs, the installer and the drivers. And the
//! page does not define what could not install or pass through: no GPU, no
//! installer for a new disk, a virtio disk without its drivers each block
//! the Review with a way back to the step that gives it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use std::process::Command;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};
use vfio_assistant::ui::vm_model::VmModel;
use vfio_assistant::ui::wizard_state::{Step, WizardState};

const DISK: &str = "/var/lib/libvirt/images/win11.qcow2";
const ISO: &str = "/srv/Win11.iso";
const VIRTIO: &str = "/srv/virtio-win.iso";
const GPU: &str = "0000:0b:00.0";

fn harness(dir: &std::path::Path, state: State) -> Harness<'static, App> {
    let snap = scan(&HostRoot::at(dir)).unwrap();
    let mut h = crate::support::gui::harness(App::with_snapshot(snap, state), [1200.0, 900.0]);
    crate::support::gui::wait_for(&mut h, 30, |a| !a.is_busy());
    h
}

fn wizard(w: WizardState, vm: VmModel) -> State {
    State {
        page: Page::NewVm,
        wizard: WizardState {
            uri: "test:///default".into(),
            ..w
        },
        vm,
        ..State::default()
    }
}

/// The XML the Review shows.
fn shown_xml(h: &Harness<'static, App>) -> String {
    let n = h.get_by_label_contains("<domain type='kvm'");
    let a = n.accesskit_node();
    a.label().or_else(|| a.value()).unwrap_or_default()
}

#[test]
fn the_page_and_domain_new_write_the_same_domain() {
    let host = crate::support::hosts::good_host();
    let mut h = harness(
        host.path(),
        wizard(
            WizardState {
                step: Step::Review,
                disk: DISK.into(),
                ..WizardState::default()
            },
            VmModel {
                gpu: Some(GPU.into()),
                memory_gib: 8,
                install_iso: ISO.into(),
                virtio_iso: VIRTIO.into(),
                ..VmModel::default()
            },
        ),
    );
    h.run();
    let page = shown_xml(&h);
    let root = host.path().to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args([
            "--root",
            root,
            "domain",
            "new",
            "--connect",
            "test:///default",
            "--no-trial",
            "--name",
            "win11",
            "--gpu",
            GPU,
            "--vcpus",
            "4",
            "--memory",
            "8G",
            "--disk",
            DISK,
            "--iso",
            ISO,
            "--virtio-iso",
            VIRTIO,
        ])
        .output()
        .unwrap();
    let cli = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        cli.contains("<domain"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(page.trim(), cli.trim(), "the page and domain new differ");
    for want in [
        "bus='virtio'",
        &format!("<source file='{ISO}'/>"),
        &format!("<source file='{VIRTIO}'/>"),
    ] {
        assert!(page.contains(want), "{want} in the page's XML");
    }
}

/// Each missing piece is a blocker with its "Go to …" button; Define
/// appears only when none is left.
#[test]
fn the_wizard_cannot_define_without_installer_or_gpu() {
    let host = crate::support::hosts::good_host();
    let mut h = harness(
        host.path(),
        wizard(
            WizardState {
                step: Step::Review,
                disk: DISK.into(),
                ..WizardState::default()
            },
            VmModel::default(),
        ),
    );
    // Opened as the Overview's "Create the VM" opens it: with the VM's card.
    h.state_mut().state.page = Page::Overview;
    h.run();
    h.get_by_label("Create the VM").click();
    h.run();
    assert_eq!(h.state().state.page, Page::NewVm);
    assert_eq!(h.state().state.vm.gpu.as_deref(), Some(GPU));
    // No installer for the new disk: no Define, a way to Storage.
    h.get_by_label("No Windows installer ISO.");
    assert!(h.query_by_label("Define in libvirt").is_none());
    assert!(h.query_by_label("Validate").is_none());
    h.get_by_label("Go to Storage").click();
    // The Storage step asks libvirt where a new disk goes (a job): wait.
    crate::support::gui::wait_for(&mut h, 30, |a| !a.is_busy());
    assert_eq!(h.state().state.wizard.step, Step::Storage);
    // A virtio disk asked for, without its drivers: still blocked.
    h.state_mut().state.vm.install_iso = ISO.into();
    h.run_steps(4);
    h.get_by_label("virtio").click();
    h.run_steps(4);
    assert_eq!(
        h.state().state.wizard.disk_bus,
        Some(vfio_assistant::domain::template::DiskBus::Virtio)
    );
    h.state_mut().state.wizard.step = Step::Review;
    h.run();
    h.get_by_label("A virtio disk without the virtio-win driver ISO.");
    assert!(h.query_by_label("Define in libvirt").is_none());
    h.state_mut().state.vm.virtio_iso = VIRTIO.into();
    // No GPU: blocked again, until "No passthrough" is said.
    h.state_mut().state.vm.gpu = None;
    h.run();
    h.get_by_label("No GPU is chosen for the VM.");
    assert!(h.query_by_label("Define in libvirt").is_none());
    h.get_by_label("Go to GPU").click();
    h.run();
    h.get_by_label_contains("No passthrough: this VM").click();
    h.run();
    h.state_mut().state.wizard.step = Step::Review;
    h.run();
    h.get_by_label("Define in libvirt");
    h.get_by_label("Validate");
}

/// One VM across the pages: the vCPUs changed on the CPU page's board show
/// on the Tuning page and in the wizard (its CPU step and its XML), and the
/// GPU ticked on the Tuning page is the wizard's.
#[test]
fn the_pages_share_the_vm() {
    let host = crate::support::hosts::good_host();
    let mut h = harness(
        host.path(),
        State {
            page: Page::Cpu,
            ..State::default()
        },
    );
    // The board on the CPU page: 6 vCPUs, as a user sets them there.
    h.get_by_role_and_label(egui::accesskit::Role::SpinButton, "vCPUs for the VM")
        .set_value_accesskit(6.0);
    h.run();
    assert_eq!(h.state().state.board.vcpus, 6, "the board's count");
    // The Tuning page shows the board's vCPUs.
    h.get_by_label("Tuning").click();
    crate::support::gui::wait_for(&mut h, 30, |a| a.tuning.facts.is_some());
    let shown = h.get_by_role_and_label(egui::accesskit::Role::SpinButton, "vCPUs");
    assert_eq!(
        shown.value().as_deref(),
        Some("6"),
        "the Tuning page's vCPUs"
    );
    // A GPU ticked there is the VM's.
    h.get_by_label_contains("0000:0b:00.0  NVIDIA").click();
    h.run();
    assert_eq!(h.state().state.vm.gpu.as_deref(), Some(GPU));
    // The wizard: 6 vCPUs on its CPU step and in its XML, with that GPU.
    h.state_mut().state.wizard.step = Step::Cpu;
    h.get_by_label("New VM").click();
    h.run();
    let shown = h.get_by_role_and_label(egui::accesskit::Role::SpinButton, "vCPUs");
    assert_eq!(shown.value().as_deref(), Some("6"), "the wizard's vCPUs");
    h.get_by_label_contains("6 vCPUs pinned to CPUs");
    assert_eq!(h.state().state.vm.gpu.as_deref(), Some(GPU));
    // Renamed in the wizard, the Monitor offers to follow it by that name.
    let name = h.get_by_role_and_label(egui::accesskit::Role::TextInput, "New VM:");
    name.focus();
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.get_by_role_and_label(egui::accesskit::Role::TextInput, "New VM:")
        .type_text("gaming");
    h.run();
    assert_eq!(h.state().state.vm.name, "gaming");
    h.get_by_label("Monitor").click();
    h.run_steps(3);
    h.get_by_label("Follow 'gaming'");
}
