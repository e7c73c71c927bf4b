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

use crate::support::tuning::{runtime_host, tuning_host};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use vfio_assistant::helper::{MAX_REQUEST, check_request, parse_request};
use vfio_assistant::tuning::artifacts::artifact_allowed;
use vfio_assistant::tuning::fsops::{file_allowed, value_allowed};
use vfio_assistant::tuning::journal::{Entry, parse_entry, valid_id};
use vfio_assistant::tuning::targets::{check_entry, mode_ok};

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

/// xorshift64* (Vigna), seeded through splitmix64.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

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
            // serde_json says where it choked; the allowlist says what.
            let by_check = !why.contains(" at line ") && !why.contains("EOF while");
            return Verdict::Refused { why, by_check };
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

/// One input to mutate: its bytes and, when they are JSON, the tree.
struct Item {
    bytes: Vec<u8>,
    value: Option<Value>,
}

impl Item {
    fn new(bytes: Vec<u8>) -> Item {
        let value = serde_json::from_slice(&bytes).ok();
        Item { bytes, value }
    }
}

/// What mutants are made from: the inputs, and every short string in the
/// seeds (paths, change ids, enum names) to put where another one was —
/// a file of one change kind under another, a state for a program.
struct Pool {
    items: Vec<Item>,
    words: Vec<String>,
}

impl Pool {
    fn new(items: Vec<Item>) -> Pool {
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::String(s) if s.len() <= 256 => out.push(s.clone()),
                Value::Object(o) => {
                    out.extend(o.keys().cloned());
                    o.values().for_each(|c| walk(c, out));
                }
                Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
                _ => {}
            }
        }
        let mut words: Vec<String> = STRINGS.iter().map(|s| s.to_string()).collect();
        items
            .iter()
            .filter_map(|i| i.value.as_ref())
            .for_each(|v| walk(v, &mut words));
        words.sort();
        words.dedup();
        Pool { items, words }
    }
}

const BYTES: &[u8] = b"\0\x01\x7f\x80\xff\"\\{}[],:-+.eE0123456789 \t\n/~*";
const TOKENS: &[&[u8]] = &[
    b"null",
    b"true",
    b"-1",
    b"-0",
    b"1e308",
    b"-1e309",
    b"18446744073709551616",
    b"4294967296",
    b"\"\\u0000\"",
    b"\"\\ud800\"",
    b"{}",
    b"[]",
    b",",
    b"\"",
    b"\\",
    b"\"../../etc/passwd\"",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
];

fn byte_mutation(rng: &mut Rng, d: &mut Vec<u8>, corpus: &[Item]) {
    let len = d.len();
    let at = rng.below(len + 1);
    let span = |rng: &mut Rng, from: usize| {
        let left = len - from;
        if rng.one_in(8) {
            rng.below(left + 1)
        } else {
            rng.below(left.min(32) + 1)
        }
    };
    match rng.below(10) {
        0 if len > 0 => d[at.min(len - 1)] ^= 1 << rng.below(8),
        1 if len > 0 => d[at.min(len - 1)] = *rng.pick(BYTES),
        2 => {
            let n = 1 + rng.below(16);
            let new: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            d.splice(at..at, new);
        }
        3 => {
            let n = span(rng, at);
            d.drain(at..at + n);
        }
        4 => {
            let n = span(rng, at);
            let copy = d[at..at + n].to_vec();
            let to = rng.below(len + 1);
            d.splice(to..to, copy);
        }
        5 => {
            let other = &rng.pick(corpus).bytes;
            let from = rng.below(other.len() + 1);
            d.truncate(at);
            d.extend_from_slice(&other[from..]);
        }
        6 => d.truncate(at),
        7 => {
            let t = rng.pick(TOKENS);
            d.splice(at..at, t.iter().copied());
        }
        8 => {
            let other = &rng.pick(corpus).bytes;
            let from = rng.below(other.len() + 1);
            let n = rng.below((other.len() - from).min(256) + 1);
            let end = (at + n).min(len);
            d.splice(at..end, other[from..from + n].iter().copied());
        }
        _ => d.extend(std::iter::repeat_n(*rng.pick(BYTES), 1 + rng.below(64))),
    }
}

const STRINGS: &[&str] = &[
    "",
    "../../etc/passwd",
    "/etc/passwd",
    "/etc/shadow",
    "-rf",
    "--root=/",
    "/proc/sys/kernel/core_pattern",
    "|/tmp/x",
    "sh",
    "/bin/sh",
    "$(reboot)",
    "; id",
    "\0",
    "a\0b",
    "é漢字🦀",
    "\u{202e}",
    "\u{feff}",
    ".",
    "..",
    "/",
    "*",
    "sriov:../x",
    "sriov:0000:0b:00.0",
    "0000:0b:00.0",
    "0b:00.7",
    "cmdline",
    "vfio-boot",
    "kvmfr",
    "/etc/default/grub",
    "/etc/libvirt/hooks/qemu",
    "/sys/bus/pci/devices/*/sriov_numvfs",
    "/sys/bus/pci/devices/../../../etc/passwd/sriov_numvfs",
    "/sys/bus/pci/devices/./sriov_numvfs",
    "/proc/irq/../../etc/smp_affinity_list",
    "/etc/modprobe.d/../shadow",
    "//etc/default/grub",
    "/etc/default/grub/",
    "systemctl",
    "init=/bin/sh",
    "6.1.0-18-amd64",
    "../../tmp/x",
    "-k all",
    "001700000000-123-0",
    "applied",
    "undoing",
];

fn interesting(rng: &mut Rng) -> Value {
    match rng.below(8) {
        0 | 1 => json!(rng.pick(STRINGS)),
        2 => interesting_number(rng),
        3 => json!(*rng.pick(&[1e308, -1e308, 0.5, -0.0, 1e-320, 4096.0])),
        4 => json!(rng.one_in(2)),
        5 => rng
            .pick(&[
                Value::Null,
                json!([]),
                json!({}),
                json!([null]),
                json!({"": ""}),
            ])
            .clone(),
        6 => long_string(rng),
        _ => json!(format!("{}{}", rng.pick(STRINGS), rng.pick(STRINGS))),
    }
}

fn long_string(rng: &mut Rng) -> Value {
    // Up to ~100 KiB of one piece of text.
    let piece = *rng.pick(&["A", "/", "../", "é", "\0", "🦀", "a/"]);
    json!(piece.repeat(1 + rng.below(100 * 1024 / piece.len())))
}

fn interesting_number(rng: &mut Rng) -> Value {
    if rng.one_in(3) {
        // In range for most fields: what the checks, not the types, decide.
        let top = if rng.one_in(2) { 5000 } else { 1 << 31 };
        return json!(rng.below(top));
    }
    let n: i128 = *rng.pick(&[
        0,
        1,
        -1,
        2541,
        0o777,
        0o7777,
        0o4755,
        4095,
        4096,
        4097,
        1 << 30,
        (1 << 30) + 1,
        u32::MAX as i128,
        u32::MAX as i128 + 1,
        i64::MIN as i128,
        i64::MAX as i128,
        u64::MAX as i128,
    ]);
    match (u64::try_from(n), i64::try_from(n)) {
        (Ok(u), _) => json!(u),
        (_, Ok(i)) => json!(i),
        _ => Value::Null,
    }
}

/// Components a path gets instead of one of its own.
const COMPONENTS: &[&str] = &[
    "..",
    ".",
    "",
    "*",
    "etc",
    "passwd",
    "shadow",
    "0000:0b:00.0",
    "cpu0",
    "hooks",
    "x",
    "vfio-assistant.conf",
    "grub.d",
    "modprobe.d",
];

/// A path with one component changed, added or taken away.
fn path_edit(rng: &mut Rng, s: &mut String) {
    let mut parts: Vec<String> = s.split('/').map(str::to_string).collect();
    let i = rng.below(parts.len());
    let c = rng.pick(COMPONENTS).to_string();
    match rng.below(4) {
        0 => parts[i] = c,
        1 => parts.insert(i + 1, c),
        2 if parts.len() > 1 => {
            parts.remove(i);
        }
        _ => parts.push(String::new()),
    }
    *s = parts.join("/");
}

/// A value of the same type, hostile or taken from another place: what
/// gets past the JSON's shape to the checks.
fn same_type(rng: &mut Rng, node: &mut Value, words: &[String]) {
    match node {
        Value::String(s) => match rng.below(5) {
            0 | 1 => *s = rng.pick(words).clone(),
            2 => *s = rng.pick(STRINGS).to_string(),
            _ if s.starts_with('/') => path_edit(rng, s),
            _ => *s = rng.pick(words).clone(),
        },
        Value::Number(_) => *node = interesting_number(rng),
        Value::Bool(b) => *b = !*b,
        Value::Array(a) if !a.is_empty() => {
            let i = rng.below(a.len());
            same_type(rng, &mut a[i], words);
        }
        Value::Object(o) if !o.is_empty() => {
            let i = rng.below(o.len());
            if let Some(c) = o.values_mut().nth(i) {
                same_type(rng, c, words);
            }
        }
        _ => *node = json!(rng.pick(words)),
    }
}

fn count(v: &Value) -> usize {
    1 + children(v).into_iter().map(count).sum::<usize>()
}

fn children(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(o) => o.values().collect(),
        _ => Vec::new(),
    }
}

/// The `n`th node in document order (0 is `v` itself).
fn nth(v: &Value, n: usize) -> &Value {
    let mut n = n;
    if n == 0 {
        return v;
    }
    n -= 1;
    for c in children(v) {
        let k = count(c);
        if n < k {
            return nth(c, n);
        }
        n -= k;
    }
    v
}

fn nth_mut(v: &mut Value, n: usize) -> &mut Value {
    if n == 0 {
        return v;
    }
    let mut n = n - 1;
    let mut which = None;
    for (i, c) in children(v).into_iter().enumerate() {
        let k = count(c);
        if n < k {
            which = Some(i);
            break;
        }
        n -= k;
    }
    match (v, which) {
        (Value::Array(a), Some(i)) => nth_mut(&mut a[i], n),
        (Value::Object(o), Some(i)) => match o.values_mut().nth(i) {
            Some(c) => nth_mut(c, n),
            None => unreachable!(),
        },
        (v, _) => v,
    }
}

/// A key no input has, replaced by a copy of an existing key once written
/// out: JSON with a duplicated key (a `Value` cannot hold one).
const DUP: &str = "\u{1}fuzz-duplicate";

/// One structural mutation of `v`; a key to duplicate comes back.
fn json_mutation(rng: &mut Rng, v: &mut Value, pool: &Pool) -> Option<String> {
    let node = nth_mut(v, rng.below(count(v)));
    match rng.below(13) {
        0..=2 => same_type(rng, node, &pool.words),
        9 | 10 => *node = interesting(rng),
        11 => *node = long_string(rng),
        3 => {
            let donors: Vec<&Value> = (0..4)
                .filter_map(|_| rng.pick(&pool.items).value.as_ref())
                .collect();
            if let Some(d) = donors.first() {
                *node = nth(d, rng.below(count(d))).clone();
            }
        }
        4 => match node {
            Value::String(s) => {
                let at = (0..=s.len())
                    .filter(|i| s.is_char_boundary(*i))
                    .collect::<Vec<_>>();
                let i = *rng.pick(&at);
                match rng.below(4) {
                    0 => {
                        let w = *rng.pick(STRINGS);
                        s.insert_str(i, w)
                    }
                    1 => s.truncate(i),
                    2 => *s = s.to_uppercase(),
                    _ => s.insert(i, *rng.pick(&['\0', '/', '.', '*', '\n', ' ', '='])),
                }
            }
            Value::Number(n) => {
                let x = n
                    .as_i64()
                    .map(i128::from)
                    .or(n.as_u64().map(i128::from))
                    .unwrap_or(0);
                let y = match rng.below(4) {
                    0 => x + 1,
                    1 => x - 1,
                    2 => -x,
                    _ => x + (1 << 32),
                };
                *node = i64::try_from(y).map_or(json!(1e308), |y| json!(y));
            }
            Value::Bool(b) => *b = !*b,
            _ => *node = interesting(rng),
        },
        5 => {
            // Deep nesting, bounded (serde_json refuses past 128 levels).
            let depth = 1 + rng.below(200);
            let mut inner = std::mem::take(node);
            for _ in 0..depth {
                inner = if rng.one_in(2) {
                    json!([inner])
                } else {
                    json!({ "a": inner })
                };
            }
            *node = inner;
        }
        6 => match node {
            Value::Object(o) if !o.is_empty() => {
                let k = o
                    .keys()
                    .nth(rng.below(o.len()))
                    .cloned()
                    .unwrap_or_default();
                o.remove(&k);
            }
            Value::Array(a) if !a.is_empty() => {
                let i = rng.below(a.len());
                a.remove(i);
            }
            _ => *node = interesting(rng),
        },
        7 => match node {
            Value::Object(o) if !o.is_empty() => {
                let k = o
                    .keys()
                    .nth(rng.below(o.len()))
                    .cloned()
                    .unwrap_or_default();
                let dup = if rng.one_in(2) {
                    o[&k].clone()
                } else {
                    interesting(rng)
                };
                o.insert(DUP.into(), dup);
                return Some(k);
            }
            Value::Array(a) if !a.is_empty() => {
                let i = rng.below(a.len());
                let x = a[i].clone();
                let n = if rng.one_in(16) {
                    1 + rng.below(4096)
                } else {
                    1
                };
                for _ in 0..n {
                    a.insert(rng.below(a.len() + 1), x.clone());
                }
            }
            _ => *node = interesting(rng),
        },
        8 => match node {
            Value::Object(o) => {
                let key = if rng.one_in(2) {
                    rng.pick(&[
                        "argv", "program", "path", "mode", "kind", "cmd", "state", "id",
                    ])
                    .to_string()
                } else {
                    rng.pick(STRINGS).to_string()
                };
                o.insert(key, interesting(rng));
            }
            Value::Array(a) => a.push(interesting(rng)),
            _ => *node = interesting(rng),
        },
        _ => {
            if let Value::Array(a) = node
                && a.len() > 1
            {
                let (i, j) = (rng.below(a.len()), rng.below(a.len()));
                a.swap(i, j);
            } else {
                *node = json!([]);
            }
        }
    }
    None
}

fn write_out(rng: &mut Rng, v: &Value, dup: Option<&str>) -> Vec<u8> {
    let text = if rng.one_in(2) {
        serde_json::to_string_pretty(v).unwrap()
    } else {
        serde_json::to_string(v).unwrap()
    };
    match dup {
        Some(k) => text
            .replace(
                &serde_json::to_string(DUP).unwrap(),
                &serde_json::to_string(k).unwrap(),
            )
            .into_bytes(),
        None => text.into_bytes(),
    }
}

/// A new input from the corpus: 1 to 4 (now and then up to 16) mutations.
fn mutant(rng: &mut Rng, pool: &Pool) -> Vec<u8> {
    let item = rng.pick(&pool.items);
    let rounds = if rng.one_in(10) {
        1 + rng.below(16)
    } else {
        1 + rng.below(4)
    };
    let mut bytes = match &item.value {
        Some(v) if !rng.one_in(5) => {
            let mut v = v.clone();
            let mut dup = None;
            // A third of them keep the JSON's shape, to reach the checks.
            let gentle = rng.one_in(3);
            for _ in 0..rounds {
                if gentle {
                    let n = rng.below(count(&v));
                    same_type(rng, nth_mut(&mut v, n), &pool.words);
                } else {
                    dup = json_mutation(rng, &mut v, pool).or(dup);
                }
            }
            let out = write_out(rng, &v, dup.as_deref());
            // Mostly well-formed JSON; now and then broken further. Past the
            // size limit (an array copied 4096 times): the bytes instead.
            if out.len() > MAX_INPUT {
                item.bytes.clone()
            } else if rng.one_in(6) {
                out
            } else {
                return out;
            }
        }
        _ => item.bytes.clone(),
    };
    for _ in 0..rounds {
        byte_mutation(rng, &mut bytes, &pool.items);
    }
    bytes.truncate(MAX_INPUT);
    bytes
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
        r#"{"kind":"apply","request":{"gpus":["0b:00.0"],"cpus":[2,3,4,5],"isolation_hook":true,"vm":"win11","looking_glass_mib":64,"kvmfr":true,"sound":true,"desktop_user":"alice"}}"#,
        r#"{"kind":"apply","request":{"sriov":{"0000:03:00.0":4},"only":["sriov:0000:03:00.0","thp","ksm","hugepages","cmdline"]}}"#,
        r#"{"kind":"apply","request":{"gpus":["0b:00.0"],"single_gpu":true,"vm":"win11.test_vm+1","desktop_user":"bob_2"}}"#,
        r#"{"request":{"only":["vfio-boot"],"memory_mib":1024,"vcpus":12,"gpus":[],"devices":[],"cpus":null,"hugepages_1g":false,"sriov":{},"isolation_hook":false,"vm":null,"looking_glass_mib":null,"kvmfr":false,"sound":false,"single_gpu":false,"desktop_user":null},"kind":"apply"}"#,
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

/// `vfio-assistant --root ROOT ARGS…`, which must succeed.
fn cli(root: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every entry.json the CLI wrote under `root`, as written but for the id
/// and the time (the same seeds every run, so the same mutants).
fn entries(root: &Path) -> Vec<Vec<u8>> {
    let dir = root.join("var/lib/vfio-assistant/journal");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path().join("entry.json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let v: Value = serde_json::from_str(&text).unwrap();
            let (id, created) = (v["id"].as_str().unwrap(), v["created"].as_u64().unwrap());
            let text = text
                .replace(&format!("\"{id}\""), "\"001700000000-4242-0\"")
                .replace(
                    &format!("\"created\": {created},"),
                    "\"created\": 1700000000,",
                );
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                (&v["id"], &v["created"]),
                (&json!("001700000000-4242-0"), &json!(1700000000))
            );
            text.into_bytes()
        })
        .collect()
}

/// Real entries: a VM's whole tuning on Debian 12 (boot, values, binding),
/// applied and then undone; the isolation hook, Looking Glass and kvmfr;
/// the runtime knobs alone.
fn real_entries() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let debian = tuning_host();
    let r = debian.path();
    cli(
        r,
        &[
            "tune", "apply", "--gpu", "0b:00.0", "--vcpus", "4", "--memory", "1G", "--yes",
        ],
    );
    out.extend(entries(r));
    cli(r, &["tune", "undo", "--last", "--yes"]);
    out.extend(entries(r));
    let hook = tuning_host();
    let r = hook.path();
    std::fs::create_dir_all(r.join("run/systemd/system")).unwrap();
    let put = |rel: &str, text: &str| crate::support::hosts::put(r, rel, text);
    put(
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nanna:x:1000:1000::/home/anna:/bin/bash\n",
    );
    put(
        "lib/modules/6.1.0-18-amd64/modules.dep",
        "kernel/drivers/vfio/pci/vfio-pci.ko:\nupdates/dkms/kvmfr.ko.xz:\n",
    );
    cli(
        r,
        &[
            "tune",
            "apply",
            "--cpus",
            "2-5",
            "--isolate-vm",
            "win11",
            "--looking-glass-mib",
            "64",
            "--kvmfr",
            "--sound",
            "--user",
            "anna",
            "--yes",
        ],
    );
    out.extend(entries(r));
    let runtime = runtime_host();
    let r = runtime.path();
    cli(
        r,
        &[
            "tune",
            "apply",
            "--only",
            "thp,ksm,hugepages,governor",
            "--memory",
            "64M",
            "--yes",
        ],
    );
    out.extend(entries(r));
    out.extend(entries_with_boot_files());
    out.sort();
    out.dedup();
    out
}

/// An entry with its commands run (stand-ins for update-grub and
/// update-initramfs, as tuning_boot.rs does): generated boot files saved,
/// command output recorded, a boot id.
fn entries_with_boot_files() -> Vec<Vec<u8>> {
    use vfio_assistant::host::scan;
    use vfio_assistant::sysroot::HostRoot;
    use vfio_assistant::tuning::apply::{Env, apply};
    use vfio_assistant::tuning::facts::gather;
    use vfio_assistant::tuning::model::Request;
    use vfio_assistant::tuning::plan::plan;
    const REL: &str = "6.1.0-18-amd64";
    let standins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/standins");
    let dir = tuning_host();
    let r = dir.path();
    let put = |rel: &str, text: &str| crate::support::hosts::put(r, rel, text);
    put(&format!("boot/vmlinuz-{REL}"), "");
    put("proc/sys/kernel/random/boot_id", "b00t-1\n");
    crate::support::hosts::bind(r, "0000:0b:00.0", "nouveau");
    crate::support::hosts::bind(r, "0000:0b:00.1", "snd_hda_intel");
    for f in ["0000:0b:00.0", "0000:0b:00.1"] {
        put(
            &format!("sys/devices/pci0000:00/{f}/driver_override"),
            "(null)\n",
        );
    }
    for f in ["bind", "unbind"] {
        put(&format!("sys/bus/pci/drivers/vfio-pci/{f}"), "");
    }
    for argv in [&["update-grub"][..], &["update-initramfs", "-u", "-k", REL]] {
        let st = Command::new(standins.join(argv[0]))
            .args(&argv[1..])
            .env("VFIO_ASSISTANT_ROOT", r)
            .status()
            .unwrap();
        assert!(st.success(), "{argv:?}");
    }
    let root = HostRoot::at(r);
    let req = Request {
        gpus: vec!["0b:00.0".into()],
        vcpus: Some(4),
        memory_mib: Some(1024),
        ..Request::default()
    };
    let p = plan(&scan(&root).unwrap(), &gather(&root), &req).unwrap();
    let mut env = Env::new(HostRoot::at(r), None, true);
    env.tool_dir = Some(standins);
    apply(&env, &gather(&root), &p, &req, &mut |_| {}).unwrap();
    let got = entries(r);
    assert!(
        got.iter()
            .any(|e| serde_json::from_slice::<Value>(e).unwrap()["artifacts"] != json!([])),
        "no boot files saved"
    );
    got
}

/// The forgeries of issue 30, each one edit away from a real entry.
fn forgeries(real: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let base: Value = serde_json::from_slice(real).unwrap();
    let changes = base["plan"]["changes"].as_array().unwrap();
    let with_file = changes
        .iter()
        .position(|c| !c["files"].as_array().unwrap().is_empty());
    let with_value = changes
        .iter()
        .position(|c| !c["values"].as_array().unwrap().is_empty());
    let (fc, vc) = (with_file.unwrap(), with_value.unwrap());
    let saved = base["files"].as_array().unwrap();
    assert!(!saved.is_empty() && !base["values"].as_array().unwrap().is_empty());
    let shell =
        json!({"cmd": {"program": "sh", "argv": ["sh", "-c", "id"]}, "run": true, "why": "x"});
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = base.clone();
        f(&mut v);
        serde_json::to_vec_pretty(&v).unwrap()
    };
    let file_path = changes[fc]["files"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let value_path = changes[vc]["values"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    vec![
        (
            "an undo command that is a shell",
            edit(&|v| {
                v["plan"]["changes"][fc]["undo_commands"]
                    .as_array_mut()
                    .unwrap()
                    .push(shell.clone())
            }),
        ),
        (
            "a command replaced by a shell",
            edit(&|v| v["plan"]["changes"][fc]["undo_commands"] = json!([shell.clone()])),
        ),
        (
            "another kind's command",
            edit(
                &|v| v["plan"]["changes"][vc]["undo_commands"] = json!([{"cmd": {"program": "systemctl", "verb": "start", "unit": "libvirtd"}, "run": true, "why": "x"}]),
            ),
        ),
        (
            "a file restored to /etc/passwd",
            edit(&|v| {
                v["files"].as_array_mut().unwrap().push(json!({"path": "/etc/passwd", "saved_as": "0", "mode": 420, "uid": 0, "gid": 0, "written": null}))
            }),
        ),
        (
            "a change writing /etc/passwd",
            edit(&|v| {
                v["plan"]["changes"][fc]["files"][0]["path"] = json!("/etc/passwd");
                for f in v["files"].as_array_mut().unwrap() {
                    if f["path"] == json!(file_path) {
                        f["path"] = json!("/etc/passwd");
                    }
                }
            }),
        ),
        (
            "a file restored setuid (0o4755)",
            edit(&|v| v["files"][0]["mode"] = json!(2541)),
        ),
        (
            "a file restored writable by all",
            edit(&|v| v["files"][0]["mode"] = json!(0o666)),
        ),
        (
            "a saved copy outside the journal",
            edit(&|v| v["files"][0]["saved_as"] = json!("../../../etc/shadow")),
        ),
        (
            "a value restored to core_pattern",
            edit(&|v| {
                v["values"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!(["/proc/sys/kernel/core_pattern", "|/tmp/x"]))
            }),
        ),
        (
            "a change writing core_pattern",
            edit(&|v| {
                v["plan"]["changes"][vc]["values"][0]["path"] =
                    json!("/proc/sys/kernel/core_pattern");
                for p in v["values"].as_array_mut().unwrap() {
                    if p[0] == json!(value_path) {
                        p[0] = json!("/proc/sys/kernel/core_pattern");
                    }
                }
            }),
        ),
        (
            "an id that is a path",
            edit(&|v| v["id"] = json!("../../etc")),
        ),
    ]
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
