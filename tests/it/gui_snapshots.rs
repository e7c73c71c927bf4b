//! Every page of the app as a picture, compared with the one kept in
//! `tests/snapshots/` (egui_kittest renders through wgpu on Mesa's software
//! Vulkan, lavapipe: no display, no GPU). A layout that moves, text that
//! shrinks or a page that stops drawing fails here; a changed page is
//! renewed with `UPDATE_SNAPSHOTS=1 cargo test --test it gui_snapshots`
//! and looked at before it is committed.

use crate::support::gui::{wait_for, wgpu_harness};
use egui_kittest::kittest::Queryable;
use egui_kittest::{Harness, SnapshotOptions, SnapshotResults};
use vfio_assistant::pinning::board::Board;
use vfio_assistant::pinning::{PinRequest, plan};
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

/// Antialiased edges may land a shade apart on another CPU's lavapipe; a
/// moved widget or a line of text changes thousands of pixels.
fn options() -> SnapshotOptions {
    SnapshotOptions::new()
        .output_path(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots"))
        .threshold(0.6)
        .max_failed_pixels(400)
}

/// The demo app with `state`, its scan and every page job landed.
fn demo(state: State) -> Harness<'static, App> {
    let app = App::with_source(Source::Demo, state, || {});
    let mut h = wgpu_harness(app, [1280.0, 800.0]);
    settle(&mut h);
    h
}

/// Step until the scan is in and nothing runs, for a few frames in a row.
fn settle(h: &mut Harness<'static, App>) {
    wait_for(h, 60, |a| {
        a.snapshot.is_some() && !a.is_scanning() && !a.is_busy()
    });
}

fn on(page: Page) -> State {
    State {
        page,
        ..State::default()
    }
}

#[test]
fn every_page_of_the_demo_looks_as_kept() {
    let o = options();
    // One set of results for every harness: all pictures are compared (and
    // renewed) before the test says which differ.
    let mut results = SnapshotResults::new();
    let mut h = demo(on(Page::Overview));
    h.snapshot_options("overview", &o);

    // Devices, the GTX 1080 Ti shown from the Overview: its details open.
    h.get_by_label_contains("0000:0b:00.0  NVIDIA GP102")
        .click();
    settle(&mut h);
    h.snapshot_options("devices-details", &o);
    results.extend_harness(&mut h);

    // The CPU page with the planner's board for 6 vCPUs, and its legend.
    let mut cpu = on(Page::Cpu);
    {
        let snap =
            vfio_assistant::host::scan(&vfio_assistant::demo::unpack_demo().unwrap().0).unwrap();
        let req = PinRequest {
            vcpus: 6,
            amd: true,
            ..PinRequest::default()
        };
        cpu.board = Board::from_plan(&plan(&snap.topology, &req).unwrap());
    }
    let mut h = demo(cpu);
    h.snapshot_options("cpu-board", &o);
    results.extend_harness(&mut h);

    let mut h = demo(on(Page::NewVm));
    h.snapshot_options("new-vm", &o);
    results.extend_harness(&mut h);

    // The Storage step with "Install Windows for me" ticked: the account,
    // the password (dots), the Looking Glass installer with Looking Glass on.
    let mut unattended = on(Page::NewVm);
    unattended.wizard.step = vfio_assistant::ui::wizard_state::Step::Storage;
    unattended.wizard.looking_glass = true;
    unattended.vm.install_iso = "/home/ada/Downloads/Win11_24H2_English_x64.iso".into();
    unattended.vm.virtio_iso = "/home/ada/Downloads/virtio-win-0.1.266.iso".into();
    unattended.vm.unattended = true;
    unattended.vm.win_user = "ada".into();
    unattended.vm.win_password.0 = "correct horse".into();
    let mut h = demo(unattended);
    h.snapshot_options("new-vm-unattended", &o);
    results.extend_harness(&mut h);

    let mut t = on(Page::Troubleshoot);
    t.symptom = Some("stutter".into());
    let mut h = demo(t);
    h.snapshot_options("troubleshoot-stutter", &o);
    results.extend_harness(&mut h);

    let mut h = demo(on(Page::Monitor));
    h.snapshot_options("monitor", &o);
    results.extend_harness(&mut h);

    let mut tuning = on(Page::Tuning);
    tuning.tuning.gpus = vec!["0000:0b:00.0".into()];
    tuning.board.set_vcpus(6);
    tuning.vm.memory_gib = 8;
    tuning.tuning.reserve_hugepages = true;
    let mut h = demo(tuning);
    h.snapshot_options("tuning-plan", &o);
    results.extend_harness(&mut h);
    results.unwrap();
}

/// The Tuning page on a captured host (a real X570 host's tree in a
/// temporary root) before Apply and after it, with the helper run directly
/// on that root. After Apply the page names the transaction and its time,
/// which differ every run: that picture allows their few thousand pixels.
#[test]
fn the_tuning_page_before_and_after_apply_looks_as_kept() {
    let dir = crate::support::tuning::runtime_host();
    let mut app = crate::support::tuning::tuning_app(dir.path(), &[]);
    app.set_source_label("captured host (X570, temporary root)");
    let mut h = wgpu_harness(app, [1280.0, 1100.0]);
    let settled = |h: &mut Harness<'static, App>| {
        wait_for(h, 60, |a| {
            a.snapshot.is_some()
                && a.tuning.facts.is_some()
                && !a.tuning.is_running()
                && !a.is_busy()
        });
    };
    settled(&mut h);
    h.snapshot_options("tuning-before-apply", &options());
    h.get_by_label("Apply to this captured host's files")
        .click();
    settled(&mut h);
    h.get_by_label_contains("Applied (");
    h.snapshot_options("tuning-after-apply", &options().max_failed_pixels(6000));
}

/// An app on a tree, labelled so the picture does not hold its temp path.
fn on_root(root: &std::path::Path, label: &str, state: State) -> Harness<'static, App> {
    let mut app = App::with_source(Source::Root(root.into()), state, || {});
    app.set_source_label(label);
    let mut h = wgpu_harness(app, [1280.0, 800.0]);
    settle(&mut h);
    h
}

/// Three hosts besides the demo, each a real machine's tree: one with
/// nothing to pass through (a 4-socket server's topology: no PCI devices,
/// no IOMMU), where every page must say why it is empty and what to do; a
/// laptop whose only GPU is the one it displays on; and a real TRX40
/// Threadripper listing set up wrong, as a user's live host would be, where
/// failures come first with their buttons.
#[test]
fn an_empty_host_a_laptop_and_a_host_set_up_wrong_look_as_kept() {
    let o = options();
    let mut results = SnapshotResults::new();
    let fixture = |name: &str| {
        let dir = tempfile::tempdir().unwrap();
        crate::support::tree::copy_tree(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/topology")
                .join(name),
            dir.path(),
        );
        dir
    };
    let hosts = [
        (
            "hwloc-16em64t-4s2c2t",
            "a server without GPUs (captured)",
            &[
                (Page::Overview, "empty-overview"),
                (Page::Devices, "empty-devices"),
                (Page::NewVm, "empty-new-vm"),
            ][..],
        ),
        (
            "ghw-intel-i7-1270P",
            "a laptop with one iGPU (i7-1270P, captured)",
            &[
                (Page::Overview, "laptop-overview"),
                (Page::Tuning, "laptop-tuning"),
            ][..],
        ),
    ];
    for (name, label, pages) in hosts {
        let dir = fixture(name);
        for (page, picture) in pages {
            let mut h = on_root(dir.path(), label, on(*page));
            h.snapshot_options(*picture, &o);
            results.extend_harness(&mut h);
        }
    }
    // A Debian 12 host as the real-host run boots it (QEMU: a USB keyboard
    // and mouse, a boot GPU and the VM's GPU): the New VM's "Use it" step
    // with its keyboard and mouse, and single-GPU's checks on the Tuning
    // page for the boot GPU.
    let e2e = tempfile::tempdir().unwrap();
    crate::support::tree::copy_tree(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hosts/e2e-debian12-grub"),
        e2e.path(),
    );
    let mut s = on(Page::NewVm);
    s.wizard.step = vfio_assistant::ui::wizard_state::Step::UseIt;
    s.wizard.looking_glass = true;
    s.wizard.sound = true;
    let label = "Debian 12 in QEMU (captured by scripts/e2e)";
    let mut h = on_root(e2e.path(), label, s);
    h.snapshot_options("e2e-new-vm-use-it", &o);
    results.extend_harness(&mut h);
    let mut s = on(Page::Tuning);
    s.tuning.single_gpu_vm = "win11".into();
    let mut h = on_root(e2e.path(), label, s);
    wait_for(&mut h, 60, |a| {
        a.tuning.single_gpu.is_some() && a.tuning.facts.is_some()
    });
    h.snapshot_options("e2e-tuning-single-gpu", &o);
    results.extend_harness(&mut h);
    // The second card shared: the desktop keeps it while the VM is off.
    let mut s = on(Page::Tuning);
    s.tuning.gpus = vec!["0000:01:00.0".into()];
    s.tuning.shared_gpu_vm = "win11".into();
    s.tuning.shared_stop = "ollama".into();
    let mut h = on_root(e2e.path(), label, s);
    wait_for(&mut h, 60, |a| a.tuning.facts.is_some());
    settle(&mut h);
    h.get_by_label_contains("Shared GPU 0000:01:00.0 for 'win11'");
    h.get_by_label_contains("Keep the desktop off 0000:01:00.0");
    h.get_by_label_contains("--shared-gpu win11 --shared-stop ollama.service");
    h.snapshot_options("e2e-tuning-shared-gpu", &o);
    results.extend_harness(&mut h);
    // The desktop most gamers bought: a Ryzen 7000 with its Raphael iGPU
    // and an RTX 4070, the monitor in the card (its boot GPU): the step
    // moves the screen to the iGPU, the card is the VM's.
    {
        use crate::support::desktops::{AM5_CARD, am5};
        let desk = am5((0x1002, 0x164e), (0x10de, 0x2786, "nvidia"), AM5_CARD);
        let mut h = on_root(
            desk.path(),
            "Ryzen 5 7600X + RTX 4070 desktop (a real AM5 tree)",
            on(Page::Overview),
        );
        h.get_by_label_contains("Move the host's screen to the AMD/ATI Raphael");
        h.snapshot_options("desktop-igpu-card-overview", &o);
        results.extend_harness(&mut h);
    }
    let bad = crate::support::hosts::bad_host();
    let mut h = on_root(
        bad.path(),
        "TRX40 host set up wrong (captured)",
        on(Page::Overview),
    );
    h.snapshot_options("wrong-overview", &o);
    results.extend_harness(&mut h);
    let mut t = on(Page::Troubleshoot);
    t.symptom = Some("stutter".into());
    let mut h = on_root(bad.path(), "TRX40 host set up wrong (captured)", t);
    h.snapshot_options("wrong-troubleshoot-stutter", &o);
    results.extend_harness(&mut h);
    results.unwrap();
}

/// The Overview after a power cut in the middle of an apply: the next step
/// is to restore the host, with its button. The transaction's id (its time)
/// is in the picture: those few pixels are allowed.
#[test]
fn an_interrupted_tuning_on_the_overview_looks_as_kept() {
    use vfio_assistant::sysroot::HostRoot;
    use vfio_assistant::tuning::apply::{Env, apply};
    let dir = crate::support::tuning::runtime_host();
    let root = HostRoot::at(dir.path());
    let req = vfio_assistant::tuning::model::Request {
        gpus: vec!["0b:00.0".parse().unwrap()],
        vcpus: Some(4),
        memory_mib: Some(1024),
        ..Default::default()
    };
    let facts = vfio_assistant::tuning::facts::gather(&root);
    let p = vfio_assistant::tuning::plan::plan(
        &vfio_assistant::host::scan(&root).unwrap(),
        &facts,
        &req,
    )
    .unwrap();
    let mut e = Env::new(root, None, false);
    e.crash_at = Some(3);
    apply(&e, &facts, &p, &req, &mut |_| {}).unwrap();
    let mut h = on_root(
        dir.path(),
        "X570 host after a power cut (captured)",
        on(Page::Overview),
    );
    h.snapshot_options("interrupted-overview", &options().max_failed_pixels(4000));
}
