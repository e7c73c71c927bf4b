//! Bad input never panics: empty, garbage and odd attribute files, dangling
//! symlinks, directories where files belong, binary junk. The scan completes
//! with warnings that name the file; a directory that is no host at all is a
//! clear error.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use vfio_assistant::host::{ScanError, scan};
use vfio_assistant::sysroot::HostRoot;

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn link(root: &Path, rel: &str, target: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    symlink(target, p).unwrap();
}

/// A small but real-looking host with one good GPU, then every kind of damage.
pub(crate) fn damaged_host() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    // A good GPU in group 1.
    let gpu = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    write(r, &format!("{gpu}/vendor"), b"0x10de\n");
    write(r, &format!("{gpu}/device"), b"0x1b81\n");
    write(r, &format!("{gpu}/class"), b"0x030000\n");
    write(r, &format!("{gpu}/config"), b"");
    link(
        r,
        &format!("{gpu}/iommu_group"),
        "../../../../kernel/iommu_groups/1",
    );
    link(
        r,
        "sys/bus/pci/devices/0000:01:00.0",
        &format!("../../../{}", gpu.trim_start_matches("sys/")),
    );
    link(
        r,
        "sys/kernel/iommu_groups/1/devices/0000:01:00.0",
        &format!("../../../../{}", gpu.trim_start_matches("sys/")),
    );
    // Garbage ids: skipped with a warning.
    let bad = "sys/devices/pci0000:00/0000:02:00.0";
    write(r, &format!("{bad}/vendor"), b"zzzz\n");
    write(r, &format!("{bad}/device"), b"0x1234\n");
    link(
        r,
        "sys/bus/pci/devices/0000:02:00.0",
        "../../../devices/pci0000:00/0000:02:00.0",
    );
    // Empty and odd attributes on an otherwise fine device.
    let odd = "sys/devices/pci0000:00/0000:03:00.0";
    write(r, &format!("{odd}/vendor"), b"0x8086\n");
    write(r, &format!("{odd}/device"), b"0x1533\n");
    write(r, &format!("{odd}/class"), b"");
    write(r, &format!("{odd}/numa_node"), b"banana\n");
    write(
        r,
        &format!("{odd}/current_link_speed"),
        b"\xff\xfe\x00garbage",
    );
    fs::create_dir_all(r.join(odd).join("revision")).unwrap(); // a directory where a file belongs
    link(r, &format!("{odd}/driver"), "../../../bus/pci/drivers/igb"); // dangling
    link(
        r,
        "sys/bus/pci/devices/0000:03:00.0",
        "../../../devices/pci0000:00/0000:03:00.0",
    );
    // A dangling device link and a name that is not an address.
    link(
        r,
        "sys/bus/pci/devices/0000:04:00.0",
        "../../../devices/pci0000:00/0000:04:00.0",
    );
    write(r, "sys/bus/pci/devices/not-a-device", b"x");
    // Group directory junk.
    fs::create_dir_all(r.join("sys/kernel/iommu_groups/notanumber/devices")).unwrap();
    // CPU topology junk.
    write(r, "sys/devices/system/cpu/online", b"0-1,zz\n");
    write(r, "sys/devices/system/cpu/present", b"0-1\n");
    write(r, "sys/devices/system/cpu/cpu0/topology/core_id", b"0\n");
    write(
        r,
        "sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
        b"0-1\n",
    );
    write(
        r,
        "sys/devices/system/cpu/cpu0/topology/physical_package_id",
        b"-1\n",
    );
    write(
        r,
        "sys/devices/system/cpu/cpu1/topology/core_id",
        b"garbage\n",
    );
    write(
        r,
        "sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
        b"\x00\x01\x02",
    );
    write(r, "sys/devices/system/cpu/cpu1/cache/index3/level", b"3\n");
    write(
        r,
        "sys/devices/system/cpu/cpu1/cache/index3/shared_cpu_list",
        b"0-99999999\n",
    );
    write(r, "sys/devices/system/node/node0/cpulist", b"\n");
    // procfs junk.
    write(
        r,
        "proc/cpuinfo",
        b"\x00\x01binary junk : : :\n\nprocessor\n",
    );
    write(r, "proc/cmdline", b"\"unterminated quote iommu=pt");
    write(r, "proc/modules", b"only_a_name\n");
    write(
        r,
        "sys/kernel/mm/transparent_hugepage/enabled",
        b"always madvise never\n",
    );
    write(
        r,
        "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        b"lots\n",
    );
    fs::create_dir_all(r.join("sys/kernel/mm/hugepages/hugepages-xyzkB")).unwrap();
    dir
}

#[test]
fn a_damaged_host_scans_with_warnings_and_keeps_the_good_parts() {
    let dir = damaged_host();
    let s = scan(&HostRoot::at(dir.path())).expect("partial data is still a scan");
    // The good GPU is there with its verdict.
    let gpu = s.device("0000:01:00.0").unwrap();
    assert!(gpu.device.is_gpu());
    assert_eq!(gpu.device.iommu_group, Some(1));
    // The odd device survives with what could be read.
    let odd = s.device("0000:03:00.0").unwrap();
    assert_eq!(odd.device.numa_node, None);
    assert_eq!(odd.device.driver.as_deref(), Some("igb"));
    // Garbage is skipped, and each problem names its file.
    assert!(s.device("0000:02:00.0").is_none());
    let has = |frag: &str| s.warnings.iter().any(|w| w.path.contains(frag));
    for frag in [
        "0000:02:00.0/vendor",
        "0000:03:00.0/numa_node",
        "0000:03:00.0/revision",
        "not-a-device",
        "iommu_groups/notanumber",
        "cpu/online",
        "cpu1/topology/core_id",
        "proc/modules",
        "transparent_hugepage/enabled",
        "nr_hugepages",
    ] {
        assert!(has(frag), "no warning naming {frag}: {:#?}", s.warnings);
    }
    let banana = s
        .warnings
        .iter()
        .find(|w| w.path.ends_with("numa_node"))
        .unwrap();
    assert!(
        banana.message.contains("banana"),
        "the value is shown: {}",
        banana.message
    );
    // Topology still has the CPUs it could place.
    assert!(s.topology.summary.cpus_present >= 2);
    // And the JSON of a damaged host serialises.
    serde_json::to_string(&s).unwrap();
}

#[test]
fn a_directory_that_is_not_a_host_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("hello.txt"), "not a host").unwrap();
    match scan(&HostRoot::at(dir.path())) {
        Err(ScanError::NotAHost(p)) => assert!(p.contains(&dir.path().display().to_string())),
        other => panic!("expected NotAHost, got {other:?}"),
    }
    match scan(&HostRoot::at(dir.path().join("missing"))) {
        Err(ScanError::NotADirectory(_)) => {}
        other => panic!("expected NotADirectory, got {other:?}"),
    }
}

#[test]
fn an_empty_sys_tree_is_an_empty_host_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("sys")).unwrap();
    let s = scan(&HostRoot::at(dir.path())).unwrap();
    assert!(s.pci_devices.is_empty());
    assert!(!s.iommu.active);
    assert_eq!(s.topology.summary.cpus_online, 0);
}

#[test]
fn unreadable_files_are_warnings_when_not_root() {
    // Root reads everything, so only an unprivileged run can see EACCES.
    if rustix_is_root() {
        eprintln!("skipped: running as root, permission bits are not enforced");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = damaged_host();
    let p = dir.path().join("proc/cmdline");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o000)).unwrap();
    let s = scan(&HostRoot::at(dir.path())).unwrap();
    let w = s
        .warnings
        .iter()
        .find(|w| w.path.ends_with("proc/cmdline"))
        .unwrap();
    assert!(w.message.contains("permission denied"));
}

fn rustix_is_root() -> bool {
    // /proc/self/status "Uid:" line, first field is the real uid.
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn permission_denied_is_named_as_such() {
    // A write-only sysfs attribute refuses reads even to root (kernfs: no show
    // method -> EACCES). Reading it changes nothing.
    let root = HostRoot::live();
    let path = vfio_assistant::sysroot::HostPath::sys("bus/pci/rescan");
    if !root.exists(&path) {
        eprintln!("skipped: no /sys/bus/pci/rescan on this machine");
        return;
    }
    let err = root.read_text(&path).unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
    assert!(err.to_string().contains("/sys/bus/pci/rescan"), "{err}");
}

#[test]
fn long_non_ascii_values_are_warnings_on_both_scan_threads() {
    // Found by fuzzing: a value over 80 bytes with a multi-byte character at
    // the cut panicked; on the CPU thread the scan then said "no CPUs", exit 0.
    let dir = damaged_host();
    let r = dir.path();
    let junk = format!("x{}", "é".repeat(100));
    write(
        r,
        "sys/devices/system/cpu/cpu0/topology/core_id",
        junk.as_bytes(),
    );
    write(
        r,
        "sys/devices/pci0000:00/0000:03:00.0/numa_node",
        junk.as_bytes(),
    );
    let s = scan(&HostRoot::at(r)).expect("a scan, not a panic");
    for file in ["cpu0/topology/core_id", "0000:03:00.0/numa_node"] {
        let w = s
            .warnings
            .iter()
            .find(|w| w.path.ends_with(file))
            .unwrap_or_else(|| panic!("no warning for {file}: {:#?}", s.warnings));
        assert!(w.message.contains("éé…"), "{}", w.message);
    }
    assert!(s.topology.summary.cpus_present >= 2, "the CPU side is kept");
}

#[test]
fn counters_that_overflow_u64_do_not_panic_the_checks() {
    // /proc/buddyinfo with counts near u64::MAX and a hundred orders, and
    // /proc/interrupts with counts that sum past u64.
    let dir = damaged_host();
    let r = dir.path();
    let max = u64::MAX.to_string();
    let many = vec![max.as_str(); 100].join(" ");
    write(
        r,
        "proc/buddyinfo",
        format!("Node 0, zone   Normal {many}\n").as_bytes(),
    );
    write(
        r,
        "proc/interrupts",
        format!(
            "           CPU0       CPU1\n 40: {max} {max}  PCI-MSIX vfio-msix[0](0000:01:00.0)\n"
        )
        .as_bytes(),
    );
    let s = scan(&HostRoot::at(r)).unwrap();
    let findings = vfio_assistant::checks::run_checks(&s, None);
    let frag = findings
        .iter()
        .find(|f| f.id == "mem.fragmentation")
        .expect("the fragmentation finding is there");
    assert!(frag.title.contains("100%"), "{}", frag.title);
}

/// `scan`, on a thread: a hang fails the test instead of hanging it.
fn scan_within(root: &Path, secs: u64) -> vfio_assistant::host::HostSnapshot {
    let root = HostRoot::at(root);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(scan(&root));
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("the scan finishes instead of hanging")
        .expect("a scan")
}

pub(crate) fn mkfifo(p: &Path) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(ok.success());
}

fn warning_for<'a>(s: &'a vfio_assistant::host::HostSnapshot, file: &str) -> &'a str {
    &s.warnings
        .iter()
        .find(|w| w.path.ends_with(file))
        .unwrap_or_else(|| panic!("no warning for {file}: {:#?}", s.warnings))
        .message
}

#[test]
fn a_fifo_where_a_file_belongs_is_refused_not_waited_on() {
    let dir = damaged_host();
    let r = dir.path();
    fs::remove_file(r.join("proc/cmdline")).unwrap();
    mkfifo(&r.join("proc/cmdline"));
    let numa = r.join("sys/devices/pci0000:00/0000:03:00.0/numa_node");
    fs::remove_file(&numa).unwrap();
    mkfifo(&numa);
    let s = scan_within(r, 60);
    assert!(warning_for(&s, "proc/cmdline").contains("FIFO"));
    assert!(warning_for(&s, "0000:03:00.0/numa_node").contains("FIFO"));
    assert!(s.kernel.cmdline.is_none());
    assert!(s.device("0000:03:00.0").is_some(), "the device is kept");
}

#[test]
fn a_huge_sparse_file_where_an_attribute_belongs_is_read_bounded() {
    let dir = damaged_host();
    let r = dir.path();
    for rel in [
        "sys/devices/pci0000:00/0000:03:00.0/numa_node",
        "proc/cpuinfo",
    ] {
        let f = fs::File::create(r.join(rel)).unwrap();
        f.set_len(1 << 30).unwrap(); // 1 GiB of holes: no disk used
    }
    let start = std::time::Instant::now();
    let s = scan_within(r, 120);
    assert!(warning_for(&s, "numa_node").contains("too large"));
    assert!(warning_for(&s, "proc/cpuinfo").contains("too large"));
    assert!(
        start.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn symlink_loops_are_a_clear_warning() {
    let dir = damaged_host();
    let r = dir.path();
    link(r, "sys/devices/pci0000:00/0000:05:00.0", "0000:05:00.0");
    link(
        r,
        "sys/bus/pci/devices/0000:05:00.0",
        "../../../devices/pci0000:00/0000:05:00.0",
    );
    fs::remove_file(r.join("proc/cmdline")).unwrap();
    link(r, "proc/cmdline", "cmdline2");
    link(r, "proc/cmdline2", "/proc/cmdline");
    let s = scan_within(r, 60);
    assert!(warning_for(&s, "proc/cmdline").contains("loop of symbolic links"));
    assert!(s.device("0000:05:00.0").is_none());
    assert!(s.device("0000:01:00.0").is_some(), "the rest is kept");
}

#[test]
fn links_out_of_a_captured_root_are_never_followed() {
    // A captured tree whose links point at the machine reading it: the scan,
    // its JSON and a snapshot taken from it hold nothing from outside.
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    fs::write(&secret, "SECRET-TOKEN iommu=pt\n").unwrap();
    let dir = damaged_host();
    let r = dir.path();
    fs::remove_file(r.join("proc/cmdline")).unwrap();
    symlink(&secret, r.join("proc/cmdline")).unwrap();
    let depth = "../".repeat(secret.components().count() + 8);
    let relative = format!("{depth}{}", secret.display());
    fs::remove_file(r.join("sys/devices/system/cpu/cpu0/topology/core_id")).unwrap();
    link(r, "sys/devices/system/cpu/cpu0/topology/core_id", &relative);
    fs::remove_file(r.join("proc/modules")).unwrap();
    symlink(outside.path(), r.join("proc/modules-dir")).unwrap();
    link(r, "proc/modules", "modules-dir/secret");

    let s = scan_within(r, 60);
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains("SECRET-TOKEN"), "{json}");
    assert!(warning_for(&s, "proc/cmdline").contains("not present"));
    // Links inside the root still work (the GPU is reached through them).
    assert_eq!(
        s.device("0000:01:00.0").unwrap().device.iommu_group,
        Some(1)
    );

    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("host.tar.gz");
    vfio_assistant::capture::capture(&HostRoot::at(r), &archive, false).unwrap();
    let bytes = fs::read(&archive).unwrap();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let mut body = String::new();
        use std::io::Read;
        let _ = entry.read_to_string(&mut body);
        assert!(
            !body.contains("SECRET-TOKEN"),
            "{} holds the secret",
            entry.path().unwrap().display()
        );
    }
}
