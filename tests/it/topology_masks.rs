//! Older kernels have only the mask form of CPU sets (`shared_cpu_map`,
//! `thread_siblings`, a node's `cpumap`). Every real fixture, read again with
//! its list files taken away and only the masks left, gives the same model,
//! and that model still matches what the capturing tool says. The masks are
//! the kernel's own files from the upstream tree (kept beside the lists by
//! tests/fixtures/import.sh); only where upstream had none (libvirt trimmed
//! its trees) are they written from the real list files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::{tree, upstream};
use std::collections::BTreeSet;
use std::fs;
use upstream::{all_fixtures, assert_same, fixture, upstream};
use vfio_assistant::host::cpuset::mask_name;
use vfio_assistant::host::{HostSnapshot, scan};
use vfio_assistant::parse::cpulist::{format_cpumask, parse_cpulist};
use vfio_assistant::sysroot::HostRoot;

/// Trees upstream ships without mask files for some lists (libvirt's tests
/// read only the lists); their masks are written from the lists.
const MASKS_WRITTEN_FROM_LISTS: &[&str] =
    &["libvirt-linux-x86_64-test6", "libvirt-vircaps-linux-caches"];

/// hwloc's Bulldozer tree, whose masks upstream corrected by hand (see
/// tests/it/topology_fixtures.rs): read from its masks, L2 is shared per module.
const LISTS_DISAGREE_WITH_MASKS: &str = "hwloc-64amd64-4s2n4ca2co";

fn scan_at(root: &std::path::Path) -> HostSnapshot {
    scan(&HostRoot::at(root)).unwrap_or_else(|e| panic!("{}: {e}", root.display()))
}

/// Remove every list file that has a mask twin; write the twin from the list
/// where the tree has none. Returns (lists removed, masks written).
fn keep_only_masks(root: &std::path::Path) -> (usize, usize) {
    let cpus = fs::read_dir(root.join("sys/devices/system/cpu"))
        .map(|d| d.count())
        .unwrap_or(0);
    let words = cpus.div_ceil(32).max(1);
    let (mut removed, mut written) = (0, 0);
    for f in tree::files(root) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let Some(mask) = mask_name(&name) else {
            continue;
        };
        let twin = f.with_file_name(mask);
        if !twin.exists() {
            let set = parse_cpulist(&fs::read_to_string(&f).unwrap()).unwrap();
            fs::write(&twin, format!("{}\n", format_cpumask(&set, words))).unwrap();
            written += 1;
        }
        fs::remove_file(&f).unwrap();
        removed += 1;
    }
    (removed, written)
}

#[test]
fn every_fixture_read_from_masks_alone_gives_the_same_model() {
    let mut checked = 0;
    for name in all_fixtures() {
        let with_lists = scan_at(&fixture(&name));
        let copy = tree::copy_cpu_part(&fixture(&name));
        let (removed, written) = keep_only_masks(copy.path());
        if name == "hwloc-16em64t-4s2c2t" {
            assert_eq!(removed, 0, "{name}: a mask-only tree to begin with");
        } else {
            assert!(removed > 0, "{name}: no list file taken away");
        }
        if !MASKS_WRITTEN_FROM_LISTS.contains(&name.as_str()) {
            assert_eq!(
                written, 0,
                "{name}: masks written although upstream has them"
            );
        }
        let masks_only = scan_at(copy.path());
        let (a, b) = (&with_lists.topology, &masks_only.topology);
        if name == LISTS_DISAGREE_WITH_MASKS {
            // Only the L2 groups differ: one per core in the lists, one per
            // module in the (corrected) masks.
            assert_eq!(a.cores, b.cores, "{name}: cores");
            assert_eq!(a.l3_groups, b.l3_groups, "{name}: L3 groups");
            assert_eq!(a.numa_nodes, b.numa_nodes, "{name}: NUMA nodes");
            assert_eq!(
                b.l2_groups.len() * 2,
                a.l2_groups.len(),
                "{name}: L2 per module"
            );
        } else {
            assert_eq!(a, b, "{name}: the model from masks alone differs");
        }
        // And from its masks alone the host is what the tool says it is.
        if let Some(up) = upstream(&name) {
            assert_same(&format!("{name} (masks only)"), &up, &masks_only);
        }
        // The planner sees the same host too.
        let l3: BTreeSet<usize> = b.cores.iter().filter_map(|c| c.l3_group).collect();
        assert_eq!(
            l3.is_empty(),
            a.l3_groups.is_empty(),
            "{name}: cores lost their L3 group"
        );
        checked += 1;
    }
    assert!(checked >= 16, "only {checked} fixtures");
}
