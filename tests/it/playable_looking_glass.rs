//! Looking Glass on the domain's side (issue 31): whichever way the domain
//! is made (`domain new` with or without `--no-spice`, `domain tune` on a
//! virt-manager domain), the client can connect — SPICE on 127.0.0.1, the
//! agent's spicevmc channel, no tablet, vga video — and the user is told
//! the client's command for the shared memory the domain really has. The
//! kvmfr arguments are ours to replace: tuned twice, once; switched to
//! /dev/shm, gone; a domain an earlier version broke is repaired; anybody
//! else's arguments stay.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::hosts::base_host;
use crate::support::schema::validate_domain;
use std::process::{Command, Output};
use vfio_assistant::domain::from_host::{Choices, prepare};
use vfio_assistant::domain::playable::{LookingGlass, Playable, apply_playable};
use vfio_assistant::domain::template::{Windows, new_windows};
use vfio_assistant::domain::validate::{SchemaResult, schema_check};
use vfio_assistant::domain::xml::{Document, Element};
use vfio_assistant::host::scan;
use vfio_assistant::sysroot::HostRoot;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(args)
        .output()
        .unwrap()
}

/// `domain new` of the demo host's win11 with its GPU, and `extra`.
fn domain_new(extra: &[&str]) -> Output {
    let mut args = vec![
        "--demo",
        "domain",
        "new",
        "--name",
        "win11",
        "--gpu",
        "0c:00.0",
        "--vcpus",
        "6",
        "--memory",
        "16G",
        "--disk",
        "/var/lib/libvirt/images/win11.qcow2",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn check_schema(xml: &str, what: &str) {
    if let Some(r) = validate_domain(xml) {
        r.unwrap_or_else(|e| panic!("{what}: libvirt 10.7 RNG rejects it:\n{e}\n{xml}"));
    }
    match schema_check(xml) {
        SchemaResult::Valid => {}
        SchemaResult::Invalid(e) => panic!("{what}: virt-xml-validate rejects it:\n{e}\n{xml}"),
        SchemaResult::Unavailable(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "virt-xml-validate is required in CI: {why}"
            );
            eprintln!("skipped virt-xml-validate: {why}");
        }
    }
}

fn lg(kvmfr: bool) -> Playable {
    Playable {
        looking_glass: Some(LookingGlass {
            width: 1920,
            height: 1080,
            hdr: false,
            kvmfr,
        }),
        ..Playable::default()
    }
}

fn devices(doc: &Document) -> Vec<&Element> {
    doc.root.child("devices").unwrap().elements().collect()
}

/// What the Looking Glass client needs from the domain, each said when
/// missing: a SPICE server on 127.0.0.1, the agent's channel, no tablet,
/// a display device for SPICE.
fn assert_client_can_connect(xml: &str, what: &str) {
    let doc = Document::parse(xml).unwrap();
    let devs = devices(&doc);
    let spice: Vec<&&Element> = devs
        .iter()
        .filter(|e| e.name == "graphics" && e.attr("type") == Some("spice"))
        .collect();
    assert_eq!(spice.len(), 1, "{what}: one SPICE server:\n{xml}");
    let listens: Vec<&Element> = spice[0].elements().filter(|e| e.name == "listen").collect();
    assert_eq!(listens.len(), 1, "{what}:\n{xml}");
    assert_eq!(listens[0].attr("type"), Some("address"), "{what}:\n{xml}");
    assert_eq!(
        listens[0].attr("address"),
        Some("127.0.0.1"),
        "{what}:\n{xml}"
    );
    assert!(
        spice[0].attr("autoport") == Some("yes") || spice[0].attr("port").is_some(),
        "{what}: SPICE needs a port:\n{xml}"
    );
    assert!(
        devs.iter().any(|e| e.name == "channel"
            && e.attr("type") == Some("spicevmc")
            && e.child("target").and_then(|t| t.attr("type")) == Some("virtio")
            && e.child("target").and_then(|t| t.attr("name")) == Some("com.redhat.spice.0")),
        "{what}: no SPICE agent channel:\n{xml}"
    );
    assert!(
        !devs
            .iter()
            .any(|e| e.name == "input" && e.attr("type") == Some("tablet")),
        "{what}: a tablet:\n{xml}"
    );
    let video: Vec<&&Element> = devs.iter().filter(|e| e.name == "video").collect();
    assert_eq!(video.len(), 1, "{what}:\n{xml}");
    assert_eq!(
        video[0].child("model").and_then(|m| m.attr("type")),
        Some("vga"),
        "{what}: Looking Glass's guide (B6, B7) has vga:\n{xml}"
    );
}

#[test]
fn a_new_looking_glass_domain_has_spice_where_the_client_reaches_it() {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    for kvmfr in [false, true] {
        for spice in [true, false] {
            let c = Choices {
                name: "lg".into(),
                windows: Windows::Eleven,
                vcpus: 4,
                memory_mib: 8192,
                disk: Some("/var/lib/libvirt/images/lg.qcow2".into()),
                spice,
                playable: lg(kvmfr),
                ..Choices::default()
            };
            let spec = prepare(&snap, &c, None).unwrap().spec;
            let xml = new_windows(&spec).unwrap().xml;
            let what = format!("kvmfr {kvmfr}, spice {spice}");
            assert!(!xml.contains("<listen type='none'/>"), "{what}:\n{xml}");
            assert_client_can_connect(&xml, &what);
            check_schema(&xml, &what);
        }
    }
}

/// `domain new --looking-glass` prints how to start the client, with the
/// shared memory file the domain uses and the SPICE address it listens on.
#[test]
fn domain_new_tells_the_client_command_and_its_config() {
    for (kvmfr, file) in [(true, "/dev/kvmfr0"), (false, "/dev/shm/looking-glass")] {
        let mut extra = vec!["--looking-glass", "1920x1080", "--sound", "auto"];
        if kvmfr {
            extra.push("--kvmfr");
        }
        let out = domain_new(&extra);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        let xml = text(&out.stdout);
        assert_client_can_connect(&xml, &format!("domain new, kvmfr {kvmfr}"));
        // SPICE audio needs the SPICE server it plays into.
        assert!(xml.contains("<audio id='1' type='spice'>"), "{xml}");
        let command =
            format!("looking-glass-client -f {file} spice:host=127.0.0.1 spice:port=5900");
        assert!(err.contains(&command), "no `{command}` in:\n{err}");
        assert!(
            err.contains(&format!("shmFile={file}")) && err.contains("host=127.0.0.1"),
            "no client.ini in:\n{err}"
        );
        assert!(err.contains("domdisplay win11"), "{err}");
    }
}

/// Sound through SPICE asked for on a domain with no SPICE display (no
/// Looking Glass, `--no-spice`): refused with the way out, nothing written;
/// with the install display kept, it is taken.
#[test]
fn spice_sound_without_a_spice_display_is_refused() {
    let out = domain_new(&["--sound", "spice", "--no-spice"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(
        err.contains("needs a SPICE display") && err.contains("--sound pipewire"),
        "{err}"
    );
    let out = domain_new(&["--sound", "spice"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let xml = text(&out.stdout);
    assert!(
        xml.contains("<graphics type='spice'>") && xml.contains("<audio id='1' type='spice'>"),
        "{xml}"
    );
}

/// A virt-manager domain: a tablet, SPICE listening nowhere (as `domain
/// new` wrote it before), and QEMU arguments of the user's own.
const VIRT_MANAGER: &str =
    "<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>win11</name>
  <memory unit='KiB'>8388608</memory>
  <vcpu placement='static'>4</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <input type='tablet' bus='usb'/>
    <input type='mouse' bus='ps2'/>
    <graphics type='spice'>
      <listen type='none'/>
      <image compression='off'/>
    </graphics>
    <video>
      <model type='none'/>
    </video>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-smbios'/>
    <qemu:arg value='type=1,manufacturer=ACME'/>
  </qemu:commandline>
</domain>
";

fn args_of(xml: &str) -> Vec<String> {
    Document::parse(xml)
        .unwrap()
        .root
        .child("qemu:commandline")
        .map(|c| {
            c.elements()
                .filter(|e| e.name == "qemu:arg")
                .map(|e| e.attr("value").unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The Looking Glass devices QEMU gets from the arguments: each `-device`
/// or `-object` must be followed by its value (QEMU takes the next argument
/// as the value whatever it is: "'-object' is not a valid device model
/// name"), and the ivshmem device and its backend appear once each.
fn assert_one_kvmfr_pair(args: &[String], what: &str) {
    for (i, a) in args.iter().enumerate() {
        if a == "-device" || a == "-object" {
            let v = args.get(i + 1).map(String::as_str).unwrap_or("");
            assert!(
                !v.is_empty() && !v.starts_with('-'),
                "{what}: {a} without its value: {args:?}"
            );
        }
    }
    let devices = args
        .windows(2)
        .filter(|w| w[0] == "-device" && w[1].contains("ivshmem-plain"))
        .count();
    let backends = args
        .windows(2)
        .filter(|w| w[0] == "-object" && w[1].contains("/dev/kvmfr0"))
        .count();
    assert_eq!((devices, backends), (1, 1), "{what}: {args:?}");
}

fn shmems(xml: &str) -> usize {
    devices(&Document::parse(xml).unwrap())
        .iter()
        .filter(|e| e.name == "shmem")
        .count()
}

#[test]
fn tuned_twice_one_ivshmem_device_and_switching_leaves_only_the_new_kind() {
    let mut doc = Document::parse(VIRT_MANAGER).unwrap();
    apply_playable(&mut doc, &lg(true)).unwrap();
    let once = doc.serialize();
    assert_one_kvmfr_pair(&args_of(&once), "tuned once");
    // Again: not one argument more, the same document, nothing said.
    let again = apply_playable(&mut doc, &lg(true)).unwrap();
    let twice = doc.serialize();
    assert_one_kvmfr_pair(&args_of(&twice), "tuned twice");
    assert_eq!(once, twice);
    assert!(again.is_empty(), "{again:#?}");
    assert_client_can_connect(&once, "tuned once");
    check_schema(&once, "tuned once");
    // The user's own arguments are where they were.
    assert_eq!(
        &args_of(&twice)[..2],
        ["-smbios", "type=1,manufacturer=ACME"]
    );
    // kvmfr -> /dev/shm: the <shmem> only, the user's arguments kept.
    apply_playable(&mut doc, &lg(false)).unwrap();
    let shm = doc.serialize();
    assert_eq!(
        args_of(&shm),
        ["-smbios", "type=1,manufacturer=ACME"],
        "{shm}"
    );
    assert_eq!(shmems(&shm), 1, "{shm}");
    check_schema(&shm, "switched to shm");
    apply_playable(&mut doc, &lg(false)).unwrap();
    assert_eq!(doc.serialize(), shm, "shm applied twice");
    // And back: no <shmem>, one pair.
    apply_playable(&mut doc, &lg(true)).unwrap();
    let back = doc.serialize();
    assert_eq!(shmems(&back), 0, "{back}");
    assert_one_kvmfr_pair(&args_of(&back), "switched back");
    // Without user arguments, switching to shm leaves no empty block.
    let mut bare = Document::parse(&VIRT_MANAGER.replace(
        "    <qemu:arg value='-smbios'/>\n    <qemu:arg value='type=1,manufacturer=ACME'/>\n",
        "",
    ))
    .unwrap();
    bare.root.remove_children("qemu:commandline");
    apply_playable(&mut bare, &lg(true)).unwrap();
    apply_playable(&mut bare, &lg(false)).unwrap();
    assert!(
        !bare.serialize().contains("qemu:commandline"),
        "{}",
        bare.serialize()
    );
}

/// What an earlier version left after a second tuning (the values replaced,
/// the first -device and -object kept): QEMU refuses to start it. Tuned
/// again, one pair.
#[test]
fn a_domain_broken_by_an_earlier_tuning_is_repaired() {
    let broken = VIRT_MANAGER.replace(
        "  </qemu:commandline>",
        "    <qemu:arg value='-device'/>\n    <qemu:arg value='-object'/>\n    <qemu:arg value=\"-device\"/>\n    <qemu:arg value=\"{'driver':'ivshmem-plain','id':'shmem0','memdev':'looking-glass'}\"/>\n    <qemu:arg value=\"-object\"/>\n    <qemu:arg value=\"{'qom-type':'memory-backend-file','id':'looking-glass','mem-path':'/dev/kvmfr0','size':33554432,'share':true}\"/>\n  </qemu:commandline>",
    );
    let mut doc = Document::parse(&broken).unwrap();
    let edits = apply_playable(&mut doc, &lg(true)).unwrap();
    let out = doc.serialize();
    let args = args_of(&out);
    assert_one_kvmfr_pair(&args, "repaired");
    assert_eq!(args.len(), 6, "{args:?}");
    assert!(
        edits
            .iter()
            .any(|e| e.path == "qemu:commandline" && e.why.contains("leftover")),
        "{edits:#?}"
    );
}

/// `vfio-assistant domain tune FILE --looking-glass … --kvmfr`, its output
/// tuned again the same way: one ivshmem device, a SPICE the client reaches.
#[test]
fn domain_tune_twice_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut xml = VIRT_MANAGER.to_string();
    for round in 1..=2 {
        let f = dir.path().join(format!("round{round}.xml"));
        std::fs::write(&f, &xml).unwrap();
        let out = run(&[
            "domain",
            "tune",
            f.to_str().unwrap(),
            "--looking-glass",
            "2560x1440",
            "--kvmfr",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        xml = text(&out.stdout);
        assert_one_kvmfr_pair(&args_of(&xml), &format!("round {round}"));
        assert!(xml.contains("&apos;size&apos;:67108864") || xml.contains("'size':67108864"));
    }
    assert_client_can_connect(&xml, "tuned twice by the CLI");
    check_schema(&xml, "tuned twice by the CLI");
}
