#![allow(dead_code)]
pub mod boot_hosts;
pub mod desktops;
pub mod devnodes;
pub mod gui;
pub mod hosts;
pub mod json;
pub mod listing;
pub mod schema;
pub mod sshd;
pub mod tree;
pub mod tuning;
pub mod upstream;
pub mod vm;

/// The root helper's binary. It is its own crate (crates/helper, on the core
/// alone), so cargo gives no CARGO_BIN_EXE for it here: a `cargo test` at the
/// workspace root builds every member into the same folder as the app.
pub fn helper_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let p = std::path::Path::new(env!("CARGO_BIN_EXE_vfio-assistant"))
            .with_file_name("vfio-assistant-helper");
        assert!(
            p.is_file(),
            "{} is not built: run the tests from the workspace root (cargo test --features test-hooks builds crates/helper too)",
            p.display()
        );
        p.display().to_string()
    })
}
