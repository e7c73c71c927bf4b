//! One page per file. Views draw from a snapshot and push `Command`s; they never
//! block and never do I/O.

pub mod cpu;
pub mod devices;
pub mod findings;
pub mod inside_vm;
pub mod monitor;
pub mod monitor_heat;
pub mod overview;
pub mod pin_board;
pub mod troubleshoot;
pub mod tuning;
pub mod tuning_gpu_mode;
pub mod tuning_inputs;
pub mod tuning_journal;
pub mod tuning_progress;
pub mod wizard;
