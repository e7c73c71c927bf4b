//! Live feedback. So far: the cyclictest-style latency probe (`latency.rs`);
//! the interrupt, per-CPU and vCPU samplers come next (issue 6).

pub mod latency;
