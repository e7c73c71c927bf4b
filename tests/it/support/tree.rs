//! Copies of real fixture trees to rewrite in a test: the CPU part of a host
//! root (`sys/devices/system`, the PMU directories, `proc`), symlinks kept as
//! symlinks.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        let ft = e.file_type().unwrap();
        if ft.is_symlink() {
            symlink(fs::read_link(e.path()).unwrap(), &t).unwrap();
        } else if ft.is_dir() {
            copy_tree(&e.path(), &t);
        } else {
            fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// The CPU topology part of the fixture at `root`, copied into a temp dir.
pub fn copy_cpu_part(root: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for rel in ["sys/devices/system", "proc"] {
        if root.join(rel).is_dir() {
            copy_tree(&root.join(rel), &dir.path().join(rel));
        }
    }
    for e in fs::read_dir(root.join("sys/devices")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("cpu_") {
            copy_tree(&e.path(), &dir.path().join("sys/devices").join(&name));
        }
    }
    dir
}

/// Every regular file below `dir` (symlinks not followed).
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            out.extend(files(&e.path()));
        } else if ft.is_file() {
            out.push(e.path());
        }
    }
    out.sort();
    out
}
