//! Fuzzing the snapshot masker (`capture::secrets::mask_secrets`, issue
//! 41) with real kernel command lines: tests/fixtures/cmdlines (each with
//! its SOURCE) and every command line, GRUB default file and BLS entry
//! among the other fixtures. Each is first proved left as it is (none holds
//! a credential); then credentials, in the shapes dracut's manual documents
//! (`netroot=iscsi:u:p@…`, `root=cifs://u:p@…`, `cifspass=`,
//! `rd.iscsi.password=`, a URL's `user:password@`, mount options), are put
//! between its words with random users and passwords, and the masked line
//! must keep no password and every word of the real line, in order. Then
//! byte mutations (mod.rs's `mutant`) must not panic and must take under
//! 2 s. `FUZZ_ITERATIONS` and `FUZZ_SEED` as in mod.rs.
//!
//! The passwords are drawn from letters, digits and `!#%+.^_~*-`: a
//! password holding a blank or a quote cannot be told from what follows it
//! on an unquoted command line, and in a URL `=`, `/`, `,` and `@` end the
//! part before the host (a browser would have percent-encoded them).

use super::mutate::{Item, Pool, Rng, mutant};
use super::{DEFAULT_SEED, SLOWEST_ALLOWED, env_u64};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;
use vfio_assistant::capture::secrets::{MASK, mask_secrets};

/// A line of the corpus, and whether it is read as a configuration file's.
struct Line {
    text: String,
    config: bool,
    from: String,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every file under `dir` whose path ends with one of `ends`.
fn files_under(dir: &Path, ends: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            files_under(&p, ends, out);
        } else if ft.is_file() && ends.iter().any(|end| p.to_string_lossy().ends_with(end)) {
            out.push(p);
        }
    }
}

fn corpus() -> Vec<Line> {
    let mut lines = Vec::new();
    let own = fixtures().join("cmdlines/cmdline.txt");
    for l in std::fs::read_to_string(&own).unwrap().lines() {
        if !l.starts_with('#') && !l.trim().is_empty() {
            lines.push(Line {
                text: format!("{l}\n"),
                config: false,
                from: own.display().to_string(),
            });
        }
    }
    let mut files = Vec::new();
    files_under(
        &fixtures(),
        &[
            "proc/cmdline",
            "etc/default/grub",
            "etc/kernel/cmdline",
            ".conf",
        ],
        &mut files,
    );
    for f in files {
        let s = f.to_string_lossy();
        let config = !s.ends_with("proc/cmdline");
        if s.ends_with(".conf") && !s.contains("/loader/entries/") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            lines.push(Line {
                text: format!("{l}\n"),
                config,
                from: f.display().to_string(),
            });
        }
    }
    lines
}

const PASSWORD_BYTES: &[u8] =
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#%+.^_~*-";

/// A password of 10 to 24 bytes, never one that reads as "nothing to hide"
/// (`$NAME`) and with a digit and a capital, so that it is nowhere else.
fn password(rng: &mut Rng) -> String {
    let n = 10 + rng.below(15);
    let mut p: String = (0..n)
        .map(|_| char::from(*rng.pick(PASSWORD_BYTES)))
        .collect();
    p.insert(rng.below(p.len()), 'Q');
    p.insert(rng.below(p.len()), '7');
    p
}

fn user(rng: &mut Rng) -> String {
    let n = 3 + rng.below(6);
    let mut u = String::from(char::from(*rng.pick(b"abcdefghijklmnopqrstuvwxyz")));
    u.extend((0..n).map(|_| char::from(*rng.pick(b"abcdefghijklmnopqrstuvwxyz0123456789_"))));
    u
}

/// A credential as the sources write them: the token and its passwords.
fn credential(rng: &mut Rng) -> (String, Vec<String>) {
    let (u, p, q) = (user(rng), password(rng), password(rng));
    let token = match rng.below(8) {
        0 => format!("netroot=iscsi:{u}:{p}@192.168.50.1::3260::iqn.2009-06.dracut:target0"),
        1 => format!("root=iscsi:{u}:{p}:{u}r:{q}@[2001:DB8::1]::::iqn.2009-06.dracut:target0"),
        2 => format!("root=cifs://{u}:{p}@192.168.50.1:/srv/root"),
        3 => format!("cifsuser={u} cifspass={p}"),
        4 => format!(
            "rd.iscsi.username={u} rd.iscsi.password={p} rd.iscsi.in.username={u} rd.iscsi.in.password={q}"
        ),
        5 => format!("root=live:https://{u}:{p}@example.com/liveboot.img"),
        6 => format!("rd.luks.key={p}"),
        _ => format!("rootflags=username={u},password={p},vers=3.0"),
    };
    let secrets = if token.contains(&q) {
        vec![p, q]
    } else {
        vec![p]
    };
    (token, secrets)
}

/// `line` with `token` put before its word `at` (never first in a
/// configuration file's line, nor right after its comment mark: a secret
/// name there takes the rest of the line, as `password=two words` does).
fn insert(line: &str, token: &str, at: usize, config: bool) -> String {
    let body = line.trim_end_matches('\n');
    let mut words: Vec<&str> = body.split(' ').collect();
    // After the line's first word that is more than blanks and comment marks.
    let first = if config {
        words
            .iter()
            .position(|w| !w.chars().all(|c| c == '#' || c == ';'))
            .map_or(words.len(), |p| p + 1)
    } else {
        0
    };
    let at = at.max(first);
    let at = at.min(words.len());
    words.insert(at, token);
    format!("{}\n", words.join(" "))
}

/// Whether `words` appear in `text`'s words in this order.
fn keeps_in_order(text: &str, words: &[&str]) -> bool {
    let mut have = text.split_whitespace();
    words.iter().all(|w| have.by_ref().any(|h| h == *w))
}

fn fail(what: &str, input: &str, why: &str) -> ! {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-crashes");
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join(format!("masker-{:x}.txt", input.len() ^ why.len()));
    let _ = std::fs::write(&file, input);
    panic!(
        "fuzz masker ({what}): {why}\n  input saved as {}\n  {input:?}",
        file.display()
    );
}

#[test]
fn fuzz_masker() {
    let lines = corpus();
    assert!(lines.len() >= 30, "{} lines", lines.len());
    for l in &lines {
        let (out, keys) = mask_secrets(&l.text, l.config);
        assert_eq!(
            (out.as_str(), keys),
            (l.text.as_str(), vec![]),
            "a real line of {} is changed",
            l.from
        );
    }
    let seed = env_u64("FUZZ_SEED", DEFAULT_SEED);
    let iterations = env_u64("FUZZ_ITERATIONS", 2000);
    let mut rng = Rng::new(seed ^ 0x4141);
    let started = Instant::now();
    let mut masked = 0usize;
    for i in 0..iterations {
        let l = &lines[rng.below(lines.len())];
        let mut text = l.text.clone();
        let mut secrets = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let (token, s) = credential(&mut rng);
            let at = rng.below(text.split(' ').count() + 1);
            text = insert(&text, &token, at, l.config);
            secrets.extend(s);
        }
        let label = format!("seed {seed:#x} iteration {i}, from {}", l.from);
        let t = Instant::now();
        let Ok((out, keys)) = catch_unwind(AssertUnwindSafe(|| mask_secrets(&text, l.config)))
        else {
            fail(&label, &text, "panicked");
        };
        if t.elapsed() > SLOWEST_ALLOWED {
            fail(&label, &text, &format!("took {:?}", t.elapsed()));
        }
        if let Some(s) = secrets.iter().find(|s| out.contains(s.as_str())) {
            fail(
                &label,
                &text,
                &format!("the password {s:?} survived: {out:?}"),
            );
        }
        let words: Vec<&str> = l.text.split_whitespace().collect();
        if !keeps_in_order(&out, &words) {
            fail(
                &label,
                &text,
                &format!("a word of the real line changed: {out:?}"),
            );
        }
        if keys.is_empty() || !out.contains(MASK) {
            fail(
                &label,
                &text,
                "masked without saying so in SNAPSHOT.txt's list",
            );
        }
        masked += keys.len();
    }
    // Bytes mutated at random: no panic, no slow input.
    let pool = Pool::new(
        lines
            .iter()
            .map(|l| Item::new(l.text.clone().into_bytes()))
            .collect(),
    );
    for i in 0..iterations {
        let input = String::from_utf8_lossy(&mutant(&mut rng, &pool)).into_owned();
        let t = Instant::now();
        for config in [false, true] {
            if catch_unwind(AssertUnwindSafe(|| mask_secrets(&input, config))).is_err() {
                fail(&format!("mutant {i}"), &input, "panicked");
            }
        }
        if t.elapsed() > SLOWEST_ALLOWED {
            fail(
                &format!("mutant {i}"),
                &input,
                &format!("took {:?}", t.elapsed()),
            );
        }
    }
    eprintln!(
        "fuzz masker: {} real lines, {iterations} with credentials put in ({masked} settings masked) and {iterations} mutants (FUZZ_SEED={seed:#x}) in {:.1?}",
        lines.len(),
        started.elapsed()
    );
}
