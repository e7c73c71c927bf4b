//! Shared GPU offered where it fits (issue 34), through the accessibility
//! tree: on the real booted host's capture (virtio-vga the desktop's, the
//! bochs VGA the second card) the Overview's next step binds the second card
//! and offers to share it instead; the button opens the Tuning page in
//! shared mode for the New VM page's VM, whose plan lends the card; the
//! Devices page offers it for the second card and never for the boot GPU;
//! the New VM page's GPU step names the mode chosen.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::gui::{harness, wait_for};
use egui_kittest::kittest::Queryable;
use vfio_assistant::ui::Source;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

const SHARE: &str = "Or share it: the desktop's while the VM is off";

fn e2e_host() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    crate::support::tree::copy_tree(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hosts/e2e-debian12-grub"),
        dir.path(),
    );
    dir
}

#[test]
fn the_next_step_offers_to_share_the_second_card_and_the_tuning_page_plans_it() {
    let dir = e2e_host();
    let app = App::with_source(Source::Root(dir.path().into()), State::default(), || {});
    let mut h = harness(app, [1280.0, 1600.0]);
    wait_for(&mut h, 60, |a| a.snapshot.is_some());
    h.run_steps(3);
    h.get_by_label("Bind it on the Tuning page");
    h.get_by_label(SHARE).click();
    h.run_steps(3);
    {
        let s = &h.state().state;
        assert_eq!(s.page, Page::Tuning);
        assert_eq!(s.vm.gpu.as_deref(), Some("0000:01:00.0"));
        assert_eq!(s.tuning.shared_gpu_vm, s.vm.name);
        assert!(s.tuning.single_gpu_vm.is_empty());
    }
    wait_for(&mut h, 60, |a| a.tuning.facts.is_some());
    h.run_steps(3);
    h.get_by_label_contains("Shared GPU 0000:01:00.0 for 'win11'");
    // The New VM page's GPU step says how the card is handed over.
    h.state_mut().state.page = Page::NewVm;
    h.state_mut().state.wizard.step = vfio_assistant::ui::wizard_state::Step::Gpu;
    h.state_mut().state.vm.gpu = Some("0000:01:00.0".into());
    h.run_steps(3);
    h.get_by_label_contains("How the host hands it over: shared");
}

#[test]
fn the_devices_page_offers_sharing_for_the_second_card_only() {
    for (gpu, offered) in [("0000:01:00.0", true), ("0000:00:02.0", false)] {
        let dir = e2e_host();
        let state = State {
            page: Page::Devices,
            ..State::default()
        };
        let mut h = harness(
            App::with_source(Source::Root(dir.path().into()), state, || {}),
            [1280.0, 2400.0],
        );
        wait_for(&mut h, 60, |a| a.snapshot.is_some());
        h.run_steps(3);
        // As the Overview's link to a card opens it.
        h.state_mut().focus_device = Some(gpu.into());
        h.run_steps(3);
        h.run_steps(3);
        let n = h.query_all_by_label("Share it with the desktop…").count();
        let bind = h.query_all_by_label("Bind to vfio-pci…").count();
        assert!(bind > 0, "{gpu}: its details are open");
        assert_eq!(n > 0, offered, "{gpu}");
    }
}
