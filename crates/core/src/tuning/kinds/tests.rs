//! The runtime kinds, each only when the value differs.

use super::governor::governor;
use super::hugepages::hugepages;
use super::ksm::ksm;
use super::sriov::sriov;
use super::thp::thp;
use crate::tuning::facts::TuneFacts;

fn facts(values: &[(&str, &str)]) -> TuneFacts {
    TuneFacts {
        values: values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..TuneFacts::default()
    }
}

#[test]
fn each_knob_only_when_it_differs() {
    let f = facts(&[
        (
            "/sys/kernel/mm/transparent_hugepage/enabled",
            "[always] madvise never",
        ),
        ("/sys/kernel/mm/ksm/run", "1"),
        (
            "/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
            "powersave",
        ),
        (
            "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
            "performance",
        ),
        (
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave",
        ),
    ]);
    let t = thp(&f).unwrap();
    assert_eq!(t.values[0].before, "always");
    assert_eq!(t.values[0].after, "madvise");
    assert!(ksm(&f, true).is_some());
    let g = governor(&f, &[2, 3]);
    assert_eq!(g.len(), 1);
    assert_eq!(
        g[0].values.len(),
        1,
        "only CPU 2 of the VM's: {:?}",
        g[0].values
    );
    let done = facts(&[
        (
            "/sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never",
        ),
        ("/sys/kernel/mm/ksm/run", "0"),
    ]);
    assert!(thp(&done).is_none() && ksm(&done, true).is_none());
}

#[test]
fn hugepages_add_what_is_missing() {
    let f = facts(&[
        (
            "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
            "100",
        ),
        (
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "100",
        ),
    ]);
    let c = hugepages(&f, 1024, 2048, None).unwrap();
    assert_eq!(c.values[1].after, "512", "{:?}", c.values);
    assert!(c.values[0].action);
    let enough = facts(&[
        (
            "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
            "512",
        ),
        (
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "512",
        ),
    ]);
    assert!(hugepages(&enough, 1024, 2048, None).is_none());
    // The VM runs and uses every page this tool reserved for it (free
    // 0): the journal says the host had none of its own, so nothing.
    let mut running = facts(&[
        (
            "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
            "0",
        ),
        (
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "512",
        ),
    ]);
    running.hugepages_before_ours.insert(
        "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages".into(),
        0,
    );
    assert!(hugepages(&running, 1024, 2048, None).is_none());
    // The host had 100 of its own before: those stay, the VM's come on top.
    running.hugepages_before_ours.insert(
        "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages".into(),
        100,
    );
    let c = hugepages(&running, 1024, 2048, None).unwrap();
    assert_eq!(c.values[1].after, "612");
}

#[test]
fn sriov_counts_go_through_zero_and_stay_in_range() {
    let f = facts(&[
        ("/sys/bus/pci/devices/0000:01:00.0/sriov_totalvfs", "8"),
        ("/sys/bus/pci/devices/0000:01:00.0/sriov_numvfs", "2"),
    ]);
    let c = sriov(&f, "0000:01:00.0", 4).unwrap().unwrap();
    assert_eq!(c.values.len(), 2);
    assert_eq!(c.values[0].after, "0");
    assert!(sriov(&f, "0000:01:00.0", 9).is_err());
    assert!(sriov(&f, "0000:01:00.0", 2).unwrap().is_none());
    assert!(sriov(&f, "0000:02:00.0", 1).is_err());
}

#[test]
fn kinds_are_registered_once() {
    // Registration itself is the compiler's (`kinds!`): here the words.
    use super::{ChangeId, KINDS, Kind};
    for &k in Kind::ALL {
        let lines: Vec<_> = KINDS.iter().filter(|s| s.kind == k).collect();
        assert_eq!(lines.len(), 1, "{k:?} has {} lines in KINDS", lines.len());
        let spec = lines[0];
        assert_eq!(spec.name, k.spec().name);
        // The journal's word for it is serde's, and it reads back.
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            format!("\"{}\"", spec.name)
        );
        assert_eq!(spec.name.parse::<ChangeId>().unwrap(), ChangeId::of(k));
    }
    assert_eq!(KINDS.len(), Kind::ALL.len());
}

#[test]
fn change_ids_read_back_only_as_ours() {
    use super::ChangeId;
    let id: ChangeId = "sriov:0000:03:00.0".parse().unwrap();
    assert_eq!(id.to_string(), "sriov:0000:03:00.0");
    assert_eq!(
        serde_json::from_str::<ChangeId>("\"sriov:0000:03:00.0\"").unwrap(),
        id
    );
    for bad in [
        "",
        "THP",
        "thp ",
        "sriov:../../etc",
        "thp:0000:03:00.0",
        "rm -rf",
        "\u{202e}",
    ] {
        assert!(bad.parse::<ChangeId>().is_err(), "{bad:?}");
        assert!(serde_json::from_str::<ChangeId>(&format!("{bad:?}")).is_err());
    }
    assert!("sriov".parse::<ChangeId>().unwrap().covers(&id));
    assert!(!"ksm".parse::<ChangeId>().unwrap().covers(&id));
}
