//! Host tuning as one undoable transaction. `facts.rs` reads what the
//! planner needs through a `HostRoot`; `plan.rs` turns the host snapshot,
//! those facts and the user's `Request` into a `Plan` of `Change`s (pure):
//! the kernel command line through the loader that booted (`boot.rs`,
//! tokens as tokens in `tokens.rs`), vfio-pci at boot through the initramfs
//! generator that builds the image (`vfio_boot.rs`), and the runtime knobs
//! (`runtime.rs`), and the libvirt hook for dynamic isolation (`hook.rs`). `apply.rs` applies a plan (preflight, journal, atomic
//! writes in `fsops.rs`, rollback on failure, verification) and undoes it
//! from the journal (`journal.rs`); `status.rs` says where each stands.
//! The privileged helper drives the same functions.

pub mod apply;
pub mod artifacts;
pub mod boot;
pub mod command;
pub mod facts;
pub mod fsops;
pub mod hook;
pub mod journal;
pub mod model;
pub mod plan;
pub mod play;
pub mod preflight;
pub mod records;
pub mod runtime;
pub mod single_gpu;
pub mod status;
pub mod targets;
pub mod tokens;
pub mod trust;
pub mod txn;
pub mod undo;
pub mod verify;
pub mod vfio_boot;

pub use model::{Change, Effect, Plan, Request};
