//! The app in an egui_kittest harness, driven like the window drives it
//! (`poll` takes scans, page jobs and monitor samples each frame).

use egui_kittest::Harness;
use vfio_assistant::ui::app::App;

pub fn harness(app: App, size: [f32; 2]) -> Harness<'static, App> {
    Harness::builder().with_size(size).build_ui_state(
        |ui, app: &mut App| {
            app.poll();
            app.ui_content(ui);
        },
        app,
    )
}
