//! Every command the product prints runs as printed (house rule 17): each
//! `vfio-assistant …` in the code's texts (a next step, a finding's fix, a
//! plan's note, a comment in a file it writes) and in the README and docs
//! is parsed with the CLI's own parser. A placeholder a reader fills in
//! (NAME, ADDRESS, `{name}`) is given a value of its kind first; anything
//! else must parse as it stands.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use clap::Parser;
use std::path::{Path, PathBuf};
use vfio_assistant::cli::Cli;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file below `dir` ending in one of `exts` (no target/).
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "fixtures" {
                files(&p, exts, out);
            }
        } else if exts.iter().any(|x| name.ends_with(x)) {
            out.push(p);
        }
    }
}

/// The placeholder words a reader replaces, with a value of their kind.
fn fill(word: &str) -> String {
    let w = word.trim_matches(|c| c == '[' || c == ']');
    let v = match w {
        "N" | "COUNT" | "SECONDS" => "4",
        "SIZE" => "16G",
        "LIST" | "CPUS" => "2-7",
        "ADDRESS" | "ADDR" | "BDF" => "0000:01:00.0",
        "FILE" | "PATH" | "DIR" | "XML" => "/tmp/vfio-test-file",
        "NAME" | "VM" | "DOMAIN" | "SYMPTOM" | "UNIT" => "win11",
        "ID" => "1700000000000",
        "URI" => "qemu:///system",
        "WxH" => "2560x1440",
        _ if word.starts_with('{') && word.ends_with('}') => "x1",
        _ => return word.to_string(),
    };
    v.to_string()
}

/// A command line split as a shell would (single and double quotes).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The `vfio-assistant …` commands in a text: inline code spans and
/// lines of code blocks, cut at a pipe, a redirection, `&&` or a comment.
/// In Rust source only what is outside comments counts (a doc comment's
/// usage line is read by developers, not printed). A usage synopsis
/// (`plan|apply`, `[--json]`) is read as its first form without the
/// optional parts; `…` stands for "any" and is not checked.
fn commands_in(text: &str, rust: bool) -> Vec<String> {
    let text: String = if rust {
        text.lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        text.to_string()
    };
    let mut out = Vec::new();
    let mut push = |c: &str| {
        let c = c.split_whitespace().collect::<Vec<_>>().join(" ");
        let c = c.strip_prefix("$ ").unwrap_or(&c).trim();
        let c = c.strip_prefix("sudo ").unwrap_or(c).trim();
        let Some(rest) = c.strip_prefix("vfio-assistant ") else {
            return;
        };
        if rest.contains('…') {
            return;
        }
        let cut = [" | ", " > ", " 2>", " && ", " # ", " ; ", " || "]
            .iter()
            .filter_map(|s| rest.find(s))
            .min()
            .unwrap_or(rest.len());
        let rest = rest[..cut].trim().trim_end_matches(['\\', ',', '.']);
        out.push(synopsis_first_form(rest));
    };
    for span in text.split('`').skip(1).step_by(2) {
        push(span);
    }
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if in_block {
            push(line);
        }
    }
    out
}

/// `plan|apply [--json] [--x [--y]]` -> `plan`: the first alternative of
/// each word, optional parts dropped.
fn synopsis_first_form(s: &str) -> String {
    let mut depth = 0usize;
    let mut kept = String::new();
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    kept.split_whitespace()
        .map(|w| {
            if w.starts_with('{') {
                w
            } else {
                w.split('|').next().unwrap_or(w)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn parses(cmd: &str) -> Result<(), String> {
    let mut argv = vec!["vfio-assistant".to_string()];
    for w in words(cmd) {
        // `--only {change}…`: a change id is filled in at run time.
        let v = if argv.last().is_some_and(|p| p == "--only") && w.starts_with('{') {
            "vfio-boot".to_string()
        } else {
            fill(&w)
        };
        argv.push(v);
    }
    match Cli::try_parse_from(&argv) {
        Ok(_) => Ok(()),
        // A command group named alone (`vfio-assistant tune`) prints its
        // subcommands: it runs, as help.
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp
                    | clap::error::ErrorKind::DisplayVersion
                    | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string().lines().next().unwrap_or("").to_string()),
    }
}

/// Commands printed in texts that are not for a user to run: a `format!`
/// piece that is completed elsewhere is skipped by its lack of a
/// subcommand only if it ends in `{…}` (checked by the format test below).
#[test]
fn every_printed_command_parses() {
    let root = manifest();
    let mut sources = Vec::new();
    files(&root.join("src"), &[".rs"], &mut sources);
    files(&root.join("crates"), &[".rs"], &mut sources);
    files(&root.join("docs"), &[".md"], &mut sources);
    files(
        &root.join("packaging"),
        &[".md", ".desktop", ".xml", ".policy"],
        &mut sources,
    );
    sources.push(root.join("README.md"));
    let mut bad = Vec::new();
    let mut seen = 0;
    for f in &sources {
        let text = std::fs::read_to_string(f).unwrap();
        let rust = f.extension().is_some_and(|x| x == "rs");
        for cmd in commands_in(&text, rust) {
            // README: "`vfio-assistant tu` completes to `tune`" shows the
            // shell's completion of a half-typed word.
            if cmd == "tu" {
                continue;
            }
            // A format string whose command is completed at run time
            // (`vfio-assistant {cmd}`) is checked where it is completed.
            if cmd.starts_with('{') {
                continue;
            }
            seen += 1;
            if let Err(why) = parses(&cmd) {
                bad.push(format!(
                    "{}: `vfio-assistant {cmd}`: {why}",
                    f.strip_prefix(&root).unwrap_or(f).display()
                ));
            }
        }
    }
    assert!(seen > 50, "only {seen} commands found: the scan is broken");
    assert!(
        bad.is_empty(),
        "{} printed commands do not parse:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The scanner itself finds and refuses what it should.
#[test]
fn the_scanner_catches_a_command_that_does_not_run() {
    assert_eq!(
        commands_in("run `vfio-assistant tune plan --only vfio-boot` now", false),
        vec!["tune plan --only vfio-boot"]
    );
    assert_eq!(
        commands_in(
            "// `vfio-assistant nope`\nlet s = \"`vfio-assistant scan [--json]`\";",
            true
        ),
        vec!["scan"]
    );
    assert_eq!(
        synopsis_first_form("tune plan|apply [--json [--x]] --gpu A"),
        "tune plan --gpu A"
    );
    assert!(parses("tune plan --only vfio-boot --gpu ADDRESS").is_ok());
    assert!(parses("tune undo").is_err(), "undo needs an id or --last");
    assert!(parses("tune plan --frobnicate").is_err());
    assert_eq!(words("a 'b c' \"d\""), vec!["a", "b c", "d"]);
}
