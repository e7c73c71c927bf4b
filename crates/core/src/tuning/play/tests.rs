use super::*;

const DEBIAN: &str = "# Master configuration file for the QEMU driver.\n#user = \"libvirt-qemu\"\n#cgroup_device_acl = [\n#    \"/dev/null\", \"/dev/full\", \"/dev/zero\",\n#    \"/dev/random\", \"/dev/urandom\",\n#    \"/dev/ptmx\", \"/dev/kvm\"\n#]\n";

#[test]
fn qemu_conf_keeps_every_line_and_sets_one() {
    let out = set_conf(DEBIAN, "user", "\"anna\"");
    assert!(out.starts_with(DEBIAN), "{out}");
    assert!(out.ends_with("user = \"anna\"\n"), "{out}");
    // Set again: replaced in place, not appended twice.
    let again = set_conf(&out, "user", "\"bert\"");
    assert_eq!(
        again.lines().filter(|l| l.starts_with("user = ")).count(),
        1,
        "{again}"
    );
    assert!(again.contains("user = \"bert\"") && !again.contains("\"anna\""));
    let acl = set_conf(
        DEBIAN,
        "cgroup_device_acl",
        "[\n    \"/dev/null\", \"/dev/kvmfr0\"\n]",
    );
    assert_eq!(
        conf_list(&acl, "cgroup_device_acl").unwrap(),
        vec!["/dev/null", "/dev/kvmfr0"]
    );
    let replaced = set_conf(&acl, "cgroup_device_acl", "[ \"/dev/kvm\" ]");
    assert_eq!(
        conf_list(&replaced, "cgroup_device_acl").unwrap(),
        vec!["/dev/kvm"]
    );
    assert!(!replaced.contains("/dev/kvmfr0"), "{replaced}");
}

#[test]
fn apparmor_keeps_the_sites_lines_and_adds_ours_once() {
    let site = "# Site-specific additions\n/dev/input/by-id/usb-K-event-kbd rw,";
    let out = apparmor_local(Some(site));
    assert!(out.starts_with(site), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.trim() == APPARMOR_KVMFR).count(),
        1
    );
    assert_eq!(apparmor_local(Some(&out)), out);
    assert!(apparmor_local(None).ends_with("/dev/kvmfr0 rw,\n"));
    assert_eq!(
        size_in(Some("# x\noptions kvmfr static_size_mb=64,32\n")),
        Some(64)
    );
    assert_eq!(size_in(Some("options vfio-pci ids=1\n")), None);
    assert_eq!(size_in(None), None);
}

#[test]
fn user_names_are_what_useradd_takes() {
    assert!(valid_user("anna"));
    assert!(valid_user("gamer_01"));
    for bad in ["", "-rf", "Anna", "a b", "a\"b", "root;x", &"x".repeat(33)] {
        assert!(!valid_user(bad), "{bad}");
    }
}
