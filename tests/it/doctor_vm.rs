//! The doctor on a domain. On two real users' passthrough domains with live data
//! built from real /proc/interrupts rows: a VM paused in prelaunch, a GPU whose
//! HDMI audio sits at another guest slot, pinning onto CPUs this host lacks,
//! INTx on a passed-through device, a device IRQ on a VM CPU, emulation-heavy
//! exits. And on a real guest under KVM (required in CI): `doctor --domain`
//! reads its state, its pinning and its exit rates.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::BTreeMap;
use std::process::Command;
use vfio_assistant::checks::model::{Finding, Status};
use vfio_assistant::checks::vm::{AREA as VM_AREA, VmLive, vm_findings};
use vfio_assistant::domain::xml::Document;
use vfio_assistant::host::scan;
use vfio_assistant::libvirt::DomainState;
use vfio_assistant::monitor::rates::rates;
use vfio_assistant::monitor::sample::{Sample, VmThreads};
use vfio_assistant::parse::interrupts::parse_interrupts;
use vfio_assistant::sysroot::HostRoot;

fn domain(name: &str) -> Document {
    let p = format!(
        "{}/tests/fixtures/libvirt-xml/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    Document::parse(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// `doctor SYMPTOM --json --domain NAME` on qemu:///system: the finding `id`.
fn doctor_finding(symptom: &str, domain: &str, id: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args([
            "doctor",
            symptom,
            "--json",
            "--connect",
            "qemu:///system",
            "--domain",
            domain,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("{id}: {v:#}"))
        .clone()
}

fn find<'a>(f: &'a [Finding], id: &str) -> &'a Finding {
    f.iter()
        .find(|x| x.id == id)
        .unwrap_or_else(|| panic!("no {id} in {f:#?}"))
}

const IRQ_A: &str = "           CPU0       CPU1       CPU2       CPU3\n  16:        100          0          0          0   IO-APIC   16-fasteoi   vfio-intx(0000:08:00.1)\n 130:       1000          0          5          0   PCI-MSI 524288-edge      nvme0q1\n LOC:       5000       5000       5000       5000   Local timer interrupts\n";
const IRQ_B: &str = "           CPU0       CPU1       CPU2       CPU3\n  16:        300          0          0          0   IO-APIC   16-fasteoi   vfio-intx(0000:08:00.1)\n 130:       1000          0        505          0   PCI-MSI 524288-edge      nvme0q1\n LOC:       6000       6000       6000       6000   Local timer interrupts\n";

fn live(
    doc: Document,
    state: DomainState,
    qmp: &str,
    pins: BTreeMap<u32, Vec<u32>>,
    exits: (u64, u64),
) -> VmLive {
    let vm = VmThreads {
        name: "win10".into(),
        pins,
        ..VmThreads::default()
    };
    let kvm = |n: u64, io: u64| {
        vec![
            (0, "exits".to_string(), n),
            (0, "io_exits".to_string(), io),
            (0, "halt_exits".to_string(), n / 10),
        ]
    };
    let a = Sample {
        t_ns: 0,
        interrupts: Some(parse_interrupts(IRQ_A)),
        kvm: kvm(0, 0),
        ..Sample::default()
    };
    let b = Sample {
        t_ns: 1_000_000_000,
        interrupts: Some(parse_interrupts(IRQ_B)),
        kvm: kvm(exits.0, exits.1),
        ..Sample::default()
    };
    VmLive {
        name: "win10".into(),
        uri: "qemu:///system".into(),
        state: Ok(state),
        qmp_status: Some(Ok(qmp.into())),
        xml: Some(doc),
        live_xml: None,
        hyperv_offered: None,
        rates: Some(rates(&a, &b, Some(&vm))),
        rates_problem: None,
        interrupts: Some(IRQ_B.into()),
    }
}

#[test]
fn a_real_users_domain_split_audio_intx_and_a_paused_start() {
    let host = crate::support::hosts::good_host();
    let root = HostRoot::at(host.path());
    let snap = scan(&root).unwrap();
    let v = live(
        domain("user-mapmanagement-gpu-passthrough-win10.xml"),
        DomainState::Paused,
        "prelaunch",
        BTreeMap::from([(0, vec![2])]),
        (40_000, 20_000),
    );
    let f = vm_findings(&snap, &root, &v);
    let state = find(&f, "vm.state");
    assert_eq!(state.status, Status::Warn);
    assert!(state.title.contains("prelaunch"), "{state:?}");
    // 08:00.0 at guest bus 5, its audio 08:00.1 at bus 2.
    let c43 = find(&f, "vm.code43");
    assert_eq!(c43.status, Status::Warn, "{c43:?}");
    assert!(c43.fix.as_ref().unwrap().contains("different guest slots"));
    assert!(
        c43.evidence.iter().any(|e| e.value == "on"),
        "kvm hidden is on there"
    );
    let intx = find(&f, "vm.intx");
    assert_eq!(intx.status, Status::Warn, "{intx:?}");
    assert!(intx.evidence[0].value.contains("0000:08:00.1"));
    let irq = find(&f, "vm.irq_on_vm_cpus");
    assert_eq!(irq.status, Status::Warn, "{irq:?}");
    assert!(
        irq.evidence[0].value.contains("500/s on CPUs [2]"),
        "{irq:?}"
    );
    assert!(
        irq.evidence.iter().all(|e| !e.source.contains("LOC")),
        "timer ticks are not a device"
    );
    let exits = find(&f, "vm.exits");
    assert_eq!(exits.status, Status::Warn, "half the exits are port I/O");
    // The user's Hyper-V list lacks synic/stimer and more.
    let hv = find(&f, "vm.hyperv");
    assert_eq!(hv.status, Status::Warn, "{hv:?}");
    assert!(
        f.iter().all(|x| !x.why.is_empty()),
        "every finding says why"
    );
    let ids: Vec<&str> = f.iter().map(|x| x.id.as_str()).collect();
    // All but vm.last_start, which report::findings adds from the QEMU log.
    let declared: Vec<&str> = VM_AREA.ids.iter().map(|c| c.as_str()).collect();
    assert_eq!(ids.len(), declared.len() - 1);
    assert!(ids.iter().all(|i| declared.contains(i)), "{ids:?}");
}

#[test]
fn pinning_onto_cpus_this_host_lacks_is_an_error() {
    let host = crate::support::hosts::good_host();
    let root = HostRoot::at(host.path());
    let snap = scan(&root).unwrap();
    // joe-p pinned to CPUs 6-11,18-23 of a 24-thread host; this one has 12.
    let v = live(
        domain("user-joe-p-vfio-headless-win10.xml"),
        DomainState::Running,
        "running",
        BTreeMap::new(),
        (300, 0),
    );
    let f = vm_findings(&snap, &root, &v);
    let pin = find(&f, "vm.pinning");
    assert_eq!(pin.status, Status::Fail, "{pin:?}");
    assert!(
        pin.fix
            .as_ref()
            .unwrap()
            .contains("offline or does not exist")
    );
    assert_eq!(find(&f, "vm.state").status, Status::Pass);
    assert_eq!(find(&f, "vm.exits").status, Status::Pass);
    // The user's patched VBIOS is not on this host: QEMU would not start.
    let c43 = find(&f, "vm.code43");
    assert_eq!(c43.status, Status::Fail, "{c43:?}");
    assert!(
        c43.fix
            .as_ref()
            .unwrap()
            .contains("ROM file /usr/share/vgabios/patched-firmware.rom for")
    );
    // With the ROM in place: what is left is the split GPU (virt-manager's
    // default puts each function on its own root port; this user's too).
    crate::support::hosts::put(host.path(), "usr/share/vgabios/patched-firmware.rom", "rom");
    let f = vm_findings(&snap, &root, &v);
    let c43 = find(&f, "vm.code43");
    assert_eq!(c43.status, Status::Warn, "{c43:?}");
    assert!(!c43.fix.as_ref().unwrap().contains("ROM"), "{c43:?}");
}

#[test]
fn doctor_reads_a_real_running_guest() {
    let Some(hv) = crate::support::vm::system() else {
        return;
    };
    if !crate::support::vm::kvm_guest_possible(2) {
        return;
    }
    let guest = crate::support::vm::running_guest(&hv, "doc", &[0, 1]);
    let name = guest.1.clone();
    // vCPU 0 on CPU 0: the planner's first rule.
    let pin = doctor_finding("stutter", &name, "vm.pinning");
    assert_eq!(pin["status"], "warn");
    assert!(pin["fix"].as_str().unwrap().contains("CPU 0"), "{pin}");
    let exits = doctor_finding("high-cpu-exits", &name, "vm.exits");
    assert_eq!(exits["status"], "pass", "{exits}");
    assert!(
        exits["title"].as_str().unwrap().contains("VM exits/s"),
        "{exits}"
    );
    let state = doctor_finding("paused-at-start", &name, "vm.state");
    assert_eq!(state["status"], "pass", "{state}");
    assert!(
        state["title"].as_str().unwrap().contains("QEMU: running"),
        "{state}"
    );
}

/// Pinning applied to a running domain's definition (the CPU page's Apply,
/// `domain define`) takes effect at its next start: the finding says so
/// instead of "not pinned".
#[test]
fn new_pinning_on_a_running_vm_takes_effect_at_the_next_start() {
    let host = crate::support::hosts::good_host();
    let root = HostRoot::at(host.path());
    let snap = scan(&root).unwrap();
    let running = domain("user-mapmanagement-gpu-passthrough-win10.xml");
    let mut defined = running.clone();
    defined.root.remove_children("cputune");
    let mut ct = vfio_assistant::domain::xml::Element::new("cputune");
    for (v, c) in [(0, "2"), (1, "8")] {
        let mut p = vfio_assistant::domain::xml::Element::new("vcpupin");
        p.set_attr("vcpu", &v.to_string());
        p.set_attr("cpuset", c);
        ct.append_child(p);
    }
    defined.root.append_child(ct);
    let mut v = live(
        defined,
        DomainState::Running,
        "running",
        BTreeMap::new(),
        (1, 0),
    );
    v.live_xml = Some(running);
    let f = vm_findings(&snap, &root, &v);
    let pin = find(&f, "vm.pinning");
    assert!(
        pin.title
            .contains("applied, takes effect at the next start"),
        "{pin:?}"
    );
    assert!(
        pin.evidence
            .iter()
            .any(|e| e.source == "running now (live XML)"),
        "{pin:?}"
    );
    // When the running VM has the same pinning, nothing is said about it.
    v.live_xml = v.xml.clone();
    let pin = find(&vm_findings(&snap, &root, &v), "vm.pinning").clone();
    assert!(!pin.title.contains("next start"), "{pin:?}");
}

/// What the host cannot offer is said as such, never a cause with a fix that
/// cannot work (`domain tune` cannot add an enlightenment KVM lacks).
#[test]
fn hyperv_the_host_does_not_offer_is_not_a_cause() {
    let host = crate::support::hosts::good_host();
    let root = HostRoot::at(host.path());
    let snap = scan(&root).unwrap();
    let mut d = domain("user-mapmanagement-gpu-passthrough-win10.xml");
    if let Some(f) = d.root.child_mut("features") {
        f.remove_children("hyperv");
    }
    let mut v = live(d, DomainState::Shutoff, "", BTreeMap::new(), (1, 0));
    // This project's nested CI host offers only spinlocks and vendor_id:
    // spinlocks can be added, the rest are not offered.
    v.hyperv_offered = Some(vec!["spinlocks".into(), "vendor_id".into()]);
    let hv = find(&vm_findings(&snap, &root, &v), "vm.hyperv").clone();
    assert_eq!(hv.status, Status::Warn);
    assert!(
        hv.title
            .contains("missing: spinlocks; not offered by this host: relaxed"),
        "{hv:?}"
    );
    assert!(
        hv.fix
            .as_deref()
            .unwrap_or("")
            .contains("Turn on spinlocks ("),
        "{hv:?}"
    );
    assert_eq!(hv.action, Some(vfio_assistant::finding::Action::TuneDomain));
    assert_eq!(
        hv.command.as_deref(),
        Some("vfio-assistant domain tune --domain win10 --diff")
    );
    // Nothing it lacks can be added: said, not a cause.
    v.hyperv_offered = Some(vec!["vendor_id".into()]);
    let f = vm_findings(&snap, &root, &v);
    let hv = find(&f, "vm.hyperv");
    assert!(hv.title.contains("not offered by this host"), "{hv:?}");
    assert_eq!(hv.status, Status::Info, "{hv:?}");
    assert!(hv.fix.is_none(), "{hv:?}");
    // On a host that offers them, they are missing and `domain tune` adds them.
    v.hyperv_offered = None;
    let hv = find(&vm_findings(&snap, &root, &v), "vm.hyperv").clone();
    assert_eq!(hv.status, Status::Warn);
    assert!(
        hv.fix_text().unwrap_or_default().contains("domain tune"),
        "{hv:?}"
    );
    assert!(hv.command.is_some() && hv.action.is_some(), "{hv:?}");
}
