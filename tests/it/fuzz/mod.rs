//! Fuzzing what root reads that others may have written: the privileged
//! helper's request (`helper::parse_request`) and a journal entry
//! (`journal::parse_entry`), the forged-journal attack of issue 30.
//! libFuzzer needs a nightly toolchain, so this is a small deterministic
//! mutation fuzzer of our own on stable Rust: seeds that are real (requests
//! as the app sends them, entries written by a real `tune apply` and
//! `tune undo` on a temporary host), each first proved to parse, plus
//! forgeries proved refused; then byte mutations (flips, inserts, deletes,
//! duplicated ranges, splices, truncation) and JSON-aware ones (a value
//! replaced by a hostile one, a subtree moved in from another input, keys
//! deleted, added or duplicated, deep nesting, 100 KiB strings), stacked.
//! Every input must not panic, must take under 2 s, and when it is
//! accepted it must be within the allowlist again (`check_request`,
//! `check_entry`, the closed set of programs, `file_allowed`) and survive a
//! round trip. A failing input is saved under target/fuzz-crashes/.
//!
//! `FUZZ_ITERATIONS` (default 2000 per target), `FUZZ_SEED` (decimal or
//! 0x-hex; default fixed, so CI is reproducible), `FUZZ_REPLAY=FILE` runs
//! one saved input through both targets instead, `FUZZ_KEEP_GOING=1` goes
//! on past a failure and lists every kind found at the end.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

mod masker;
mod mutate;
mod seeds;

use crate::support::tuning::{runtime_host, tuning_host};
use mutate::{Item, Pool, Rng, mutant};
use seeds::{forgeries, real_entries};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use vfio_assistant::helper::{MAX_REQUEST, check_request, parse_request};
use vfio_assistant::tuning::artifacts::artifact_allowed;
use vfio_assistant::tuning::entry_check::check_entry;
use vfio_assistant::tuning::fsops::{file_allowed, value_allowed};
use vfio_assistant::tuning::journal::{Entry, EntryError, parse_entry, valid_id};
use vfio_assistant::tuning::targets::mode_ok;

const DEFAULT_SEED: u64 = 0x5eed_f022_0030;
const DEFAULT_ITERATIONS: u64 = 2000;
/// Longer than this for one input is a failure (a debug build).
const SLOWEST_ALLOWED: Duration = Duration::from_secs(2);
/// Inputs are cut here: just past the helper's limit, so it is reached.
const MAX_INPUT: usize = MAX_REQUEST + 4096;
/// Accepted mutants kept to mutate further, beside the seeds.
const MAX_CORPUS: usize = 256;
/// The programs any `Cmd` may run (`command.rs`, by hand: a new one must be
/// added here on purpose).
const PROGRAMS: &[&str] = &[
    "systemctl",
    "modprobe",
    "systemd-tmpfiles",
    "update-initramfs",
    "dracut",
    "mkinitcpio",
    "kernel-install",
    "grub-mkconfig",
    "grub2-mkconfig",
    "grubby",
    "kernelstub",
    "rpm-ostree",
    "bootctl",
];

fn env_u64(name: &str, default: u64) -> u64 {
    let Ok(s) = std::env::var(name) else {
        return default;
    };
    let s = s.trim().replace('_', "");
    let n = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    n.unwrap_or_else(|_| panic!("{name}={s:?} is not a number"))
}

/// What a target made of one input.
enum Verdict {
    Accepted,
    /// Why, and whether the checks refused it (not the JSON's shape).
    Refused {
        why: String,
        by_check: bool,
    },
    /// Accepted, but something a user would be hurt by: why.
    Wrong(String),
}

struct Target {
    name: &'static str,
    run: fn(&[u8]) -> Verdict,
}

const REQUEST: Target = Target {
    name: "helper-request",
    run: request_verdict,
};
const ENTRY: Target = Target {
    name: "journal-entry",
    run: entry_verdict,
};

fn request_verdict(bytes: &[u8]) -> Verdict {
    use vfio_assistant::helper::Refusal;
    let r = match parse_request(bytes) {
        Ok(r) => r,
        Err(e) => {
            return Verdict::Refused {
                by_check: matches!(e, Refusal::BadValue(_)),
                why: e.to_string(),
            };
        }
    };
    if let Err(e) = check_request(&r) {
        return Verdict::Wrong(format!("parse_request said Ok, check_request says {e}"));
    }
    let again = serde_json::to_vec(&r).unwrap();
    match parse_request(&again) {
        Ok(r2) if r2 == r => Verdict::Accepted,
        other => Verdict::Wrong(format!("the accepted {r:?} does not round-trip: {other:?}")),
    }
}

fn entry_verdict(bytes: &[u8]) -> Verdict {
    let e = match parse_entry(bytes) {
        Ok(e) => e,
        Err(why) => {
            // Refused by the checks, not by the JSON reader.
            let by_check = !matches!(why, EntryError::Json(_));
            return Verdict::Refused {
                why: why.to_string(),
                by_check,
            };
        }
    };
    match entry_within_allowlist(&e) {
        Ok(()) => Verdict::Accepted,
        Err(why) => Verdict::Wrong(why),
    }
}

/// What undo may believe of an entry parse_entry accepted, checked here
/// independently of how the library checks it.
fn entry_within_allowlist(e: &Entry) -> Result<(), String> {
    check_entry(e).map_err(|w| format!("parse_entry said Ok, check_entry says {w}"))?;
    if !valid_id(&e.id) {
        return Err(format!("accepted id {:?}", e.id));
    }
    for c in &e.plan.changes {
        for s in c.prepare.iter().chain(&c.commands).chain(&c.undo_commands) {
            let argv = s.argv();
            if !argv.first().is_some_and(|p| PROGRAMS.contains(&p.as_str())) {
                return Err(format!("change {:?} runs {argv:?}", c.id));
            }
            if argv.iter().any(|a| a.contains('\0')) {
                return Err(format!("change {:?} runs {argv:?} (a NUL)", c.id));
            }
        }
        for f in &c.files {
            if !file_allowed(&f.path) {
                return Err(format!("change {:?} writes {}", c.id, f.path));
            }
        }
        for v in c.values.iter().chain(&c.undo_values) {
            if !value_allowed(&v.path) {
                return Err(format!("change {:?} writes value {}", c.id, v.path));
            }
        }
    }
    for f in &e.files {
        if !file_allowed(&f.path) {
            return Err(format!("a file restored to {}", f.path));
        }
        if f.mode
            .is_some_and(|m| !mode_ok(m) || m & 0o7000 != 0 || m & 0o002 != 0)
        {
            return Err(format!(
                "{} restored with mode {:o}",
                f.path,
                f.mode.unwrap_or(0)
            ));
        }
        if !saved_name(&f.saved_as) {
            return Err(format!("{} restored from {:?}", f.path, f.saved_as));
        }
    }
    for a in &e.artifacts {
        if !artifact_allowed(&a.path) || a.mode.is_some_and(|m| m & 0o7002 != 0) {
            return Err(format!("boot file {} (mode {:?}) restored", a.path, a.mode));
        }
        if !saved_name(&a.saved_as) {
            return Err(format!(
                "boot file {} restored from {:?}",
                a.path, a.saved_as
            ));
        }
    }
    for (path, _) in &e.values {
        if !value_allowed(path) {
            return Err(format!("value {path} restored"));
        }
    }
    let again = serde_json::to_vec(e).unwrap();
    match parse_entry(&again) {
        Ok(e2) if &e2 == e => Ok(()),
        Ok(_) => Err("the accepted entry reads back different".into()),
        Err(w) => Err(format!("the accepted entry does not read back: {w}")),
    }
}

/// A copy in the journal is named by its number (`0003`): no path, and
/// not the folder itself.
fn saved_name(name: &Option<String>) -> bool {
    name.as_deref()
        .is_none_or(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn crash_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
            PathBuf::from,
        )
        .join("fuzz-crashes")
}

/// The input saved under target/fuzz-crashes/.
fn save(t: &Target, label: &str, input: &[u8]) -> PathBuf {
    let dir = crash_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{}-{label}.json", t.name));
    std::fs::write(&file, input).unwrap();
    file
}

/// The input saved, and the test failed with where to find it.
fn fail(t: &Target, label: &str, input: &[u8], why: &str) -> ! {
    let file = save(t, label, input);
    panic!(
        "fuzz {}: {why}\ninput ({} bytes) saved to {} (FUZZ_REPLAY={} reruns it)",
        t.name,
        input.len(),
        file.display(),
        file.display()
    );
}

/// Runs one input; a panic or more than 2 s is `Wrong` too.
fn run_one(t: &Target, input: &[u8]) -> (Verdict, Duration) {
    let start = Instant::now();
    let got = catch_unwind(AssertUnwindSafe(|| (t.run)(input)));
    let took = start.elapsed();
    let verdict = match got {
        Ok(_) if took > SLOWEST_ALLOWED => Verdict::Wrong(format!("one input took {took:?}")),
        Ok(v) => v,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Verdict::Wrong(format!("panicked: {msg}"))
        }
    };
    (verdict, took)
}

/// A failure's kind: its words, without the numbers and quoted values.
fn kind_of(why: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in why.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                if quoted {
                    out.push_str("\"…\"");
                }
            }
            _ if quoted => {}
            '0'..='9' if out.ends_with('#') => {}
            '0'..='9' => out.push('#'),
            _ => out.push(c),
        }
    }
    out.chars().take(120).collect()
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Seeds proved (valid ones accepted, forgeries refused), then the fuzzing.
fn fuzz(t: &Target, valid: Vec<Vec<u8>>, forged: Vec<(&str, Vec<u8>)>, salt: u64) {
    if let Some(file) = std::env::var_os("FUZZ_REPLAY") {
        let input = std::fs::read(&file).unwrap();
        match run_one(t, &input).0 {
            Verdict::Wrong(why) => fail(t, "replay", &input, &why),
            Verdict::Accepted => eprintln!("fuzz {}: replayed input accepted", t.name),
            Verdict::Refused { why, .. } => {
                eprintln!("fuzz {}: replayed input refused: {why}", t.name)
            }
        }
        return;
    }
    for (i, s) in valid.iter().enumerate() {
        match run_one(t, s).0 {
            Verdict::Accepted => {}
            Verdict::Refused { why, .. } => panic!(
                "fuzz {}: seed {i} is refused ({why}): {}",
                t.name,
                String::from_utf8_lossy(s)
            ),
            Verdict::Wrong(why) => fail(t, &format!("seed{i}"), s, &why),
        }
    }
    for (what, s) in &forged {
        match run_one(t, s).0 {
            Verdict::Refused { why, .. } => eprintln!("fuzz {}: refused {what}: {why}", t.name),
            _ => fail(t, "forged", s, &format!("a forgery is accepted: {what}")),
        }
    }
    let seed = env_u64("FUZZ_SEED", DEFAULT_SEED);
    let iterations = env_u64("FUZZ_ITERATIONS", DEFAULT_ITERATIONS);
    let mut rng = Rng::new(seed ^ salt);
    let mut items: Vec<Item> = valid.into_iter().map(Item::new).collect();
    items.extend(forged.into_iter().map(|(_, b)| Item::new(b)));
    let seeds = items.len();
    let mut seen: HashSet<u64> = items.iter().map(|i| hash(&i.bytes)).collect();
    let mut pool = Pool::new(items);
    let (mut ok, mut err, mut checked) = (0u64, 0u64, 0u64);
    // FUZZ_KEEP_GOING: every failing input is counted and the first few of
    // each kind saved; the test fails at the end, with the list.
    let keep_going = std::env::var_os("FUZZ_KEEP_GOING").is_some();
    let mut findings: BTreeMap<String, (u64, Vec<PathBuf>, String)> = BTreeMap::new();
    let (mut slowest, mut slowest_at, mut slowest_len) = (Duration::ZERO, 0, 0);
    let started = Instant::now();
    for i in 0..iterations {
        if iterations >= 100_000 && i > 0 && i % (iterations / 10) == 0 {
            eprintln!(
                "fuzz {}: {i} inputs in {:.0?}: {ok} Ok, {err} Err",
                t.name,
                started.elapsed()
            );
        }
        let input = mutant(&mut rng, &pool);
        let label = format!("seed{seed:#x}-iteration{i}");
        let (verdict, took) = run_one(t, &input);
        if took > slowest {
            (slowest, slowest_at, slowest_len) = (took, i, input.len());
        }
        match verdict {
            Verdict::Wrong(why) if keep_going => {
                let (n, files, _) = findings
                    .entry(kind_of(&why))
                    .or_insert_with(|| (0, Vec::new(), why));
                *n += 1;
                if files.len() < 3 {
                    files.push(save(t, &label, &input));
                }
            }
            Verdict::Wrong(why) => fail(t, &label, &input, &why),
            Verdict::Refused { by_check, .. } => {
                err += 1;
                checked += u64::from(by_check);
            }
            Verdict::Accepted => {
                ok += 1;
                // New accepted inputs are mutated further.
                if input.len() <= 256 * 1024 && seen.insert(hash(&input)) {
                    let item = Item::new(input);
                    if pool.items.len() < seeds + MAX_CORPUS {
                        pool.items.push(item);
                    } else {
                        let at = seeds + rng.below(MAX_CORPUS);
                        pool.items[at] = item;
                    }
                }
            }
        }
    }
    let wrong: u64 = findings.values().map(|f| f.0).sum();
    eprintln!(
        "fuzz {}: {iterations} inputs (FUZZ_SEED={seed:#x}) in {:.1?}: {ok} Ok, {err} Err ({checked} by the \
         checks, the rest by the JSON's shape), {wrong} failing; \
         slowest {slowest:.1?} (iteration {slowest_at}, {slowest_len} bytes); corpus {} \
         ({seeds} seeds)",
        t.name,
        started.elapsed(),
        pool.items.len()
    );
    if !findings.is_empty() {
        let list: Vec<String> = findings
            .values()
            .map(|(n, files, why)| {
                let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                format!("{n} inputs: {why}\n    e.g. {}", files.join("\n         "))
            })
            .collect();
        panic!(
            "fuzz {}: {} kinds of failure (FUZZ_REPLAY=FILE reruns one):\n{}",
            t.name,
            findings.len(),
            list.join("\n")
        );
    }
}

#[test]
fn fuzz_helper_request() {
    let valid: Vec<Vec<u8>> = [
        r#"{"kind":"status"}"#,
        "{\"kind\":\"status\"}\n",
        r#"{"kind":"undo","id":"001700000000-123-0"}"#,
        r#"{"kind":"undo","id":"001700000000-123-0","force":true}"#,
        r#"{"kind":"apply","request":{}}"#,
        r#"{"kind":"apply","request":{"gpus":["0000:0b:00.0"],"devices":["0c:00.3"],"vcpus":4,"memory_mib":8192,"hugepages_1g":true}}"#,
        r#"{"kind":"apply","request":{"gpus":["0b:00.0"],"cpus":[2,3,4,5],"isolation_hook":true,"vm":"win11","looking_glass_mib":64,"kvmfr":true,"qemu_as_user":true,"desktop_user":"alice"}}"#,
        r#"{"kind":"apply","request":{"sriov":{"0000:03:00.0":4},"only":["sriov:0000:03:00.0","thp","ksm","hugepages","cmdline"]}}"#,
        r#"{"kind":"apply","request":{"gpus":["0b:00.0"],"single_gpu":true,"vm":"win11.test_vm+1","desktop_user":"bob_2"}}"#,
        r#"{"request":{"only":["vfio-boot"],"memory_mib":1024,"vcpus":12,"gpus":[],"devices":[],"cpus":null,"hugepages_1g":false,"sriov":{},"isolation_hook":false,"vm":null,"looking_glass_mib":null,"kvmfr":false,"qemu_as_user":false,"single_gpu":false,"desktop_user":null},"kind":"apply"}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let forged: Vec<(&str, Vec<u8>)> = [
        (
            "a path as a GPU",
            r#"{"kind":"apply","request":{"gpus":["../../../etc/passwd"]}}"#,
        ),
        (
            "a path as an SR-IOV device",
            r#"{"kind":"apply","request":{"sriov":{"/etc/shadow":1}}}"#,
        ),
        (
            "a path as a change id",
            r#"{"kind":"apply","request":{"only":["../../x"]}}"#,
        ),
        (
            "a path as an undo id",
            r#"{"kind":"undo","id":"../../../../etc"}"#,
        ),
        (
            "a field of its own",
            r#"{"kind":"apply","request":{"governor":"../../x"}}"#,
        ),
        ("an argv", r#"{"kind":"status","argv":["sh"]}"#),
        (
            "an unknown kind",
            r#"{"kind":"shell","argv":["sh","-c","id"]}"#,
        ),
        ("CPU 4096", r#"{"kind":"apply","request":{"cpus":[4096]}}"#),
        ("no CPUs", r#"{"kind":"apply","request":{"cpus":[]}}"#),
        ("0 vCPUs", r#"{"kind":"apply","request":{"vcpus":0}}"#),
        ("-1 vCPUs", r#"{"kind":"apply","request":{"vcpus":-1}}"#),
        (
            "no memory",
            r#"{"kind":"apply","request":{"memory_mib":0}}"#,
        ),
        (
            "1e308 MiB",
            r#"{"kind":"apply","request":{"looking_glass_mib":1e308}}"#,
        ),
        (
            "2 GiB of Looking Glass",
            r#"{"kind":"apply","request":{"looking_glass_mib":2048}}"#,
        ),
        (
            "5000 VFs",
            r#"{"kind":"apply","request":{"sriov":{"0b:00.0":5000}}}"#,
        ),
        (
            "a shell in a VM name",
            r#"{"kind":"apply","request":{"vm":"a'b; reboot"}}"#,
        ),
        (
            "a path as a user",
            r#"{"kind":"apply","request":{"desktop_user":"../root"}}"#,
        ),
        ("two requests", r#"{"kind":"status"}{"kind":"status"}"#),
        ("nothing", ""),
        ("blanks", " \n\t "),
        ("a NUL", "{\"kind\":\"status\"}\0"),
    ]
    .iter()
    .map(|(w, s)| (*w, s.as_bytes().to_vec()))
    .collect();
    fuzz(&REQUEST, valid, forged, 0x0e0e);
}

#[test]
fn fuzz_journal_entry() {
    let real = real_entries();
    assert!(real.len() >= 3, "{} entries", real.len());
    let with_files = real
        .iter()
        .find(|e| {
            let v: Value = serde_json::from_slice(e).unwrap();
            !v["files"].as_array().unwrap().is_empty()
                && !v["values"].as_array().unwrap().is_empty()
        })
        .expect("an entry with saved files and values");
    let forged = forgeries(with_files);
    fuzz(&ENTRY, real, forged, 0x3030);
}
