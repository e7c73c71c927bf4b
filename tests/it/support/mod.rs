#![allow(dead_code)]
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
