//! The app in an egui_kittest harness, driven like the window drives it
//! (`poll` takes scans, page jobs and monitor samples each frame).

use egui_kittest::{Harness, HarnessBuilder};
use std::time::{Duration, Instant};
use vfio_assistant::ui::app::App;

fn build(builder: HarnessBuilder<App>, app: App) -> Harness<'static, App> {
    builder.build_ui_state(
        |ui, app: &mut App| {
            // As the window: a host switch asked for, then the jobs.
            app.logic_with(None);
            app.ui_content(ui);
        },
        app,
    )
}

pub fn harness(app: App, size: [f32; 2]) -> Harness<'static, App> {
    build(Harness::builder().with_size(size), app)
}

/// The same, rendering through wgpu (Mesa's lavapipe) for pictures.
pub fn wgpu_harness(app: App, size: [f32; 2]) -> Harness<'static, App> {
    build(Harness::builder().with_size(size).wgpu(), app)
}

/// Step until `done` has held for a few frames in a row (a finished job
/// starts the page's re-reads, which flip it for a moment).
pub fn wait_for(h: &mut Harness<'static, App>, secs: u64, done: impl Fn(&App) -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    let mut held = 0;
    while Instant::now() < end && held < 5 {
        h.step();
        held = if done(h.state()) { held + 1 } else { 0 };
        std::thread::sleep(Duration::from_millis(30));
    }
    assert!(held >= 5, "timed out");
    h.run();
}
