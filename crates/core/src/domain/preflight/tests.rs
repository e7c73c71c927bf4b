//! The preflight predicts each failure seen when users' domains did not
//! start (issue 13), on a domain that has it; the adaptations are the ones
//! that made this project's nested-KVM CI machine start the guest.

use super::*;
use crate::host::scan;
use crate::host::topology::HugepagePool;
use crate::sysroot::HostRoot;

/// A snapshot of a small host: a temporary root with a cpuinfo and meminfo.
fn host(cpu_flags: &str, mem_total_kib: u64, mem_avail_kib: u64) -> HostSnapshot {
    let dir = tempfile::tempdir().unwrap();
    let put = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    put(
        "proc/cpuinfo",
        &format!("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: {cpu_flags}\n"),
    );
    put(
        "proc/meminfo",
        &format!(
            "MemTotal:       {mem_total_kib} kB\nMemFree:        {mem_avail_kib} kB\nMemAvailable:   {mem_avail_kib} kB\n"
        ),
    );
    std::fs::create_dir_all(dir.path().join("sys/bus/pci/devices")).unwrap();
    scan(&HostRoot::at(dir.path())).unwrap()
}

fn facts(snap: &HostSnapshot) -> PreflightFacts<'_> {
    PreflightFacts {
        snap,
        caps: None,
        networks: Some(vec![NetworkSummary {
            name: "default".into(),
            active: true,
            autostart: true,
        }]),
        interfaces: Some(vec!["lo".into(), "br0".into()]),
        files: Vec::new(),
        learnt: Vec::new(),
        trial: Trial::NotRun("test".into()),
        schema: None,
    }
}

const DOMAIN: &str = "<domain type='kvm'>\n  <name>win11</name>\n  <memory unit='MiB'>4096</memory>\n  <vcpu>2</vcpu>\n  <os firmware='efi'>\n    <type arch='x86_64' machine='q35'>hvm</type>\n    <firmware>\n      <feature enabled='yes' name='enrolled-keys'/>\n      <feature enabled='yes' name='secure-boot'/>\n    </firmware>\n    <loader secure='yes'/>\n  </os>\n  <features>\n    <acpi/>\n    <smm state='on'/>\n  </features>\n  <cpu mode='host-passthrough' check='none'/>\n  <devices>\n    <disk type='file' device='disk'>\n      <source file='/var/lib/libvirt/images/win11.qcow2'/>\n      <target dev='sda' bus='sata'/>\n    </disk>\n    <disk type='file' device='cdrom'>\n      <source file='Win11.iso'/>\n      <target dev='sdb' bus='sata'/>\n    </disk>\n    <interface type='network'>\n      <source network='default'/>\n    </interface>\n  </devices>\n</domain>\n";

fn doc(text: &str) -> Document {
    Document::parse(text).unwrap()
}

fn by_id<'a>(f: &'a [Finding], id: &str) -> Vec<&'a Finding> {
    f.iter().filter(|f| f.id == id).collect()
}

#[test]
fn relative_paths_are_reported_and_made_absolute() {
    let snap = host("fpu", 16_000_000, 8_000_000);
    let d = doc(DOMAIN);
    let f = check(&d, &facts(&snap));
    let rel: Vec<_> = by_id(&f, "preflight.file")
        .into_iter()
        .filter(|f| f.title.contains("relative"))
        .collect();
    assert_eq!(rel.len(), 1, "{f:#?}");
    assert!(rel[0].title.contains("'Win11.iso'"), "{:?}", rel[0]);
    assert_eq!(rel[0].status, Status::Fail);
    let mut d = doc(DOMAIN);
    let edits = absolute_paths(&mut d, Path::new("/home/ana/isos"));
    assert_eq!(edits.len(), 1, "{edits:?}");
    assert!(d.serialize().contains("file='/home/ana/isos/Win11.iso'"));
    // Done once, nothing more to do.
    assert!(absolute_paths(&mut d, Path::new("/elsewhere")).is_empty());
}

#[test]
fn a_nested_host_without_arch_capabilities_disables_it() {
    let nested = host("fpu vmx hypervisor", 16_000_000, 8_000_000);
    let mut d = doc(DOMAIN);
    let causes = known_from_host(&d, &nested, false);
    assert_eq!(causes.len(), 1);
    let edits = adapt(&mut d, &causes);
    assert_eq!(edits.len(), 1);
    assert!(
        d.serialize()
            .contains("<feature policy='disable' name='arch-capabilities'/>"),
        "{}",
        d.serialize()
    );
    assert!(edits[0].why.contains("0x10a"), "{edits:?}");
    // Bare metal, or a nested host whose CPU has it: nothing to adapt.
    assert!(known_from_host(&d, &host("fpu vmx", 1, 1), false).is_empty());
    assert!(known_from_host(&d, &host("fpu hypervisor arch_capabilities", 1, 1), false).is_empty());
}

/// A host without /dev/kvm: a KVM domain is emulated, and so is one that
/// is emulated already but was tuned since (`domain tune` gives any domain a
/// host-passthrough CPU, Hyper-V and hypervclock: seen on a booted host,
/// where the define after the tune failed its trial start). One emulated
/// all the way is left alone.
#[test]
fn without_kvm_every_kvm_only_part_is_emulated() {
    let mut snap = host("fpu", 16_000_000, 8_000_000);
    snap.system.has_dev = true;
    snap.firmware.dev_kvm = false;
    let tuned = DOMAIN.replace("<domain type='kvm'>", "<domain type='qemu'>").replace(
        "    <smm state='on'/>\n",
        "    <smm state='on'/>\n    <hyperv mode='custom'>\n      <spinlocks state='on' retries='8191'/>\n    </hyperv>\n",
    ).replace(
        "  <cpu mode='host-passthrough' check='none'/>\n",
        "  <cpu mode='host-passthrough' check='none'/>\n  <clock offset='localtime'>\n    <timer name='hypervclock' present='yes'/>\n  </clock>\n",
    );
    for (what, text) in [
        ("type kvm", DOMAIN.to_string()),
        ("emulated, then tuned", tuned),
    ] {
        let mut d = doc(&text);
        let causes = known_from_host(&d, &snap, true);
        let ids: Vec<&str> = causes.iter().map(|c| c.id).collect();
        assert_eq!(ids, ["kvm.none"], "{what}");
        adapt(&mut d, &causes);
        let out = d.serialize();
        assert!(out.contains("<domain type='qemu'>"), "{what}: {out}");
        assert!(out.contains("mode='maximum'"), "{what}: {out}");
        for gone in ["host-passthrough", "<hyperv", "hypervclock"] {
            assert!(!out.contains(gone), "{what}: {gone} left in {out}");
        }
        // Emulated all the way now: nothing more.
        assert!(known_from_host(&d, &snap, true).is_empty(), "{what}: {out}");
    }
}

#[test]
fn no_smm_turns_smm_and_secure_boot_off() {
    let mut d = doc(DOMAIN);
    let smm = crate::domain::start_failure::explain(
        "qemu-system-x86_64: System Management Mode not supported by this hypervisor.",
        "",
    );
    let edits = adapt(&mut d, &smm);
    assert_eq!(edits.len(), 1);
    let out = d.serialize();
    assert!(out.contains("<smm state='off'/>"), "{out}");
    assert!(
        out.contains("<feature enabled='no' name='secure-boot'/>"),
        "{out}"
    );
    assert!(
        out.contains("<feature enabled='no' name='enrolled-keys'/>"),
        "{out}"
    );
    // libvirt refuses loader secure='no' with firmware autoselection.
    assert!(!out.contains("secure='"), "{out}");
    // Applying it again changes nothing.
    assert!(adapt(&mut d, &smm).is_empty());
}

#[test]
fn uefi_that_cannot_run_falls_back_to_seabios() {
    let mut d = doc(DOMAIN);
    let c = crate::domain::start_failure::explain(
        "",
        "KVM internal error. Suberror: 1\nemulation failure\n",
    );
    assert_eq!(adapt(&mut d, &c).len(), 1);
    let out = d.serialize();
    assert!(
        !out.contains("firmware") && !out.contains("loader"),
        "{out}"
    );
}

#[test]
fn a_domain_without_a_disk_is_refused() {
    let snap = host("fpu", 16_000_000, 8_000_000);
    let text = DOMAIN.replace(
        "    <disk type='file' device='disk'>\n      <source file='/var/lib/libvirt/images/win11.qcow2'/>\n      <target dev='sda' bus='sata'/>\n    </disk>\n",
        "",
    );
    let f = check(&doc(&text), &facts(&snap));
    let disk = by_id(&f, "preflight.disk");
    assert_eq!(disk.len(), 1, "{f:#?}");
    assert_eq!(disk[0].status, Status::Fail);
    assert!(disk[0].title.contains("ISO but no disk"), "{:?}", disk[0]);
    assert!(blocks_start(&f));
    // With a disk there is no such finding.
    assert!(by_id(&check(&doc(DOMAIN), &facts(&snap)), "preflight.disk").is_empty());
}

#[test]
fn memory_is_checked_against_the_host() {
    // 16 GiB asked on a host with 7 GiB: the wizard's old default.
    let small = host("fpu", 7 * 1024 * 1024, 5 * 1024 * 1024);
    let text = DOMAIN.replace(
        "<memory unit='MiB'>4096</memory>",
        "<memory unit='GiB'>16</memory>",
    );
    let f = check(&doc(&text), &facts(&small));
    let m = by_id(&f, "preflight.memory");
    assert_eq!(m[0].status, Status::Fail, "{m:?}");
    assert!(
        m[0].title.contains("16 GiB") && m[0].title.contains("7 GiB"),
        "{m:?}"
    );
    // More than is free now, less than there is: a warning.
    let text = DOMAIN.replace(
        "<memory unit='MiB'>4096</memory>",
        "<memory unit='MiB'>6144</memory>",
    );
    let f = check(&doc(&text), &facts(&small));
    assert_eq!(by_id(&f, "preflight.memory")[0].status, Status::Warn);
    let f = check(&doc(DOMAIN), &facts(&small));
    assert_eq!(by_id(&f, "preflight.memory")[0].status, Status::Pass);
}

#[test]
fn hugepages_short_is_a_failure() {
    let mut snap = host("fpu", 32 * 1024 * 1024, 30 * 1024 * 1024);
    snap.kernel.hugepages = vec![HugepagePool {
        size_kib: 2048,
        total: 1024,
        free: 1000,
    }];
    let text = DOMAIN.replace(
        "  <vcpu>",
        "  <memoryBacking>\n    <hugepages>\n      <page size='2048' unit='KiB'/>\n    </hugepages>\n  </memoryBacking>\n  <vcpu>",
    );
    let f = check(&doc(&text), &facts(&snap));
    let h = by_id(&f, "preflight.hugepages");
    assert_eq!(h[0].status, Status::Fail, "{h:?}");
    assert!(h[0].title.contains("2048 needed, 1000 free"), "{h:?}");
    snap.kernel.hugepages[0].free = 2048;
    let f = check(&doc(&text), &facts(&snap));
    assert_eq!(by_id(&f, "preflight.hugepages")[0].status, Status::Pass);
}

#[test]
fn the_network_must_exist_and_run() {
    let snap = host("fpu", 16_000_000, 8_000_000);
    let mut fx = facts(&snap);
    fx.networks = Some(vec![NetworkSummary {
        name: "default".into(),
        active: false,
        autostart: false,
    }]);
    let f = check(&doc(DOMAIN), &fx);
    let n = by_id(&f, "preflight.network");
    assert_eq!(n[0].status, Status::Warn, "{n:?}");
    assert!(n[0].title.contains("not running"));
    fx.networks = Some(Vec::new());
    let f = check(&doc(DOMAIN), &fx);
    assert_eq!(by_id(&f, "preflight.network")[0].status, Status::Fail);
    let bridged = DOMAIN.replace(
        "<interface type='network'>\n      <source network='default'/>",
        "<interface type='bridge'>\n      <source bridge='br9'/>",
    );
    let f = check(&doc(&bridged), &facts(&snap));
    assert_eq!(by_id(&f, "preflight.network")[0].status, Status::Fail);
}

#[test]
fn files_must_be_there_and_reachable() {
    let snap = host("fpu", 16_000_000, 8_000_000);
    let mut fx = facts(&snap);
    let mut d = doc(DOMAIN);
    absolute_paths(&mut d, Path::new("/home/ana"));
    fx.files = vec![
        FileFact {
            path: "/var/lib/libvirt/images/win11.qcow2".into(),
            role: FileRole::Disk,
            state: FileState::Missing,
        },
        FileFact {
            path: "/home/ana/Win11.iso".into(),
            role: FileRole::Cdrom,
            state: FileState::FolderClosed("/home/ana".into()),
        },
    ];
    let f = check(&d, &fx);
    let files = by_id(&f, "preflight.file");
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.iter().all(|f| f.status == Status::Fail));
    assert!(
        files
            .iter()
            .any(|f| f.fix.as_deref().unwrap_or("").contains("qemu-img create"))
    );
    assert!(files.iter().any(|f| {
        f.fix
            .as_deref()
            .unwrap_or("")
            .contains("chmod o+x /home/ana")
    }));
}

#[test]
fn the_trial_copy_keeps_cpu_and_firmware_and_drops_the_rest() {
    let mut text = DOMAIN.replace(
        "  <vcpu>2</vcpu>",
        "  <uuid>9d1f2c4e-0000-4000-8000-000000000001</uuid>\n  <vcpu>8</vcpu>\n  <cputune>\n    <vcpupin vcpu='0' cpuset='2'/>\n  </cputune>",
    );
    text = text.replace("<cpu mode='host-passthrough' check='none'/>", "<cpu mode='host-passthrough' check='none'>\n    <topology sockets='1' cores='4' threads='2'/>\n  </cpu>");
    let t = trial_domain(&doc(&text), "probe", 2);
    let out = t.serialize();
    assert!(out.contains("<name>probe</name>"), "{out}");
    assert!(
        !out.contains("<uuid>") && !out.contains("cputune") && !out.contains("<disk"),
        "{out}"
    );
    assert!(
        out.contains("<smm state='on'/>") && out.contains("host-passthrough"),
        "{out}"
    );
    assert!(
        out.contains(">2</vcpu>") && !out.contains("topology"),
        "{out}"
    );
    assert!(out.contains("<memory unit='MiB'>128</memory>"), "{out}");
}

#[test]
fn memory_units_are_read_as_libvirt_does() {
    let m = |t: &str| memory_kib(&doc(&format!("<domain>{t}</domain>")));
    assert_eq!(m("<memory unit='GiB'>16</memory>"), Some(16 * 1024 * 1024));
    assert_eq!(m("<memory>8388608</memory>"), Some(8_388_608));
    assert_eq!(m("<memory unit='GB'>1</memory>"), Some(976_562));
    assert_eq!(m("<memory unit='TiB'>99999999999999999999</memory>"), None);
    assert_eq!(m("<memory unit='furlong'>1</memory>"), None);
}
