//! Live feedback: `latency.rs` is the cyclictest-style probe; `sample.rs` reads
//! the counters, `rates.rs` turns two samples into rates (pure), `vm.rs` finds a
//! running VM's vCPU threads, pinning and KVM counters, `sampler.rs` runs it all
//! on one thread with bounded history.

pub mod idle_hold;
pub mod latency;
pub mod probe;
pub mod rates;
pub mod sample;
pub mod sampler;
pub mod vm;
