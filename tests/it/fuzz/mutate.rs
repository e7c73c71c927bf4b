//! The fuzzer's mutations: its random numbers, the pool of inputs, and the
//! byte-level and JSON-aware changes stacked on a seed (see mod.rs).

use super::MAX_INPUT;
use serde_json::{Value, json};

/// xorshift64* (Vigna), seeded through splitmix64.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    pub(super) fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
    pub(super) fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// One input to mutate: its bytes and, when they are JSON, the tree.
pub(super) struct Item {
    pub(super) bytes: Vec<u8>,
    pub(super) value: Option<Value>,
}

impl Item {
    pub(super) fn new(bytes: Vec<u8>) -> Item {
        let value = serde_json::from_slice(&bytes).ok();
        Item { bytes, value }
    }
}

/// What mutants are made from: the inputs, and every short string in the
/// seeds (paths, change ids, enum names) to put where another one was —
/// a file of one change kind under another, a state for a program.
pub(super) struct Pool {
    pub(super) items: Vec<Item>,
    pub(super) words: Vec<String>,
}

impl Pool {
    pub(super) fn new(items: Vec<Item>) -> Pool {
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

pub(super) const BYTES: &[u8] = b"\0\x01\x7f\x80\xff\"\\{}[],:-+.eE0123456789 \t\n/~*";
pub(super) const TOKENS: &[&[u8]] = &[
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

pub(super) fn byte_mutation(rng: &mut Rng, d: &mut Vec<u8>, corpus: &[Item]) {
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

pub(super) const STRINGS: &[&str] = &[
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

pub(super) fn interesting(rng: &mut Rng) -> Value {
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

pub(super) fn long_string(rng: &mut Rng) -> Value {
    // Up to ~100 KiB of one piece of text.
    let piece = *rng.pick(&["A", "/", "../", "é", "\0", "🦀", "a/"]);
    json!(piece.repeat(1 + rng.below(100 * 1024 / piece.len())))
}

pub(super) fn interesting_number(rng: &mut Rng) -> Value {
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
pub(super) const COMPONENTS: &[&str] = &[
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
pub(super) fn path_edit(rng: &mut Rng, s: &mut String) {
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
pub(super) fn same_type(rng: &mut Rng, node: &mut Value, words: &[String]) {
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

pub(super) fn count(v: &Value) -> usize {
    1 + children(v).into_iter().map(count).sum::<usize>()
}

pub(super) fn children(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(o) => o.values().collect(),
        _ => Vec::new(),
    }
}

/// The `n`th node in document order (0 is `v` itself).
pub(super) fn nth(v: &Value, n: usize) -> &Value {
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

pub(super) fn nth_mut(v: &mut Value, n: usize) -> &mut Value {
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
pub(super) const DUP: &str = "\u{1}fuzz-duplicate";

/// One structural mutation of `v`; a key to duplicate comes back.
pub(super) fn json_mutation(rng: &mut Rng, v: &mut Value, pool: &Pool) -> Option<String> {
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

pub(super) fn write_out(rng: &mut Rng, v: &Value, dup: Option<&str>) -> Vec<u8> {
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
pub(super) fn mutant(rng: &mut Rng, pool: &Pool) -> Vec<u8> {
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
