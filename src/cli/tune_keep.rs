//! `vfio-assistant tune keep`: the kernel command line systemd-boot booted
//! once (our copy of the default entry, or our unified kernel image) made
//! the default, after a boot that came up from it. The library says which
//! transaction waits for it and the request that keeps it
//! (`EntryStatus::keep`); this applies that request like `tune apply`: a
//! plan shown, a question, one more journaled transaction (undone on its
//! own, before the one it keeps).

use super::tune::{How, apply_request, env, fail};
use crate::sysroot::HostRoot;
use crate::tuning::status::status;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct KeepArgs {
    /// Show what would happen; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask.
    #[arg(long)]
    pub yes: bool,
    #[arg(long)]
    pub json: bool,
    /// Tests only (the `test-hooks` build): another journal folder.
    #[cfg_attr(feature = "test-hooks", arg(long, value_name = "DIR"))]
    #[cfg_attr(not(feature = "test-hooks"), arg(skip))]
    pub journal: Option<PathBuf>,
}

pub fn run(root: &HostRoot, k: &KeepArgs) -> anyhow::Result<i32> {
    let e = env(root, &k.journal, false);
    let Some((id, req)) = status(&e)
        .into_iter()
        .rev()
        .find_map(|s| s.keep.map(|r| (s.id, r)))
    else {
        return fail(
            k.json,
            2,
            "nothing to keep: no transaction's entry tried once came up on this boot (`tune status` says where each stands)",
        );
    };
    if !k.json {
        super::out::outln!("Keeping what {id} booted once:")?;
    }
    let how = How {
        json: k.json,
        dry_run: k.dry_run,
        yes: k.yes,
        journal: k.journal.clone(),
    };
    apply_request(root, req, &how)
}
