//! The layers the compiler keeps (issue 32): the root helper is its own
//! crate on the core alone, so the code that runs as root cannot reach the
//! GUI, libvirt or an SSH client — not by a `use`, and not by what its binary
//! links (helper.rs: ldd and nm of its binary). A dependency added to the core or the helper that pulls one in
//! fails here, before it reaches a user's root.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

/// The core's and the helper's manifests name none of the crates the root
/// helper must never be built with.
#[test]
fn core_and_helper_depend_on_no_gui_libvirt_or_ssh_crate() {
    let top = env!("CARGO_MANIFEST_DIR");
    for manifest in ["crates/core/Cargo.toml", "crates/helper/Cargo.toml"] {
        let text = std::fs::read_to_string(format!("{top}/{manifest}")).unwrap();
        let deps = text
            .split("[dependencies]")
            .nth(1)
            .unwrap()
            .split("\n[")
            .next()
            .unwrap();
        for name in deps
            .lines()
            .filter_map(|l| l.split('=').next())
            .map(str::trim)
            .filter(|n| !n.is_empty() && !n.starts_with('#'))
        {
            let banned = name.starts_with("egui")
                || [
                    "eframe",
                    "rfd",
                    "virt",
                    "ssh2",
                    "russh",
                    "openssh",
                    "vfio-assistant",
                ]
                .contains(&name);
            assert!(!banned, "{manifest} depends on {name}");
        }
    }
}
