//! Where the virtio-win disc comes from, on the Storage step while none is
//! named: the one a distribution installed (Fedora's virtio-win package),
//! offered with a button; else a download from Fedora's virtio-win builds,
//! only on the user's click, with its size, progress and Cancel, checked
//! against the published SHA-256 before it is used.

use crate::ui::app::Command;
use crate::ui::pages::WizardRuntime;
use crate::ui::theme;
use crate::ui::vm_model::VmModel;

/// Where a download goes: beside the Windows installer ISO (a folder the
/// user chose, so QEMU is likely to reach it), else ~/Downloads.
pub fn download_target(vm: &VmModel) -> String {
    let iso = std::path::Path::new(vm.install_iso.trim());
    let dir = match iso.parent() {
        Some(p) if !vm.install_iso.trim().is_empty() && !p.as_os_str().is_empty() => {
            p.to_path_buf()
        }
        _ => std::env::var_os("HOME")
            .map(|h| std::path::PathBuf::from(h).join("Downloads"))
            .unwrap_or_else(|| std::path::PathBuf::from(".")),
    };
    dir.join("virtio-win.iso").display().to_string()
}

pub fn virtio_source_ui(
    ui: &mut egui::Ui,
    vm: &mut VmModel,
    rt: &WizardRuntime,
    live: bool,
    out: &mut Vec<Command>,
) {
    let f = &rt.virtio_fetch;
    if f.job.is_busy() {
        let (b, t) = f.progress();
        ui.horizontal(|ui| {
            let mib = |n: u64| n / (1 << 20);
            match t {
                Some(t) => {
                    ui.add(
                        egui::ProgressBar::new(b as f32 / t.max(1) as f32)
                            .desired_width(260.0)
                            .text(format!("{} of {} MiB", mib(b), mib(t))),
                    );
                }
                None => {
                    ui.spinner();
                    ui.label(format!("{} MiB", mib(b)));
                }
            }
            if ui.button("Cancel the download").clicked() {
                out.push(Command::CancelVirtioDownload);
            }
        });
        return;
    }
    match &f.done {
        Some(Ok(p)) => {
            ui.colored_label(theme::GOOD, format!("Downloaded and checked: {p}"));
        }
        Some(Err(e)) => {
            ui.colored_label(theme::BAD, e);
        }
        None => {}
    }
    if !vm.virtio_iso.trim().is_empty() {
        return;
    }
    let found = if live {
        crate::install::virtio_win::find(&crate::sysroot::HostRoot::live())
    } else {
        None
    };
    if let Some(p) = found {
        let p = p.display().to_string();
        if ui
            .button(format!("Use {p}"))
            .on_hover_text("The virtio-win disc your distribution's package installed.")
            .clicked()
        {
            vm.virtio_iso = p;
        }
        return;
    }
    let to = download_target(vm);
    if ui
        .button("Download virtio-win from Fedora (about 700 MB)")
        .on_hover_text(format!(
            "Fedora's newest stable virtio-win disc, saved as {to} and used only once its SHA-256 matches the one published beside it. No distribution package put one on this machine."
        ))
        .clicked()
    {
        out.push(Command::DownloadVirtio { to });
    }
}
