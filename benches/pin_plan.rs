//! Benchmark: the pinning planner and validator must answer within one frame
//! (a few ms) so the CPU page stays live while dragging. Measured on the
//! largest real topology (128 CPUs) and on a 256-CPU topology built from it
//! (the same machine twice: 4 packages), for every vCPU count.
//! `cargo bench --bench pin_plan`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a bench may

use std::path::Path;
use std::time::Instant;
use vfio_assistant::host::scan;
use vfio_assistant::host::topology::Topology;
use vfio_assistant::pinning::{PinRequest, plan, validate};
use vfio_assistant::sysroot::HostRoot;

/// The topology twice, the copy's CPUs, cores, caches, nodes and packages renumbered.
fn doubled(t: &Topology) -> Topology {
    let mut d = t.clone();
    let n = t.cpus.iter().map(|c| c.id).max().unwrap_or(0) + 1;
    let cores = t.cores.len();
    let l3 = t.l3_groups.len();
    let l2 = t.l2_groups.len();
    let nodes = t.numa_nodes.iter().map(|x| x.id).max().unwrap_or(0) + 1;
    for c in &t.cpus {
        let mut c2 = c.clone();
        c2.id += n;
        c2.core = c.core.map(|k| k + cores);
        c2.l3_group = c.l3_group.map(|g| g + l3);
        c2.l2_group = c.l2_group.map(|g| g + l2);
        c2.numa_node = c.numa_node.map(|x| x + nodes);
        c2.package_id = c.package_id.map(|p| p + 100_000);
        d.cpus.push(c2);
    }
    for k in &t.cores {
        let mut k2 = k.clone();
        k2.index += cores;
        k2.cpus = k.cpus.iter().map(|c| c + n).collect();
        k2.l3_group = k.l3_group.map(|g| g + l3);
        k2.numa_node = k.numa_node.map(|x| x + nodes);
        k2.package_id = k.package_id.map(|p| p + 100_000);
        d.cores.push(k2);
    }
    for g in &t.l3_groups {
        let mut g2 = g.clone();
        g2.cpus = g.cpus.iter().map(|c| c + n).collect();
        d.l3_groups.push(g2);
    }
    for x in &t.numa_nodes {
        let mut x2 = x.clone();
        x2.id += nodes;
        x2.cpus = x.cpus.iter().map(|c| c + n).collect();
        d.numa_nodes.push(x2);
    }
    d.summary.cpus_online *= 2;
    d.summary.cores *= 2;
    d
}

fn bench(label: &str, t: &Topology) {
    let free = t.summary.cpus_online - t.cores[0].cpus.len();
    let mut worst_ms: f64 = 0.0;
    let mut total_ms = 0.0;
    let mut count = 0;
    for n in 1..=free {
        let start = Instant::now();
        let p = plan(
            t,
            &PinRequest {
                vcpus: n,
                ..PinRequest::default()
            },
        )
        .unwrap();
        let _ = validate(t, &p.pinning());
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        worst_ms = worst_ms.max(ms);
        total_ms += ms;
        count += 1;
    }
    println!(
        "{label:<44} {:>4} CPUs: plan+validate mean {:>6.3} ms, worst {:>6.3} ms over {count} vCPU counts (a 60 Hz frame is 16.7 ms)",
        t.summary.cpus_online,
        total_ms / count as f64,
        worst_ms
    );
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology");
    for name in [
        "ghw-amd-ryzen5-1600",
        "hwloc-memorysidecaches",
        "hwloc-128arm-2pa2n8cluster4co",
    ] {
        let t = scan(&HostRoot::at(root.join(name))).unwrap().topology;
        bench(name, &t);
    }
    let t = scan(&HostRoot::at(root.join("hwloc-128arm-2pa2n8cluster4co")))
        .unwrap()
        .topology;
    bench("256 CPUs (the 128-CPU Kunpeng twice)", &doubled(&t));
    let t = scan(&HostRoot::at(root.join("hwloc-memorysidecaches")))
        .unwrap()
        .topology;
    bench("160 CPUs with SMT (the SNC2 Xeon twice)", &doubled(&t));
}
