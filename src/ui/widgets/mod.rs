//! Reusable drawing pieces.

pub mod badges;
pub mod topology;
