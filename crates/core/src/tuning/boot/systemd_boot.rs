//! systemd-boot's part of the kernel command line change: a copy of the
//! default entry with the tokens added, booted once (`bootctl set-oneshot`),
//! and `/etc/kernel/cmdline` for kernel-install's future entries. Once the
//! copy has booted well (this boot came up from it with every token), the
//! same request keeps it: the tokens go into the default entry itself and
//! the copy goes (a second transaction, undone on its own).

use super::*;
use crate::tuning::paths;

use super::super::command::OUR_ENTRY as OURS;

/// The default entry systemd-boot starts (loader.conf's `default`, a glob,
/// else the first entry), never ours.
pub(super) fn default_entry(f: &TuneFacts) -> Option<String> {
    let ents = entries(f);
    let default = loader_default(f);
    let pick = ents
        .iter()
        .filter(|p| !p.ends_with(OURS))
        .find(|p| {
            !default.is_empty()
                && p.rsplit('/')
                    .next()
                    .is_some_and(|n| glob_match(&default, n))
        })
        .or_else(|| ents.iter().find(|p| !p.ends_with(OURS)));
    pick.cloned()
}

/// loader.conf's `default` (a name or a glob), empty when it sets none.
pub(super) fn loader_default(f: &TuneFacts) -> String {
    let loader_conf = [
        paths::BOOT_LOADER_LOADER_CONF,
        paths::EFI_LOADER_LOADER_CONF,
        paths::BOOT_EFI_LOADER_LOADER_CONF,
    ]
    .iter()
    .find_map(|p| f.file(p));
    loader_conf
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("default")
                    .map(|d| d.trim().to_string())
            })
        })
        .unwrap_or_default()
}

/// systemd-boot: a new entry of ours copied from the default entry, booted
/// once; and `/etc/kernel/cmdline` when kernel-install writes the entries.
pub(super) fn systemd_boot(
    f: &TuneFacts,
    tokens: &[String],
    base: Change,
) -> Result<Option<Change>, Manual> {
    let picked = default_entry(f);
    let Some(src) = picked.as_ref() else {
        return Err(manual_cmdline(
            tokens,
            "systemd-boot booted, but no boot entry was found to copy",
        ));
    };
    let dir = src
        .rsplit_once('/')
        .map_or(paths::BOOT_LOADER_ENTRIES, |(d, _)| d);
    let ours = format!("{dir}/{OURS}");
    let text = f.file(src).unwrap_or("");
    let opts: String = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("options"))
        .collect::<Vec<_>>()
        .join(" ");
    let add = missing(&opts, tokens);
    let existing = f.file(&ours).map(str::to_string);
    if let Some(keep) = keep_copy(f, src, text, existing.as_deref(), &ours, &add, &base) {
        return Ok(Some(keep));
    }
    let after = (!add.is_empty()).then(|| with_options(text, &add, true));
    let kc = f.file(paths::ETC_KERNEL_CMDLINE);
    let kc_change = kc.and_then(|k| {
        let a = missing(k, tokens);
        (!a.is_empty()).then(|| FileChange {
            path: paths::ETC_KERNEL_CMDLINE.into(),
            before: Some(k.into()),
            after: Some(format!("{}\n", merge(k.trim(), &a))),
        })
    });
    if existing == after && kc_change.is_none() {
        return Ok(None);
    }
    let mut files = vec![FileChange {
        path: ours.clone(),
        before: existing,
        after: after.clone(),
    }];
    files.extend(kc_change);
    let mut commands = Vec::new();
    if after.is_some() {
        commands.push(CommandStep::new(Cmd::BootctlSetOneshot, "boots the new entry once; the old default stays the default until you keep the new one"));
    }
    Ok(Some(Change {
        title: format!(
            "Kernel parameters: {} (a new boot entry, tried once)",
            add.join(" ")
        ),
        evidence: vec![ev(src, format!("options {}", opts.trim()))],
        files,
        commands,
        verify: vec![Verify::BootEntriesHave {
            files: vec![ours],
            tokens: add,
        }],
        ..base
    }))
}

/// The copy tried once booted well: this boot's command line holds every
/// token the default entry lacks, and so does the copy. Keeping writes
/// them into the default entry (what systemd-boot starts from now on) and
/// removes the copy; no command runs, an entry is read at boot as it is.
fn keep_copy(
    f: &TuneFacts,
    src: &str,
    text: &str,
    existing: Option<&str>,
    ours: &str,
    add: &[String],
    base: &Change,
) -> Option<Change> {
    let copy = existing?;
    let copy_opts: String = copy
        .lines()
        .filter_map(|l| l.trim().strip_prefix("options"))
        .collect::<Vec<_>>()
        .join(" ");
    let booted = f.proc_cmdline.as_deref().unwrap_or("");
    if add.is_empty() || !missing(&copy_opts, add).is_empty() || !missing(booted, add).is_empty() {
        return None;
    }
    Some(Change {
        title: format!(
            "Kernel parameters: keep {} (the entry tried once booted well; it becomes the default)",
            add.join(" ")
        ),
        evidence: vec![
            ev(ours, format!("options {}", copy_opts.trim())),
            ev(
                &crate::sysroot::HostPath::proc("cmdline").to_string(),
                booted.trim(),
            ),
        ],
        files: vec![
            FileChange {
                path: src.into(),
                before: Some(text.into()),
                after: Some(with_options(text, add, false)),
            },
            FileChange {
                path: ours.into(),
                before: Some(copy.into()),
                after: None,
            },
        ],
        verify: vec![Verify::BootEntriesHave {
            files: vec![src.into()],
            tokens: add.to_vec(),
        }],
        notes: vec![format!(
            "This boot came up from {ours} with these parameters. Keeping writes them into {src}, the entry systemd-boot starts by default, and removes the copy; undo puts the entry back as it was."
        )],
        ..base.clone()
    })
}

/// loader.conf's `default` may be a glob (`arch*`).
/// `*` and `?` as systemd-boot's fnmatch reads them; a plain name also
/// matches its `.conf` file.
pub(super) fn glob_match(pat: &str, name: &str) -> bool {
    fn m(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| m(rest, &n[i..])),
            Some(('?', rest)) => !n.is_empty() && m(rest, &n[1..]),
            Some((c, rest)) => n.first() == Some(c) && m(rest, &n[1..]),
        }
    }
    // Bounded: each star tries every split of the name, so a pattern with
    // more than a few is none a loader.conf means.
    if pat.len() > 256 || pat.matches('*').count() > 4 {
        return false;
    }
    let n: Vec<char> = name.chars().collect();
    let p: Vec<char> = pat.chars().collect();
    m(&p, &n) || (!pat.contains(['*', '?']) && format!("{pat}.conf") == name)
}

/// A BLS entry with its options extended; as our copy (`copy`), with a
/// header and its title marked.
fn with_options(text: &str, add: &[String], copy: bool) -> String {
    let mut out = if copy {
        String::from(
            "# Written by vfio-assistant (tune): a copy of the default entry with kernel parameters for VM passthrough.\n",
        )
    } else {
        String::new()
    };
    let mut had_options = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("title").filter(|_| copy) {
            out.push_str(&format!("title {} (VFIO Assistant)\n", rest.trim()));
        } else if let Some(rest) = t.strip_prefix("options") {
            if !had_options {
                out.push_str(&format!("options {}\n", merge(rest.trim(), add)));
                had_options = true;
            } else {
                out.push_str(line);
                out.push('\n');
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !had_options {
        out.push_str(&format!("options {}\n", add.join(" ")));
    }
    out
}
