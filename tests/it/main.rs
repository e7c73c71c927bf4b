//! Every integration test in one binary (one link, one copy of the shared
//! helpers in `support/`), a module per area. `cargo test --test it NAME`
//! runs one area, e.g. `cargo test --test it gui_tuning`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

// The tests drive the helper with --root, --fail-at and --pause-at and name
// journals: hooks that exist only in a test build. Without it every test
// here would fail for the wrong reason; say the right one instead.
#[cfg(not(feature = "test-hooks"))]
compile_error!(
    "the integration tests need the test-hooks feature: cargo test --features test-hooks (scripts/test.sh)"
);

mod support;

/// The library's use cases open libvirt through the opener the program
/// provides (`vfio-assistant-virt` gives libvirt's at start). This test
/// binary links libvirt too and provides it before any test runs, as that
/// program's `main` does.
#[used]
#[unsafe(link_section = ".init_array")]
static PROVIDE_LIBVIRT: extern "C" fn() = {
    extern "C" fn provide() {
        vfio_assistant::libvirt::provide(vfio_assistant_libvirt::connect);
    }
    provide
};

mod architecture;
mod bad_input;
mod bad_input_files;
mod checks;
mod checks_each_way;
mod checks_idle;
mod checks_reset_health;
mod checks_secure_boot;
mod cli;
mod cli_check;
mod cli_domain;
mod cli_hostile;
mod cli_json;
mod cli_pipe;
mod demo_asset;
mod doctor;
mod doctor_vm;
mod domain_new;
mod domain_tune;
mod domain_xml;
mod faces_agree;
mod forged_journal;
mod fuzz;
mod guest_agent;
mod gui;
mod gui_a11y;
mod gui_demo_apply;
mod gui_keyboard;
mod gui_layout;
mod gui_monitor;
mod gui_pin_board;
mod gui_remote;
mod gui_shared_gpu;
mod gui_snapshots;
mod gui_tuning;
mod gui_tuning_defaults;
mod gui_tuning_failure;
mod gui_tuning_interrupted;
mod gui_tuning_keep;
mod gui_tuning_pkexec;
mod gui_tuning_plan_cache;
mod gui_unattended;
mod gui_wizard;
mod gui_wizard_faces;
mod helper;
mod helper_env;
mod hook_bounds;
mod hook_holders;
mod hostile_inputs;
mod initramfs;
mod input_picker;
mod json_snapshots;
mod layers;
mod libvirt_driver;
mod lspci_yardstick;
mod monitor;
mod monitor_cpus;
mod next_step_desktops;
mod next_step_gpu;
mod pci_listings;
mod pinning;
mod pinning_hybrid;
mod pinning_x3d;
mod playable_host;
mod playable_kvmfr;
mod playable_looking_glass;
mod printed_commands;
mod remote_cut;
mod remote_live;
mod remote_ssh;
mod remote_user;
mod rom;
mod shared_gpu_hook;
mod shared_gpu_plan;
mod shared_gpu_stop;
mod single_gpu_checks;
mod single_gpu_hook;
mod single_gpu_plan;
mod snapshot_private;
mod storage_pool;
mod topology_fixtures;
mod topology_masks;
mod tuning;
mod tuning_boot;
mod tuning_command_line;
mod tuning_distros;
mod tuning_grub_once;
mod tuning_keep;
mod tuning_kernel_update;
mod tuning_layers;
mod tuning_needs;
mod tuning_next_kernel;
mod tuning_play;
mod tuning_twins;
mod tuning_uki;
mod uki_read;
mod unattended_install;
mod vm_lifecycle;
