//! The app's pages, driven through the accessibility tree (egui_kittest) on
//! real hosts: what a user looks for is there, and the controls work.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The app on a source, run until its background scan has landed.
fn harness_for(source: Source, page: Page) -> Harness<'static, App> {
    let state = State {
        page,
        ..State::default()
    };
    let app = App::with_source(source, state, || {});
    let mut h = crate::support::gui::harness(app, [1200.0, 900.0]);
    for _ in 0..500 {
        h.step();
        if h.state().snapshot.is_some() || h.state().error.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    h.run();
    assert!(
        h.state().snapshot.is_some(),
        "scan did not finish: {:?}",
        h.state().error
    );
    h
}

fn harness_on_snapshot(root: &Path, page: Page) -> Harness<'static, App> {
    let snap = scan(&HostRoot::at(root)).unwrap();
    let app = App::with_snapshot(
        snap,
        State {
            page,
            ..State::default()
        },
    );
    let mut h = Harness::builder()
        .with_size([1200.0, 900.0])
        .build_ui_state(|ui, app: &mut App| app.ui_content(ui), app);
    h.run();
    h
}

#[test]
fn overview_explains_the_demo_host_and_links_to_its_gpu() {
    let mut h = harness_for(Source::Demo, Page::Overview);
    h.get_by_label_contains("39 IOMMU groups. A group is the smallest set");
    h.get_by_label_contains("AMD-V: the CPU can run virtual machines");
    // The checks, as a traffic-light list.
    h.get_by_label_contains("0 failed");
    h.get_by_label("AMD-V available");
    h.get_by_label_contains("0000:0b:00.0  NVIDIA GP102 [GeForce GTX 1080 Ti]")
        .click();
    h.run();
    assert_eq!(h.state().state.page, Page::Devices);
    h.get_by_label_contains("Group 30");
    // The verdict, and the device shown from the Overview opens with its
    // details (where the verdict's reason is said again) and its actions.
    assert!(
        h.get_all_by_label_contains("can be passed through together with 0b:00.1")
            .count()
            >= 1
    );
    h.get_by_label("Shares its group with");
    h.get_by_label("Bind to vfio-pci…");
    h.get_by_label("Pass through in a new VM").click();
    h.run();
    assert_eq!(h.state().state.page, Page::NewVm);
    assert_eq!(h.state().state.vm.gpu.as_deref(), Some("0000:0b:00.0"));
}

#[test]
fn devices_page_shows_groups_verdicts_and_filters() {
    let mut h = harness_for(Source::Demo, Page::Devices);
    h.get_by_label_contains("Group 30 — NVIDIA GP102 [GeForce GTX 1080 Ti]");
    h.get_by_label_contains("Group 15 — AMD FCH SMBus Controller");
    assert!(
        h.query_by_label_contains("passthrough: blocked").is_some(),
        "the SMBus group's verdict is in its header"
    );
    // Bridges-only groups are hidden until asked for.
    assert!(h.query_by_label_contains("Group 0 —").is_none());
    h.get_by_label("Show bridges").click();
    h.run();
    h.get_by_label_contains("Group 0 —");
    // Search narrows the list.
    h.state_mut().state.device_filter = "realtek".into();
    h.run();
    h.get_by_label_contains("Group 29 — Realtek");
    assert!(h.query_by_label_contains("Group 30").is_none());
    h.get_by_label("Clear").click();
    h.run();
    h.get_by_label_contains("Group 30");
}

#[test]
fn cpu_page_draws_hybrid_cores() {
    let h = harness_on_snapshot(
        &fixture("topology/hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"),
        Page::Cpu,
    );
    h.get_by_label_contains("Hybrid CPU: 6 P-cores");
    h.get_by_label_contains("8 E-cores");
    h.get_by_label("CPU 19");
    h.get_by_label("Core 0-1 (P-core)");
    h.get_by_label_contains("L3 group #0 (24 MiB)");
}

#[test]
fn cpu_page_handles_128_cpus_and_offline_cpus() {
    let h = harness_on_snapshot(
        &fixture("topology/hwloc-128arm-2pa2n8cluster4co"),
        Page::Cpu,
    );
    h.get_by_label("CPU 127");
    h.get_by_label("Package 8442");
    let h = harness_on_snapshot(&fixture("topology/hwloc-offline-cpu0-node0"), Page::Cpu);
    h.get_by_label_contains("Offline CPUs (no topology while offline): 0-3,21-23");
}

#[test]
fn a_host_without_iommu_says_so_on_every_page() {
    let mut h = harness_for(
        Source::Root(fixture("topology/ghw-amd-ryzen5-1600")),
        Page::Overview,
    );
    h.get_by_label_contains("IOMMU not active: no device can be passed through");
    // A failed check is open, with its evidence and fix.
    h.get_by_label("The kernel is not using the IOMMU (no IOMMU groups)");
    h.get_by_label_contains("Fix: Enable the IOMMU in the firmware; AMD kernels");
    h.get_by_label("Devices").click();
    h.run();
    h.get_by_label_contains("This host has no active IOMMU");
    h.get_by_label_contains("Turks XT [Radeon HD 6670/7670]");
}

#[test]
fn a_finding_expands_to_evidence_why_and_fix() {
    let mut h = harness_for(Source::Demo, Page::Overview);
    assert!(
        h.query_by_label_contains("Why: Backing the VM with hugepages")
            .is_none(),
        "closed at first"
    );
    h.get_by_label("No hugepages reserved").click();
    h.run();
    h.get_by_label_contains("Why: Backing the VM with hugepages");
    h.get_by_label_contains("Fix: For a 16 GiB VM");
    h.get_by_label_contains("/sys/kernel/mm/hugepages = no pools");
}

#[test]
fn a_bad_root_shows_an_error_not_a_crash() {
    let state = State::default();
    let mut app = App::with_source(Source::Root("/no/such/host".into()), state, || {});
    for _ in 0..200 {
        app.poll();
        if !app.is_scanning() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut h = Harness::builder().build_ui_state(|ui, app: &mut App| app.ui_content(ui), app);
    h.run();
    h.get_by_label_contains("Could not read the host: /no/such/host: not a directory");
}

#[test]
fn cpu_page_plans_pinning_and_marks_the_chips() {
    let mut h = harness_on_snapshot(&fixture("topology/ghw-amd-ryzen5-1600"), Page::Cpu);
    assert!(h.query_by_label("CPU 1 v0").is_none());
    // One board: choose the vCPU count, let the planner fill it.
    h.state_mut().state.board.set_vcpus(4);
    h.run();
    h.get_by_label("Fill the board from the planner").click();
    h.run();
    // Ryzen siblings are N and N+6: vCPUs 0/1 on CPUs 1/7, the emulator on core 0.
    h.get_by_label("CPU 1 v0");
    h.get_by_label("CPU 7 v1");
    h.get_by_label_contains("CPU 0 emu");
    h.get_by_label_contains("CPU 6 emu");
    // The planner says why; moving a chip by hand makes that stale, so it goes.
    h.get_by_label("Why the planner placed them so").click();
    h.run();
    h.get_by_label_contains("share one 8 MiB L3");
    h.get_by_label("The board as XML, kernel line, and apply to a domain")
        .click();
    h.run();
    h.get_by_label_contains("<vcpupin vcpu='0' cpuset='1'/>");
    h.get_by_label_contains("isolcpus=managed_irq,domain,1-2,7-8");
    h.state_mut()
        .state
        .board
        .place(vfio_assistant::pinning::board::Chip::Vcpu(0), 3);
    h.run();
    assert!(h.query_by_label("Why the planner placed them so").is_none());
    h.get_by_label("Clear board").click();
    h.run();
    assert!(h.query_by_label("CPU 1 v0").is_none());
}

#[test]
fn devices_page_checks_a_cards_rom() {
    // A captured host whose GTX 1080 Ti ROM file holds a real option ROM with
    // a UEFI x64 image (iPXE's, vendor 1af4: not NVIDIA's).
    let host = crate::support::hosts::good_host();
    std::fs::copy(
        fixture("roms/efi-virtio.rom"),
        host.path().join("sys/bus/pci/devices/0000:0b:00.0/rom"),
    )
    .unwrap();
    let mut h = harness_for(Source::Root(host.path().to_path_buf()), Page::Devices);
    let buttons = h.get_all_by_label("Check its ROM").count();
    assert_eq!(buttons, 2, "one per GPU (GTX 1080 Ti, GT 710)");
    h.get_all_by_label("Check its ROM").next().unwrap().click();
    for _ in 0..300 {
        h.step();
        if !h.state().devices.rom_findings.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    h.run();
    let f = h
        .state()
        .devices
        .rom_findings
        .get("0000:0b:00.0")
        .cloned()
        .unwrap();
    assert_eq!(f.id, "device.rom");
    assert!(f.title.contains("another vendor"), "{f:?}");
    h.get_by_label_contains("is for another vendor's card");
}
