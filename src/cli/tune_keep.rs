//! `vfio-assistant tune keep`: the kernel command line the boot loader
//! booted once (GRUB's entry of ours, systemd-boot's copy of the default
//! entry, or our unified kernel image) made the default, after a boot that came up from it. The library says which
//! transaction waits for it and the request that keeps it
//! (`EntryStatus::keep`); this applies that request like `tune apply`: a
//! plan shown, a question, one more journaled transaction (undone on its
//! own, before the one it keeps).

use super::tune::{How, JournalArgs, apply_request, env, fail};
use crate::sysroot::HostRoot;
use crate::tuning::status::status;
use clap::Args;

#[derive(Debug, Args)]
pub struct KeepArgs {
    /// Show what would happen; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask.
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub out: JournalArgs,
}

pub fn run(root: &HostRoot, k: &KeepArgs) -> anyhow::Result<i32> {
    let (json, journal) = (k.out.json, &k.out.journal);
    let e = env(root, journal, false);
    let Some((id, req)) = status(&e)
        .into_iter()
        .rev()
        .find_map(|s| s.keep.map(|r| (s.id, r)))
    else {
        return fail(
            json,
            2,
            "nothing to keep: no transaction's entry tried once came up on this boot (`tune status` says where each stands)",
        );
    };
    if !json {
        super::out::outln!("Keeping what {id} booted once:")?;
    }
    let how = How {
        json,
        dry_run: k.dry_run,
        yes: k.yes,
        journal: journal.clone(),
    };
    apply_request(root, req, &how)
}
