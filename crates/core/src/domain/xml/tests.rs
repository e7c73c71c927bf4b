//! The lossless document's tests: round trips, edits, damage, BOM, depth.

use super::*;

const DOMAIN: &str = "<?xml version='1.0'?>\n<!-- user's note -->\n<domain type='kvm' xmlns:qemu=\"http://libvirt.org/schemas/domain/qemu/1.0\">\n  <name>win11</name>\n  <metadata>\n    <libosinfo:libosinfo xmlns:libosinfo=\"http://libosinfo.org/xmlns/libvirt/domain/1.0\">\n      <libosinfo:os id=\"http://microsoft.com/win/11\"/>\n    </libosinfo:libosinfo>\n  </metadata>\n  <vcpu placement='static'>4</vcpu>\n  <description>a &amp; b</description>\n  <unknown   spacing = 'odd' >kept</unknown>\n</domain>\n";

#[test]
fn round_trips_byte_for_byte() {
    let d = Document::parse(DOMAIN).unwrap();
    assert_eq!(d.serialize(), DOMAIN);
    assert_eq!(d.root.child("description").unwrap().text(), "a & b");
}

#[test]
fn edits_touch_only_their_element() {
    let mut d = Document::parse(DOMAIN).unwrap();
    d.root.child_mut("vcpu").unwrap().set_text("8");
    let out = d.serialize();
    assert!(out.contains("<vcpu placement='static'>8</vcpu>"));
    assert!(out.contains("<unknown   spacing = 'odd' >kept</unknown>"));
    assert!(out.contains("<!-- user's note -->"));
    d.root
        .child_mut("vcpu")
        .unwrap()
        .set_attr("placement", "auto");
    assert!(d.serialize().contains("<vcpu placement='auto'>8</vcpu>"));
    d.root.append_child(Element::new("memballoon"));
    let out = d.serialize();
    assert!(
        out.contains("  <unknown   spacing = 'odd' >kept</unknown>\n  <memballoon/>\n</domain>"),
        "{out}"
    );
}

#[test]
fn malformed_input_gives_line_and_column() {
    let e = Document::parse("<domain>\n  <name>x</nam>\n</domain>").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    let e = Document::parse("<domain>\n  <name>x").unwrap_err();
    assert!(e.message.contains("never closed") || e.line >= 1, "{e}");
    assert!(Document::parse("").is_err());
    assert!(Document::parse("<a/><b/>").is_err());
    assert!(Document::parse("\u{0}\u{1}<<<").is_err());
}

#[test]
fn a_byte_order_mark_is_kept_and_never_panics() {
    // Found by fuzzing: a BOM then a cut-off tag panicked on a char boundary.
    let e = Document::parse("\u{feff}<e").unwrap_err();
    assert_eq!(e.line, 1, "{e}");
    let text = "\u{feff}<domain type='kvm'>\n  <name>x</name>\n</domain>\n";
    let d = Document::parse(text).unwrap();
    assert_eq!(d.root.name, "domain");
    assert_eq!(d.root.child("name").unwrap().text(), "x");
    assert_eq!(d.serialize(), text);
    for cut in 0..text.len() {
        if let Some(t) = text.get(..cut) {
            let _ = Document::parse(t);
        }
    }
    // Errors inside multi-byte text still give a position.
    assert!(Document::parse("<a>é</b>").unwrap_err().line == 1);
}

#[test]
fn nesting_deeper_than_the_limit_is_an_error() {
    let deep = |n: usize| format!("{}{}", "<a>".repeat(n), "</a>".repeat(n));
    let mut d = Document::parse(&deep(MAX_DEPTH)).unwrap();
    d.root.append_child(Element::new("x"));
    d.indent_new_elements();
    assert!(d.serialize().len() > 7 * MAX_DEPTH);
    let e = Document::parse(&deep(MAX_DEPTH + 1)).unwrap_err();
    assert!(e.message.contains("nested more than 1000"), "{e}");
    let e = Document::parse(&"<a>".repeat(100_000)).unwrap_err();
    assert!(e.message.contains("nested"), "{e}");
}
