//! The desktop app (egui/eframe). `app/` owns the window (state, logic,
//! drawing, commands); `pages.rs` holds one runtime per page with its own
//! job slots (`runtime.rs`), whose work is `jobs.rs` (library calls off the
//! UI thread; `pkexec_words.rs` says how the helper ended); `views/` draws
//! one page per file; `worker.rs` scans; `theme.rs` holds the colours;
//! `wizard_state.rs` the New VM choices.

pub mod app;
pub mod install_jobs;
pub mod jobs;
pub mod pages;
pub mod pkexec_words;
pub mod runtime;
pub mod state;
pub mod theme;
pub mod views;
pub mod virtio_fetch;
pub mod vm_model;
pub mod widgets;
pub mod wizard_state;
pub mod worker;

/// Where the host the app shows is: the library's one `HostSource`, which
/// the CLI starts from too.
pub use crate::remote::HostSource as Source;

pub const APP_ID: &str = "io.github.vfio_assistant.VfioAssistant";

/// Open the window and run until it closes.
pub fn run_app(source: Source) -> anyhow::Result<i32> {
    let mut viewport = egui::ViewportBuilder::default()
        .with_title("VFIO Assistant")
        .with_app_id(APP_ID)
        .with_inner_size([1200.0, 820.0])
        .with_min_inner_size([640.0, 400.0]);
    if let Ok(icon) = eframe::icon_data::from_png_bytes(include_bytes!("../../assets/icon-256.png"))
    {
        viewport = viewport.with_icon(icon);
    }
    let options = eframe::NativeOptions {
        viewport,
        renderer: eframe::Renderer::Glow,
        ..Default::default()
    };
    eframe::run_native(
        APP_ID,
        options,
        Box::new(move |cc| Ok(Box::new(app::App::new(cc, source)))),
    )
    .map_err(|e| anyhow::anyhow!("could not open the window: {e}. Is a display available (DISPLAY or WAYLAND_DISPLAY)? The CLI works without one: vfio-assistant scan"))?;
    Ok(0)
}
