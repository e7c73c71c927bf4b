//! Host tuning as one undoable transaction. `facts.rs` reads what the
//! planner needs through a `HostRoot`; `plan.rs` turns the host snapshot,
//! those facts and the user's `Request` into a `Plan` of `Change`s (pure):
//! each kind of change planning itself from one table (`kinds/`: the
//! closed `Kind`/`ChangeId`, each kind's planner, allowlist and fixes):
//! the kernel command line through the loader that booted and vfio-pci at
//! boot through the initramfs generator (`boot_plan.rs` over `boot.rs`,
//! `vfio_boot.rs`, tokens in `tokens.rs`), the runtime knobs (`kinds/*.rs`),
//! the libvirt hooks (`hook.rs`, `single_gpu.rs`), Looking Glass and sound
//! (`play.rs`). The transaction core (`txn/`: Env, progress, outcome, the
//! command and value steps) is what `apply.rs` applies a plan through
//! (preflight, journal, atomic writes in `fsops.rs`, rollback on failure,
//! verification) and `undo.rs` undoes it from the journal (`journal.rs`);
//! `status.rs` says where each stands. The privileged helper drives the
//! same functions.

pub mod apply;
pub mod artifacts;
pub mod asked;
pub mod boot;
pub mod boot_plan;
pub mod capture_fit;
pub mod command;
pub mod command_line;
pub mod devices;
pub mod entry;
pub mod entry_check;
pub mod facts;
pub mod fsops;
pub mod hook;
pub mod journal;
pub mod kind;
pub mod kinds;
pub mod model;
pub mod paths;
pub mod plan;
pub mod plan_error;
pub mod play;
pub mod preflight;
pub mod prepare;
pub mod records;
pub mod running;
pub mod shared_desktop;
pub mod shared_gpu;
pub mod single_gpu;
pub mod status;
pub mod targets;
pub mod tokens;
pub mod trust;
pub mod txn;
pub mod undo;
pub mod undo_since;
pub mod verify;
pub mod vfio_address;
pub mod vfio_boot;
pub mod vfio_rebuild;

pub use model::{Change, Effect, Plan, Request};
