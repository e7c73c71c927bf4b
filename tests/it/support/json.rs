//! JSON documentation checks: every key path a command prints must appear in
//! its doc (`a.b`, lists as `a[]`, numeric object keys as `N`).

use serde_json::Value;
use std::collections::BTreeSet;

/// Every key path in `v`: `a.b`, list elements as `a[]`, number keys as `N`.
pub fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let k = if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) {
                    "N"
                } else {
                    k.as_str()
                };
                let p = if prefix.is_empty() {
                    k.to_string()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                key_paths(child, &p, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                key_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// The keys of `keys` that `doc_file` (under docs/) does not name.
pub fn undocumented(keys: &BTreeSet<String>, doc_file: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(doc_file);
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    keys.iter()
        .filter(|k| !doc.contains(&format!("`{k}`")) && !doc.contains(&format!("`{k}[]`")))
        .cloned()
        .collect()
}

/// A command's JSON without the root's own name (a path here, a snapshot
/// there): what must agree when the same host is read two ways.
pub fn without_root(out: &[u8]) -> Value {
    let mut v: Value = serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)));
    if let Some(o) = v.as_object_mut() {
        o.remove("root");
    }
    v
}
