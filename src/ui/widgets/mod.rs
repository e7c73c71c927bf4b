//! Reusable drawing pieces.

pub mod a11y;
pub mod badges;
pub mod topology;
pub mod vm_control;
