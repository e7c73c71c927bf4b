//! "Install Windows for me" in the window, through the accessibility tree:
//! the box ticked on the Storage step, the account refused until it is one
//! Windows takes, the account and password typed, Define building the
//! answer media from the user's ISOs (a Windows-like and a virtio-win-like
//! disc made by the real tools) and defining the domain with it; the
//! password never saved with the app's state; the Monitor showing the
//! install's buttons, and the Overview its "Inside the VM" card.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use vfio_assistant::host::scan;
use vfio_assistant::install::iso::IsoImage;
use vfio_assistant::install::test_media::{virtio_iso, windows_iso};
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};
use vfio_assistant::ui::vm_model::VmModel;
use vfio_assistant::ui::wizard_state::{Step, WizardState};

const GPU: &str = "0000:0b:00.0";

fn settle(h: &mut Harness<'static, App>) {
    // Up to two minutes: a start on qemu:///system presses Enter for 20 s.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while h.state().is_busy() || std::time::Instant::now() < end {
        h.step();
        if !h.state().is_busy() {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "a job did not finish in 2 minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A few frames, not `run`: a VM's state is read again on a timer, and its
    // spinner never lets a frame settle.
    h.run_steps(3);
}

fn type_into(h: &mut Harness<'static, App>, role: Role, label: &str, text: &str) {
    h.get_by_role_and_label(role, label).focus();
    h.run();
    h.get_by_role_and_label(role, label).type_text(text);
    h.run();
}

/// The wizard at `step` on the captured X570 host with `vm`, its jobs settled.
fn wizard_at(step: Step, vm: VmModel) -> (tempfile::TempDir, Harness<'static, App>) {
    let host = crate::support::hosts::good_host();
    let snap = scan(&HostRoot::at(host.path())).unwrap();
    let state = State {
        page: Page::NewVm,
        wizard: WizardState {
            uri: "test:///default".into(),
            disk: "/var/lib/libvirt/images/win11.qcow2".into(),
            create_disk: false,
            step,
            ..WizardState::default()
        },
        vm,
        ..State::default()
    };
    let app = App::with_snapshot(snap, state);
    let mut h = crate::support::gui::harness(app, [1200.0, 1000.0]);
    h.run();
    settle(&mut h);
    (host, h)
}

#[test]
fn install_windows_for_me_defines_the_vm_with_its_answer_media() {
    let media = tempfile::tempdir().unwrap();
    let win = windows_iso(media.path(), &[("Windows 11 Pro", "Professional", 26100)]);
    let virtio = virtio_iso(media.path(), &["w11"], true);
    let vm = VmModel {
        gpu: Some(GPU.into()),
        install_iso: win.display().to_string(),
        virtio_iso: virtio.display().to_string(),
        ..VmModel::default()
    };
    let (_host, mut h) = wizard_at(Step::Storage, vm);
    h.get_by_label("Install Windows for me").click();
    h.run();
    assert!(h.state().state.vm.unattended);
    // The ISO is read: what it will install is said before anything is built.
    settle(&mut h);
    h.get_by_label("Windows 11 Pro (build 26100) will be installed");
    // No account yet: the Storage step says so, and the Review blocks.
    h.get_by_label("No Windows account name Windows accepts.");
    type_into(&mut h, Role::TextInput, "Windows account", "Ada");
    // A screen reader hears it as a password field.
    type_into(&mut h, Role::PasswordInput, "Password", "correct horse");
    assert!(
        h.query_by_label("No Windows account name Windows accepts.")
            .is_none()
    );
    assert_eq!(h.state().state.vm.win_password.0, "correct horse");
    // The password is not in what the app saves.
    let saved = serde_json::to_string(&h.state().state).unwrap();
    assert!(
        !saved.contains("correct horse"),
        "the password is not saved"
    );
    assert!(saved.contains("\"win_user\":\"Ada\""), "the account is");

    h.state_mut().state.wizard.step = Step::Review;
    h.run();
    h.get_by_label("Define in libvirt").click();
    settle(&mut h);
    h.get_by_label("Defined 'win11'.");
    let answer = media.path().join("win11-answer.iso");
    let m = IsoImage::open(&answer).expect("Define built the answer media beside the installer");
    let xml = String::from_utf8(m.read("/autounattend.xml", 1 << 20).unwrap()).unwrap();
    assert!(xml.contains("<Name>Ada</Name>") && xml.contains("correct horse"));
    assert!(
        m.exists("/$WinPEDriver$/viostor/viostor.inf"),
        "virtio disk: viostor"
    );
    // The VM's controls carry the install's two buttons.
    h.get_by_label("How far is it?");
    h.get_by_label("Take the install media out");
    // The Monitor shows the install; the Overview can look inside the VM.
    h.get_by_label("Monitor").click();
    h.run_steps(3);
    h.get_by_label("Unattended install of 'win11'");
    h.get_by_label("Overview").click();
    h.run_steps(3);
    h.get_by_label("Look inside 'win11'");
}

#[test]
fn a_disc_that_is_not_windows_is_refused_at_define_and_nothing_is_left() {
    let media = tempfile::tempdir().unwrap();
    let virtio = virtio_iso(media.path(), &["w11"], true);
    let vm = VmModel {
        gpu: Some(GPU.into()),
        // The driver disc given as the installer: a common slip.
        install_iso: virtio.display().to_string(),
        virtio_iso: virtio.display().to_string(),
        unattended: true,
        win_user: "Ada".into(),
        ..VmModel::default()
    };
    let (_host, mut h) = wizard_at(Step::Storage, vm);
    // The Storage step says it at once, from the disc itself.
    h.get_by_label_contains("the virtio-win driver disc");
    h.state_mut().state.wizard.step = Step::Review;
    h.run();
    h.get_by_label("Define in libvirt").click();
    settle(&mut h);
    h.get_by_label_contains("Define failed:");
    let said = match &h.state().wizard.defined {
        Some(Err(e)) => e.clone(),
        other => panic!("{other:?}"),
    };
    assert!(said.contains("the virtio-win driver disc"), "{said}");
    let left: Vec<_> = std::fs::read_dir(media.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("answer"))
        .collect();
    assert!(left.is_empty(), "nothing half-made: {left:?}");
}

#[test]
fn without_a_virtio_disc_the_step_offers_to_fetch_one_beside_the_installer() {
    use vfio_assistant::ui::views::wizard::virtio_source::download_target;
    let vm = VmModel {
        install_iso: "/home/ada/isos/Win11.iso".into(),
        ..VmModel::default()
    };
    assert_eq!(download_target(&vm), "/home/ada/isos/virtio-win.iso");
    let (_host, h) = wizard_at(Step::Storage, vm);
    // Offered, never started by itself: nothing runs until the click.
    h.get_by_label("Download virtio-win from Fedora (about 700 MB)");
    assert!(!h.state().wizard.virtio_fetch.job.is_busy());
}

/// The same in the window on qemu:///system, as a user on this machine: the
/// live host's scan, Define (the preflight's trial included), Start (Enter
/// pressed through QMP), the install media taken out, Force off.
#[test]
fn on_qemu_system_the_window_defines_starts_and_finishes_the_install() {
    use crate::support::vm::{Cleanup, make_test_disk, system, test_disk_path, test_name};
    let Some(hv) = system() else { return };
    let name = test_name("gui-unattended");
    let _guard = Cleanup(&hv, name.clone());
    let disk = make_test_disk(&name);
    let media = test_disk_path(&name)
        .parent()
        .unwrap()
        .join(format!("{name}-media"));
    std::fs::create_dir_all(&media).unwrap();
    let win = windows_iso(&media, &[("Windows 11 Pro", "Professional", 26100)]);
    let virtio = virtio_iso(&media, &["w11"], true);
    let snap = scan(&HostRoot::live()).unwrap();
    let mut state = State {
        page: Page::NewVm,
        wizard: WizardState {
            uri: "qemu:///system".into(),
            disk: disk.display().to_string(),
            create_disk: false,
            no_passthrough: true,
            step: Step::Review,
            ..WizardState::default()
        },
        vm: VmModel {
            name: name.clone(),
            memory_gib: 1,
            install_iso: win.display().to_string(),
            virtio_iso: virtio.display().to_string(),
            unattended: true,
            win_user: "Ada".into(),
            ..VmModel::default()
        },
        ..State::default()
    };
    state.vm.win_password.0 = "pw".into();
    state.board.set_vcpus(1);
    let app = App::with_snapshot(snap, state);
    let mut h = crate::support::gui::harness(app, [1200.0, 1000.0]);
    h.run();
    settle(&mut h);
    h.get_by_label("Define in libvirt").click();
    settle(&mut h);
    if h.query_by_label(&format!("Defined '{name}'.")).is_none() {
        panic!(
            "{:?}",
            h.state().wizard.defined.as_ref().map(|r| r.as_ref().err())
        );
    }
    let answer = media.join(format!("{name}-answer.iso"));
    assert!(answer.exists(), "the answer media beside the installer");
    h.get_by_label("Start").click();
    settle(&mut h);
    if h.query_by_label("It is running.").is_none() {
        panic!("{:?}", h.state().wizard.vm.done);
    }
    h.get_by_label_contains("Unattended install: pressed Enter");
    h.get_by_label("Take the install media out").click();
    settle(&mut h);
    h.get_by_label_contains("Took 3 install CDs out");
    assert!(!answer.exists(), "the answer media is deleted");
    h.get_by_label("Force off").click();
    settle(&mut h);
    let _ = std::fs::remove_dir_all(&media);
}
