//! GRUB's part of the kernel command line change, on the grub-mkconfig
//! boot paths (Debian's drop-in folder with update-grub; /etc/default/grub
//! elsewhere): tried once where GRUB can (grub_once.rs), kept after a good
//! boot from that entry, else written into the default entries as before
//! (the "(recovery mode)" entries never get them: a way back).

use super::super::command::{Cmd, Grub};
use super::super::facts::TuneFacts;
use super::super::model::{Change, CommandStep, FileChange, Manual, Verify};
use super::super::tokens::missing;
use super::{Loader, ev, grub_cfg, grub_once, grub_texts, grub_var, manual_cmdline, set_grub_var};
use crate::tuning::paths;
use crate::tuning::paths::GRUB_DROPIN as DROPIN;

fn title(t: &[String]) -> String {
    format!("Kernel parameters: {}", t.join(" "))
}

/// The command line the default entries get, from every file (ours too).
fn configured(f: &TuneFacts, loader: Loader) -> Result<String, Manual> {
    let texts: Vec<&str> = match loader {
        Loader::GrubDebian => grub_texts(f, ""),
        _ => vec![f.file(paths::ETC_DEFAULT_GRUB).unwrap_or("")],
    };
    Ok(cmdline_of(&texts))
}

/// The kernel command line change on GRUB: nothing when the default
/// entries have every token; the keep when this boot came up from our
/// entry tried once; the entry tried once where GRUB can boot it once;
/// else the default entries written directly.
pub(super) fn grub_cmdline(
    f: &TuneFacts,
    loader: Loader,
    tokens: &[String],
    base: Change,
) -> Result<Option<Change>, Manual> {
    if loader == Loader::GrubMkconfig && f.file(paths::ETC_DEFAULT_GRUB).is_none() {
        return Err(manual_cmdline(
            tokens,
            "GRUB booted, but /etc/default/grub is not there",
        ));
    }
    let need = missing(&configured(f, loader)?, tokens);
    if need.is_empty() {
        return Ok(None);
    }
    if grub_once::booted_from_ours(f, &need) {
        let Some(mut c) = direct(f, loader, tokens, base)? else {
            return Ok(None);
        };
        c.files.extend(grub_once::script_gone(f));
        c.title = format!(
            "Kernel parameters: keep {} (the entry tried once booted well; the default entries get them)",
            need.join(" ")
        );
        c.evidence.push(ev(
            &crate::sysroot::HostPath::proc("cmdline").to_string(),
            f.proc_cmdline.as_deref().unwrap_or("").trim(),
        ));
        c.notes.push(format!(
            "This boot came up from the entry tried once with these parameters. Keeping writes them where the default entries get them and removes {}; undo puts both back.",
            crate::tuning::paths::GRUB_ONCE_SCRIPT
        ));
        return Ok(Some(c));
    }
    match grub_once::once_blocked(f) {
        None => Ok(Some(grub_once::once_change(f, &need, base, title(&need)))),
        Some(why) => {
            let c = direct(f, loader, tokens, base)?;
            Ok(c.map(|mut c| {
                c.notes.push(format!(
                    "Not booted once first ({why}): the default entries get the parameters, so a boot that goes wrong is undone from the GRUB menu (the recovery steps below)."
                ));
                c
            }))
        }
    }
}

/// The default entries written directly: Debian's drop-in of ours, or
/// `GRUB_CMDLINE_LINUX_DEFAULT` in /etc/default/grub; grub.cfg generated.
fn direct(
    f: &TuneFacts,
    loader: Loader,
    tokens: &[String],
    base: Change,
) -> Result<Option<Change>, Manual> {
    // (the other files' line, the file written, the tokens shown, where from)
    let (line, file, shown, from, source) = if loader == Loader::GrubDebian {
        let others = grub_texts(f, DROPIN);
        let line = cmdline_of(&others);
        let add = missing(&line, tokens);
        let after = (!add.is_empty()).then(|| format!(
            "# Written by vfio-assistant (tune): kernel parameters for VM passthrough.\n# Undo: `sudo vfio-assistant tune undo ID` (`tune list` names it), or delete this file and run update-grub.\nGRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT {}\"\n",
            add.join(" ")
        ));
        let before = f.file(DROPIN).map(str::to_string);
        if before == after {
            return Ok(None);
        }
        let shown = if add.is_empty() { tokens.to_vec() } else { add };
        let file = FileChange {
            path: DROPIN.into(),
            before,
            after,
        };
        (
            line,
            file,
            shown,
            "from /etc/default/grub and its drop-ins",
            "GRUB_CMDLINE_LINUX(_DEFAULT) in /etc/default/grub and grub.d",
        )
    } else {
        let Some(main) = f.file(paths::ETC_DEFAULT_GRUB) else {
            return Err(manual_cmdline(
                tokens,
                "GRUB booted, but /etc/default/grub is not there",
            ));
        };
        let line = cmdline_of(&[main]);
        let add = missing(&line, tokens);
        if add.is_empty() {
            return Ok(None);
        }
        let file = FileChange {
            path: paths::ETC_DEFAULT_GRUB.into(),
            before: Some(main.into()),
            after: Some(set_grub_var(main, "GRUB_CMDLINE_LINUX_DEFAULT", &add)),
        };
        (
            line,
            file,
            add,
            "from /etc/default/grub",
            paths::ETC_DEFAULT_GRUB,
        )
    };
    // What the default entries must hold afterwards: what the file adds.
    let add = missing(&line, tokens);
    let cfg = grub_cfg(f).unwrap_or(paths::BOOT_GRUB_GRUB_CFG);
    let (commands, artifacts) = staged_grub(f, cfg, from);
    Ok(Some(Change {
        title: title(&shown),
        evidence: vec![ev(source, line.trim())],
        files: vec![file],
        undo_commands: commands.clone(),
        commands,
        artifacts,
        verify: vec![Verify::BootEntriesHave {
            files: vec![cfg.into()],
            tokens: add,
        }],
        ..base
    }))
}

/// `GRUB_CMDLINE_LINUX GRUB_CMDLINE_LINUX_DEFAULT` after sourcing `texts`.
fn cmdline_of(texts: &[&str]) -> String {
    format!(
        "{} {}",
        grub_var(texts, "GRUB_CMDLINE_LINUX"),
        grub_var(texts, "GRUB_CMDLINE_LINUX_DEFAULT")
    )
}

/// grub.cfg regenerated beside itself and switched by one rename: Debian's
/// grub-mkconfig ends in `cat grub.cfg.new > grub.cfg`, which a power cut
/// can leave half-written (a GRUB rescue prompt). The staged file is
/// checked before the rename (`apply.rs`), so the boot sees the old
/// configuration or the whole new one.
pub(super) fn staged_grub(
    f: &TuneFacts,
    cfg: &str,
    from: &str,
) -> (Vec<CommandStep>, Vec<super::super::model::Artifact>) {
    let grub2_tool = !f.has_tool("grub-mkconfig") && f.has_tool("grub2-mkconfig");
    let grub = Grub::of(grub2_tool, cfg.starts_with(paths::BOOT_GRUB2_PREFIX));
    let cfg = format!("{}/grub.cfg", grub.dir());
    (
        vec![CommandStep::new(
            Cmd::GrubMkconfig { grub },
            format!(
                "generates the boot menu {from} beside {cfg}; checked there, then renamed over it in one step"
            ),
        )],
        vec![super::super::model::Artifact {
            path: cfg,
            staging: Some(grub.staging()),
        }],
    )
}
