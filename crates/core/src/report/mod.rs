//! What both faces present, composed once: the CLI and the app call these
//! and only parse input and render. `preflight.rs`: will this host start
//! this domain (adapted to what it accepts), used by `domain new|validate|
//! start`, the wizard and the test guest; `lifecycle.rs`: define as an
//! update, start with its networks, a failed start explained; `storage.rs`:
//! new qcow2 images in libvirt's pool or at a path, with the space free;
//! `text.rs`: the words both faces use for sizes, badges and verdicts;
//! `next_step.rs`: the one thing to do now (the Overview's first card,
//! `check`'s first line); `vm_card.rs`: which card is the VM's, and
//! `screen_move.rs`: how the host's screen moves off it.

pub mod device;
pub mod findings;
pub mod guest;
pub mod guest_settings;
pub mod libvirt;
pub mod lifecycle;
pub mod next_step;
pub mod preflight;
pub mod rom;
pub mod screen_move;
pub mod single_gpu;
pub mod storage;
pub mod text;
pub mod tuning;
pub mod vm_card;
