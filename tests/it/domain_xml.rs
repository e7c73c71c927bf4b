//! The lossless domain document on real domain XML: libvirt's own test inputs
//! and canonical outputs (libvirt 10.7) and three real users' passthrough
//! domains. Every file round-trips byte for byte; an edit changes only its own
//! line and the result still validates against libvirt's RelaxNG schema.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use crate::support::schema::validate_domain;
use std::path::{Path, PathBuf};
use vfio_assistant::domain::xml::Document;

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/libvirt-xml");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_domain_round_trips_byte_for_byte() {
    let files = fixtures();
    assert!(files.len() >= 50, "{} files", files.len());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let doc = Document::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(doc.root.name, "domain", "{}", f.display());
        assert_eq!(doc.serialize(), text, "{}", f.display());
    }
}

#[test]
fn an_edit_changes_one_line_and_keeps_the_domain_valid() {
    for f in fixtures() {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut doc = Document::parse(&text).unwrap();
        let Some(vcpu) = doc.root.child_mut("vcpu") else {
            continue;
        };
        let old = vcpu.text();
        let new = if old.trim() == "8" { "6" } else { "8" };
        vcpu.set_text(new);
        let out = doc.serialize();
        let changed: Vec<(&str, &str)> = text
            .lines()
            .zip(out.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(changed.len(), 1, "{}: {changed:?}", f.display());
        assert!(
            changed[0].1.contains(&format!(">{new}</vcpu>")),
            "{}: {changed:?}",
            f.display()
        );
        assert_eq!(text.lines().count(), out.lines().count());
        if (f.to_string_lossy().contains("user-") || f.to_string_lossy().ends_with("cputune.xml"))
            && let Some(result) = validate_domain(&out)
        {
            result
                .unwrap_or_else(|e| panic!("{}: edited domain no longer valid: {e}", f.display()));
        }
    }
}

#[test]
fn appending_keeps_the_users_indentation() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/libvirt-xml/user-joe-p-vfio-headless-win10.xml");
    let text = std::fs::read_to_string(f).unwrap();
    let mut doc = Document::parse(&text).unwrap();
    let devices = doc.root.child_mut("devices").unwrap();
    devices.remove_children("memballoon");
    let mut mb = vfio_assistant::domain::xml::Element::new("memballoon");
    mb.set_attr("model", "none");
    devices.append_child(mb);
    let out = doc.serialize();
    assert!(
        out.contains("    <memballoon model='none'/>\n  </devices>"),
        "{out}"
    );
    assert_eq!(out.matches("<memballoon").count(), 1);
    if let Some(result) = validate_domain(&out) {
        result.unwrap();
    }
}

#[test]
fn not_a_domain_and_broken_xml_are_clear_errors() {
    let e = Document::parse("<domain type='kvm'>\n  <name>x</name>\n  <devices>\n</domain>\n")
        .unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.to_string().starts_with("line 4, column"), "{e}");
    let doc = Document::parse("<network><name>default</name></network>").unwrap();
    assert_ne!(doc.root.name, "domain");
}
