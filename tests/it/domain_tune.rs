//! Tuning an existing domain keeps everything else: on all 58 real domain XMLs
//! (libvirt's test inputs and canonical outputs, three real users' passthrough
//! domains) the tuned document differs only inside the elements the tuning
//! owns, is valid against libvirt's RelaxNG schema, and tuning twice changes
//! nothing more.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::schema::validate_domain;
use std::path::{Path, PathBuf};
use std::process::Command;
use vfio_assistant::domain::tune::{TuneOptions, tune};
use vfio_assistant::domain::xml::Document;
use vfio_assistant::host::scan;
use vfio_assistant::pinning::{PinRequest, plan};
use vfio_assistant::sysroot::HostRoot;

fn manifest(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn domains() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(manifest("tests/fixtures/libvirt-xml"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    v
}

fn options() -> TuneOptions {
    let t = scan(&HostRoot::at(manifest(
        "tests/fixtures/topology/ghw-amd-ryzen5-1600",
    )))
    .unwrap()
    .topology;
    let p = plan(
        &t,
        &PinRequest {
            vcpus: 4,
            amd: true,
            ..PinRequest::default()
        },
    )
    .unwrap();
    TuneOptions {
        plan: Some(p),
        ..TuneOptions::default()
    }
}

/// The document without what the tuning owns.
fn untouched(doc: &Document) -> String {
    let mut d = doc.clone();
    for name in ["vcpu", "iothreads", "cputune", "numatune", "cpu", "clock"] {
        d.root.remove_children(name);
    }
    if let Some(f) = d.root.child_mut("features") {
        f.remove_children("hyperv");
    }
    // A <features> the tuning had to create holds nothing else.
    if d.root
        .child("features")
        .is_some_and(|f| f.elements().next().is_none())
    {
        d.root.remove_children("features");
    }
    if let Some(dev) = d.root.child_mut("devices") {
        dev.remove_children("memballoon");
        dev.remove_children_where(|e| {
            e.name == "channel"
                && e.child("target").and_then(|t| t.attr("name")) == Some("org.qemu.guest_agent.0")
        });
    }
    d.serialize()
}

#[test]
fn tuning_keeps_the_rest_validates_and_is_idempotent() {
    let opts = options();
    for f in domains() {
        let text = std::fs::read_to_string(&f).unwrap();
        let before = Document::parse(&text).unwrap();
        let mut doc = before.clone();
        let edits = tune(&mut doc, &opts).unwrap();
        // Only what changed is listed (a domain that already has some
        // tuning gets fewer), and each with its why.
        assert!(
            edits.len() >= 3 && edits.iter().all(|e| e.why.len() > 20),
            "{}: {edits:?}",
            f.display()
        );
        let tuned = doc.serialize();
        let reparsed = Document::parse(&tuned)
            .unwrap_or_else(|e| panic!("{}: tuned XML is broken: {e}", f.display()));
        assert_eq!(
            untouched(&reparsed),
            untouched(&before),
            "{}: something outside the tuning changed",
            f.display()
        );
        let mut again = reparsed.clone();
        let second = tune(&mut again, &opts).unwrap();
        assert!(
            second.is_empty(),
            "{}: a tuned domain still lists changes: {second:?}",
            f.display()
        );
        assert_eq!(
            again.serialize(),
            tuned,
            "{}: tuning twice changed more",
            f.display()
        );
        assert!(tuned.contains("<vcpupin vcpu='0' cpuset='1'/>"));
        assert!(tuned.contains("<memballoon model='none'/>"));
        if let Some(r) = validate_domain(&tuned) {
            r.unwrap_or_else(|e| panic!("{}: tuned domain is not valid: {e}", f.display()));
        }
    }
}

#[test]
fn domain_tune_cli() {
    let bin = env!("CARGO_BIN_EXE_vfio-assistant");
    let f = manifest("tests/fixtures/libvirt-xml/user-tehcorwiz-threadripper-win10.xml");
    let out = Command::new(bin)
        .args(["domain", "tune", "--diff"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.starts_with("---"), "{diff}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("why: "));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, "<domain>\n  <name>x</nam>\n</domain>\n").unwrap();
    let out = Command::new(bin)
        .args(["domain", "tune"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2, column"), "{err}");
    let net = dir.path().join("net.xml");
    std::fs::write(&net, "<network><name>default</name></network>").unwrap();
    let out = Command::new(bin)
        .args(["domain", "tune"])
        .arg(&net)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a libvirt domain"));
}
