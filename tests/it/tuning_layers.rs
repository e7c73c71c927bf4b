//! The tuning layer's files in layers (issue 43): a file may lean on a file
//! that leans back on it (two files, one concern split for size: the
//! journal and its records), never on a circle of three or more. The
//! measure: the modules of crates/core/src/tuning (their code, tests left
//! out) as a graph, an edge for every `super::X`, `super::super::X`,
//! `self::X` and `crate::tuning::X` that names another of them, and the
//! largest strongly connected set. It was 24 files before the knot was
//! cut (kinds' table joined every planner to the journal, the writer to
//! every planner); it is 2 now.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of the tuning folder by its path (`boot/uki`, `kinds`),
/// with its code before its unit tests.
fn modules(dir: &Path, under: &str, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != "tests" {
                modules(&p, &format!("{under}{name}/"), out);
            }
            continue;
        }
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        if stem == "tests" || stem.ends_with("_tests") {
            continue;
        }
        let module = if stem == "mod" {
            under.trim_end_matches('/').to_string()
        } else {
            format!("{under}{stem}")
        };
        let text = std::fs::read_to_string(&p).unwrap();
        let code = match text.find("#[cfg(test)]\nmod tests {") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        out.insert(module, code);
    }
}

/// The modules `code` (of `module`) names.
fn names(module: &str, code: &str, all: &BTreeSet<String>) -> BTreeSet<String> {
    let parts: Vec<&str> = if module.is_empty() {
        Vec::new()
    } else {
        module.split('/').collect()
    };
    let mut out = BTreeSet::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        // Where a path starts: not inside a longer word.
        let starts = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':');
        let (base, after) = if !starts {
            (None, 0)
        } else if let Some(r) = rest.strip_prefix("crate::tuning::") {
            (Some(Vec::new()), rest.len() - r.len())
        } else if rest.starts_with("super::") {
            let mut ups = 0;
            let mut r = rest;
            while let Some(x) = r.strip_prefix("super::") {
                ups += 1;
                r = x;
            }
            (
                parts.len().checked_sub(ups).map(|n| parts[..n].to_vec()),
                rest.len() - r.len(),
            )
        } else if let Some(r) = rest.strip_prefix("self::") {
            (Some(parts.clone()), rest.len() - r.len())
        } else {
            (None, 0)
        };
        if let Some(base) = base {
            let path: String = code[i + after..]
                .chars()
                .take_while(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == ':'
                })
                .collect();
            let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            for k in (1..=segs.len()).rev() {
                let mut cand: Vec<&str> = base.clone();
                cand.extend(&segs[..k]);
                let cand = cand.join("/");
                if cand != module && all.contains(&cand) {
                    out.insert(cand);
                    break;
                }
            }
            i += after.max(1);
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

/// The strongly connected sets of the graph (Tarjan's), largest first.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut set = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                set.push(w.to_string());
                if w == v {
                    break;
                }
            }
            set.sort();
            t.out.push(set);
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    t.out
}

#[test]
fn tuning_has_no_circle_of_more_than_two_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src/tuning");
    let mut code = BTreeMap::new();
    modules(&dir, "", &mut code);
    let all: BTreeSet<String> = code.keys().cloned().collect();
    assert!(all.len() > 40, "the tuning folder: {all:?}");
    let edges: BTreeMap<String, BTreeSet<String>> = code
        .iter()
        .map(|(m, c)| (m.clone(), names(m, c, &all)))
        .collect();
    // The measure sees the edges it should (a leaf names none of tuning).
    assert_eq!(edges["paths"], BTreeSet::new());
    assert!(
        edges["journal"].contains("records"),
        "{:?}",
        edges["journal"]
    );
    assert!(
        edges["boot/uki"].contains("boot/next_boot"),
        "{:?}",
        edges["boot/uki"]
    );
    let sets = circles(&edges);
    let big: Vec<&Vec<String>> = sets.iter().filter(|s| s.len() > 2).collect();
    assert!(
        big.is_empty(),
        "files leaning on each other in a circle of more than two: {big:?}"
    );
}

/// The leaves the layering rests on name no planner: the kinds' facts,
/// the host paths, the commands, the entry and the writer.
#[test]
fn the_leaves_name_no_planner() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src/tuning");
    let mut code = BTreeMap::new();
    modules(&dir, "", &mut code);
    let all: BTreeSet<String> = code.keys().cloned().collect();
    let planners = [
        "plan",
        "boot_plan",
        "kinds",
        "hook",
        "play",
        "single_gpu",
        "shared_gpu",
        "shared_desktop",
        "vfio_boot",
    ];
    for leaf in [
        "kind",
        "kind/specs",
        "paths",
        "command",
        "entry",
        "fsops",
        "targets",
        "journal",
        "trust",
    ] {
        let named = names(leaf, &code[leaf], &all);
        let bad: Vec<&&str> = planners.iter().filter(|p| named.contains(**p)).collect();
        assert!(bad.is_empty(), "{leaf} names the planners {bad:?}");
    }
}
