//! docs/ARCHITECTURE.md's claims about the source, checked on the source
//! (issue 43): library errors are typed values, not sentences; the tuning
//! layer spells each host path in one file. (The layers are layers.rs's and
//! tuning_layers.rs's; registration is the compiler's: `kinds!`, `pages!`,
//! `steps!`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const TOP: &str = env!("CARGO_MANIFEST_DIR");

/// Every `.rs` file below `dir` with its code: a file's `#[cfg(test)] mod
/// tests` and the test folders left out, `//` comments blanked.
fn code_below(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if name != "tests" {
                    todo.push(p);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let text = std::fs::read_to_string(&p).unwrap();
                let code = text
                    .split("#[cfg(test)]\nmod tests")
                    .next()
                    .unwrap_or("")
                    .lines()
                    .map(|l| match l.find("//") {
                        // A `//` inside a string ("https://…") is kept.
                        Some(i) if l[..i].matches('"').count() % 2 == 0 => &l[..i],
                        _ => l,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push((p, code));
            }
        }
    }
    out.sort();
    out
}

/// The error type of every `Result<T, E>` written in `code` (across lines).
fn result_errors(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("Result<") {
        // Not `FooResult<`: only the type itself.
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let (mut depth, mut args, mut start) = (0i32, Vec::new(), at + "Result<".len());
        for (i, c) in code[at + "Result".len()..].char_indices() {
            let i = i + at + "Result".len();
            match c {
                '<' => depth += 1,
                '>' if code[..i].ends_with('-') => {}
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        args.push(code[start..i].trim().to_string());
                        break;
                    }
                }
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ',' if depth == 1 => {
                    args.push(code[start..i].trim().to_string());
                    start = i + 1;
                }
                _ => {}
            }
        }
        // rustfmt ends a broken-up list with a comma.
        args.retain(|a| !a.is_empty());
        if args.len() == 2 {
            out.push(args[1].split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    out
}

#[test]
fn the_reader_finds_string_errors_across_lines() {
    let code = "fn a() -> Result<u8, String> {}\nfn b() -> Result<\n    Vec<(u8, u8)>,\n    String,\n> {}\nfn c() -> io::Result<()> {}\nfn d() -> Result<(), Box<dyn Fn() -> u8>> {}";
    assert_eq!(
        result_errors(code),
        ["String", "String", "Box<dyn Fn() -> u8>"]
    );
}

/// "Library errors are typed": no `Result<_, String>` (nor `&str`,
/// `Option<String>`, `Vec<String>`) in the crates below
/// the app (66 when issue 43 was filed, 0 since). The faces (src/cli,
/// src/ui) may carry sentences: the GUI's job channels do.
#[test]
fn library_errors_are_typed() {
    let mut found = Vec::new();
    for (p, code) in code_below(&Path::new(TOP).join("crates")) {
        if !p.components().any(|c| c.as_os_str() == "src") {
            continue;
        }
        for e in result_errors(&code) {
            // A sentence, or a sentence in a wrapper: still no type.
            let words = [
                "String",
                "std::string::String",
                "&str",
                "&'static str",
                "Box<str>",
                "Option<String>",
                "Vec<String>",
            ];
            if words.contains(&e.as_str()) {
                found.push(p.strip_prefix(TOP).unwrap().display().to_string());
            }
        }
    }
    assert!(
        found.is_empty(),
        "Result<_, String> in the library (give the error a type: an enum with thiserror, its words in #[error]): {found:#?}"
    );
}

/// "The tuning layer names each host path once": a path spelled in two of
/// its files is named in tuning/paths.rs (a leaf) and used by that name, so
/// a kind's allowlist, facts.rs's reads and the planner cannot drift apart.
#[test]
fn tuning_spells_each_host_path_in_one_file() {
    let tuning = Path::new(TOP).join("crates/core/src/tuning");
    let mut spelled: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let tops = [
        "/etc/", "/boot/", "/sys/", "/proc/", "/usr/", "/var/", "/run/", "/lib/", "/dev/", "/efi/",
    ];
    for (p, code) in code_below(&tuning) {
        let file = p.strip_prefix(&tuning).unwrap().display().to_string();
        for piece in code.split('"').skip(1).step_by(2) {
            if tops.iter().any(|t| piece.starts_with(t)) && !piece.contains('{') {
                spelled
                    .entry(piece.to_string())
                    .or_default()
                    .insert(file.clone());
            }
        }
    }
    assert!(
        spelled.len() > 100,
        "the reader found the paths: {}",
        spelled.len()
    );
    let twice: Vec<_> = spelled.iter().filter(|(_, f)| f.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "host paths spelled in more than one tuning file (name them in tuning/paths.rs): {twice:#?}"
    );
}
