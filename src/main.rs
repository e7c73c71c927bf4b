//! `vfio-assistant`: what users run. It does not link libvirt; the
//! commands that need it continue in `vfio-assistant-virt` (see
//! `cli::entry`).

fn main() -> std::process::ExitCode {
    vfio_assistant::cli::entry::main(vfio_assistant::cli::entry::Links::default())
}
