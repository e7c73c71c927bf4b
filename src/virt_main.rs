//! `vfio-assistant-virt`: the whole program, libvirt linked (the GUI and
//! every command that talks to libvirt). `vfio-assistant` hands such
//! commands to it (see `cli::entry`); it is installed in
//! /usr/libexec/vfio-assistant/.

fn main() -> std::process::ExitCode {
    vfio_assistant::cli::entry::main(vfio_assistant::cli::entry::Links {
        libvirt: Some(vfio_assistant_libvirt::connect),
        gui: Some(vfio_assistant::ui::run_app),
    })
}
