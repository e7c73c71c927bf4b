#![allow(dead_code)]
pub mod gui;
pub mod hosts;
pub mod json;
pub mod listing;
pub mod schema;
pub mod tuning;
pub mod vm;
