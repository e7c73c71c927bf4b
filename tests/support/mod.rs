#![allow(dead_code)]
pub mod listing;
