//! Benchmark: `tune plan` against `scan` on the same root. Planning is pure
//! over what was read, so a plan should cost little more than the scan it
//! starts with (goal: within 1.2x). Measured on the bundled demo host and on
//! this machine's live root; the ratio is printed, not asserted (the machine
//! is shared). `cargo bench --bench tune_plan`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a bench may

use std::time::{Duration, Instant};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::facts::gather;
use vfio_assistant::tuning::model::Request;
use vfio_assistant::tuning::plan::plan;

/// The goal: a plan costs at most this much more than its scan.
const GOAL: f64 = 1.2;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn measure(label: &str, root: &HostRoot, req: &Request) {
    let rounds = 15;
    let mut scans = Vec::new();
    let mut plans = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let s = scan(root).unwrap();
        scans.push(t.elapsed());
        let t = Instant::now();
        let s2 = scan(root).unwrap();
        let f = gather(root);
        let p = plan(&s2, &f, req);
        std::hint::black_box((&s, &p));
        plans.push(t.elapsed());
    }
    let (a, b) = (median(scans), median(plans));
    let ratio = b.as_secs_f64() / a.as_secs_f64();
    println!(
        "{label}: scan {:.1} ms, tune plan (scan + facts + plan) {:.1} ms: {ratio:.2}x scan (goal: within {GOAL}x: {})",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        if ratio <= GOAL { "met" } else { "NOT met" }
    );
}

fn main() {
    let (root, _dir) = vfio_assistant::demo::unpack_demo().unwrap();
    let snap = scan(&root).unwrap();
    let gpu = snap
        .gpus()
        .next()
        .and_then(|g| g.device.address.parse().ok());
    let req = Request {
        gpus: gpu.into_iter().collect(),
        vcpus: Some(4),
        memory_mib: Some(8192),
        ..Request::default()
    };
    measure("demo host", &root, &req);
    measure(
        "this machine",
        &HostRoot::live(),
        &Request {
            vcpus: None,
            ..Request::default()
        },
    );
}
