//! GRUB's part of the kernel command line change, tried once: a menu entry
//! of ours that boots the new setup one time (`grub-reboot`), the default
//! entry left as it was until the user keeps it — so a tuning that leaves
//! the host without a screen, or without a boot, is gone at the next power
//! cycle with nothing to undo (docs/research-grub-once.md §1-2).
//!
//! The entry is made by a script of ours in /etc/grub.d that runs the
//! distribution's own 10_linux with the parameters added, keeps its first
//! entry (the newest kernel, as the default entry boots it) and gives it
//! our title and id: generated with every grub-mkconfig, a kernel update
//! keeps it current. `grub-reboot` sets `next_entry` in GRUB's environment
//! block, which GRUB clears as it boots it — where it can write the block:
//! not on btrfs, ZFS, LVM, software RAID or an encrypted volume, where the
//! entry would boot every time (`once_blocked` says so and the plan writes
//! the default entry instead, as before).
//!
//! Once that boot came up with every parameter, the same request keeps it:
//! the parameters go where the distribution's default entries get them
//! (Debian's drop-in, or /etc/default/grub) and our script goes.

use super::super::command::{Cmd, GRUB_ONCE_ID, Grub};
use super::super::facts::TuneFacts;
use super::super::model::{Change, CommandStep, FileChange, Verify};
use super::super::tokens::missing;
use super::{ev, grub_cfg};
use crate::tuning::paths;
use crate::tuning::paths::GRUB_ONCE_SCRIPT as SCRIPT;

const TOKENS_LINE: &str = "VFIO_ASSISTANT_TOKENS=";

/// The script that makes our entry with `tokens` added.
pub fn script_text(tokens: &[String]) -> String {
    format!(
        r#"#!/bin/sh
# Written by vfio-assistant (tune): a boot entry of its own with kernel
# parameters for VM passthrough, booted once (`grub-reboot {id}`); the
# default entry is unchanged until `sudo vfio-assistant tune keep` keeps them.
# Undo: `sudo vfio-assistant tune undo ID` (`tune list` names it), or delete
# this file and run update-grub.
set -e
{TOKENS_LINE}"{tokens}"
# The distribution's own entry for the newest kernel (10_linux's first),
# with the parameters added, under our title and id.
GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT $VFIO_ASSISTANT_TOKENS" \
GRUB_DISABLE_SUBMENU=false GRUB_DISABLE_RECOVERY=true \
"$(dirname "$0")/10_linux" | sed -n '/^menuentry /,/^}}/p' | sed \
    -e "1s/^menuentry '[^']*'/menuentry 'VFIO Assistant: the new setup, booted once'/" \
    -e "1s/\$menuentry_id_option '[^']*'/\$menuentry_id_option '{id}'/" \
    -e '/^}}/q'
"#,
        id = GRUB_ONCE_ID,
        tokens = tokens.join(" ")
    )
}

/// The parameters a script of ours adds.
pub fn script_tokens(text: &str) -> Vec<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(TOKENS_LINE))
        .map(|v| {
            v.trim_matches('"')
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The GRUB flavour of this host (grub-mkconfig or grub2-mkconfig, its
/// folder).
pub fn grub_of(f: &TuneFacts) -> Grub {
    let cfg = grub_cfg(f).unwrap_or(paths::BOOT_GRUB_GRUB_CFG);
    let grub2_tool = !f.has_tool("grub-mkconfig") && f.has_tool("grub2-mkconfig");
    Grub::of(grub2_tool, cfg.starts_with(paths::BOOT_GRUB2_PREFIX))
}

/// Why the new setup cannot be booted once here (the plan then writes the
/// default entry, as before, and says this), or `None` when it can.
pub fn once_blocked(f: &TuneFacts) -> Option<String> {
    let g = grub_of(f);
    let reboot = match g {
        Grub::Grub | Grub::GrubInGrub2 => "grub-reboot",
        Grub::Grub2 | Grub::Grub2InGrub => "grub2-reboot",
    };
    if !f.has_tool(reboot) {
        return Some(format!("{reboot} is not installed"));
    }
    if !f
        .dir(paths::ETC_GRUB_D)
        .is_some_and(|d| d.iter().any(|n| n == "10_linux"))
    {
        return Some(
            "/etc/grub.d/10_linux, which makes the distribution's entries, is not there".into(),
        );
    }
    f.grubenv_blocked.clone()
}

/// The entry of ours with `add`, booted once; or `None` when the script
/// already says exactly that (then only armed again).
pub fn once_change(f: &TuneFacts, add: &[String], base: Change, title: String) -> Change {
    let g = grub_of(f);
    let cfg = format!("{}/grub.cfg", g.dir());
    let before = f.file(SCRIPT).map(str::to_string);
    let after = script_text(add);
    let files = if before.as_deref() == Some(after.as_str()) {
        Vec::new()
    } else {
        vec![FileChange {
            path: SCRIPT.into(),
            before,
            after: Some(after),
        }]
    };
    let mkconfig = CommandStep::new(
        Cmd::GrubMkconfig { grub: g },
        format!(
            "generates the boot menu with the entry of ours beside {cfg}; checked there, then renamed over it in one step"
        ),
    );
    Change {
        title: format!("{title} (a new boot entry, tried once)"),
        evidence: vec![ev(
            "GRUB",
            format!("{SCRIPT} makes the entry '{GRUB_ONCE_ID}'; grub-reboot boots it once"),
        )],
        files,
        commands: vec![
            mkconfig.clone(),
            CommandStep::new(
                Cmd::GrubReboot { grub: g },
                "boots the new entry once; the default entry stays the old setup until you keep the new one",
            ),
        ],
        undo_commands: vec![
            mkconfig,
            CommandStep::new(
                Cmd::GrubUnsetOnce { grub: g },
                "takes back the one boot into it, if it has not happened yet",
            ),
        ],
        // The environment block too: undo puts its bytes back while GRUB
        // has not booted the entry yet (else the undo commands take the
        // one boot back).
        artifacts: vec![
            super::super::model::Artifact {
                path: cfg.clone(),
                staging: Some(g.staging()),
            },
            super::super::model::Artifact {
                path: format!("{}/grubenv", g.dir()),
                staging: None,
            },
        ],
        verify: vec![Verify::MenuEntryHas {
            file: cfg,
            id: GRUB_ONCE_ID.into(),
            tokens: add.to_vec(),
        }],
        notes: vec![format!(
            "Booted once: if the new setup does not come up (no screen, no boot), power the machine off and on — GRUB starts the old default, and nothing needs undoing. After a good boot, keep it: the Tuning page's Keep button (`sudo vfio-assistant tune keep`)."
        )],
        ..base
    }
}

/// This boot came up from our entry, with every parameter of `add`: the
/// keep (the default entries get them, our script goes) is due.
pub fn booted_from_ours(f: &TuneFacts, add: &[String]) -> bool {
    let Some(text) = f.file(SCRIPT) else {
        return false;
    };
    let ours = script_tokens(text);
    let booted = f.proc_cmdline.as_deref().unwrap_or("");
    !add.is_empty() && missing(&ours.join(" "), add).is_empty() && missing(booted, add).is_empty()
}

/// The script's removal, for the keep.
pub fn script_gone(f: &TuneFacts) -> Option<FileChange> {
    f.file(SCRIPT).map(|t| FileChange {
        path: SCRIPT.into(),
        before: Some(t.into()),
        after: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_carries_its_tokens_and_our_id() {
        let t = script_text(&["iommu=pt".into(), "vfio_pci.ids=10de:2786,10de:22bc".into()]);
        assert_eq!(
            script_tokens(&t),
            vec!["iommu=pt", "vfio_pci.ids=10de:2786,10de:22bc"]
        );
        assert!(t.contains("$menuentry_id_option 'vfio-assistant'"), "{t}");
        assert!(t.starts_with("#!/bin/sh\n"));
    }
}
