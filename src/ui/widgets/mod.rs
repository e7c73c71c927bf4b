//! Reusable drawing pieces.

pub mod badges;
pub mod topology;
pub mod vm_control;
