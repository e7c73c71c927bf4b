//! HostRoot's tests: reads through the root, recording, links, messages.

use super::*;
use std::os::unix::fs::symlink;

#[test]
fn reads_through_root_and_records() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("sys/bus/pci/devices")).unwrap();
    fs::create_dir_all(dir.path().join("sys/devices/pci0000:00/0000:00:01.0")).unwrap();
    fs::write(
        dir.path()
            .join("sys/devices/pci0000:00/0000:00:01.0/vendor"),
        "0x10de\n",
    )
    .unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:01.0",
        dir.path().join("sys/bus/pci/devices/0000:00:01.0"),
    )
    .unwrap();
    let root = HostRoot::at(dir.path()).recording();
    let dev = HostPath::sys("bus/pci/devices/0000:00:01.0");
    assert_eq!(root.read_attr(&dev.join("vendor")).unwrap(), "0x10de");
    let real = root.resolve_link(&dev).unwrap().unwrap();
    assert_eq!(real, HostPath::sys("devices/pci0000:00/0000:00:01.0"));
    assert!(root.recorded().iter().any(|p| p.ends_with("vendor")));
    let missing = root.read_attr(&dev.join("nope")).unwrap_err();
    assert!(missing.is_not_found());
    assert!(
        missing
            .to_string()
            .contains("/sys/bus/pci/devices/0000:00:01.0/nope")
    );
}

#[test]
fn an_invalid_value_is_shown_cut_at_a_character() {
    let path = HostPath::sys("x");
    let long = "é".repeat(100);
    let e = ReadError::invalid(&path, &long, "not a number");
    let ReadError::Invalid { value, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(value.chars().count(), 81, "{value}");
    assert!(value.ends_with('…'));
    let short = ReadError::invalid(&path, " ünïcödé \n", "no");
    assert!(short.to_string().contains("\"ünïcödé\""), "{short}");
}

#[test]
fn link_escaping_root_is_none() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("sys")).unwrap();
    symlink("../../../../etc", dir.path().join("sys/evil")).unwrap();
    let root = HostRoot::at(dir.path());
    assert_eq!(root.resolve_link(&HostPath::sys("evil")).unwrap(), None);
}
