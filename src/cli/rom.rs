//! `vfio-assistant rom [ADDRESS] [--file FILE] [--save OUT [--force]] [--json]`: what is
//! in a graphics card's ROM — read from the card (root; see romread.rs) or
//! from a file (a dump, a download) — whether it carries the UEFI GOP driver
//! OVMF needs, whether a flash-tool header sits in front of it, whether it is
//! for this card. `--save` writes the ROM proper (header cut off) for
//! `<rom file='…'/>`. Exit 0 when usable, 1 when not, 2 when nothing could be read.

use super::out::{errln, outln};
use crate::checks::model::Status;
use crate::checks::rom::{Card, rom_finding};
use crate::host::pci::full_address;
use crate::host::scan;
use crate::parse::option_rom::parse_option_rom;
use crate::report::rom::card_rom;
use crate::romread::RomError;
use crate::sysroot::HostRoot;
use anyhow::Context;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct RomArgs {
    /// The card's PCI address (e.g. 01:00.0). With --file: the card the file is meant for.
    pub address: Option<String>,
    /// Check this ROM file instead of reading the card.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Write the ROM proper here (without any header in front), for <rom file='…'/>.
    #[arg(long, value_name = "OUT")]
    pub save: Option<PathBuf>,
    /// Replace the --save file if it exists (it is never written through a link).
    #[arg(long, requires = "save")]
    pub force: bool,
    /// Print the finding as JSON.
    #[arg(long)]
    pub json: bool,
}

impl RomArgs {
    /// Whether the card itself is read (root's to do), not a file.
    pub fn reads_card(&self) -> bool {
        self.file.is_none()
    }
}

pub fn run(root: &HostRoot, args: &RomArgs) -> anyhow::Result<i32> {
    if args.address.is_none() && args.file.is_none() {
        anyhow::bail!("name a card (e.g. `rom 01:00.0`) or a file (`rom --file vbios.rom`)");
    }
    // The card, when named: its full address and ids from the scan.
    let card = match &args.address {
        Some(a) => {
            let snap = scan(root)?;
            let entry = snap
                .device(&full_address(a))
                .with_context(|| format!("no PCI device {a} on this host"))?;
            Some((entry.device.address.clone(), Card::of(&entry.device)))
        }
        None => None,
    };
    let (f, bytes) = match (&args.file, &card) {
        (Some(file), _) => {
            let bytes = RomError::read_file(file);
            let f = rom_finding(
                card.as_ref().map(|(a, _)| a.as_str()),
                card.as_ref().map(|(_, c)| *c),
                &file.display().to_string(),
                &bytes,
            );
            (f, bytes)
        }
        (None, Some((addr, c))) => {
            let r = card_rom(root, addr, Some(*c));
            (r.finding, r.bytes)
        }
        (None, None) => anyhow::bail!("name a card or a file"),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&f)?)?;
    } else {
        outln!("[{}] {}", f.status.word(), f.title)?;
        for e in &f.evidence {
            outln!("  seen: {} = {}", e.source, e.value)?;
        }
        outln!("  why:  {}", f.why)?;
        if let Some(fix) = f.fix_text() {
            outln!("  fix:  {fix}")?;
        }
    }
    if let Some(out) = &args.save {
        save(out, &bytes, args.force)?;
    }
    Ok(match f.status {
        Status::Unknown => 2,
        Status::Fail | Status::Warn => 1,
        Status::Pass | Status::Info => 0,
    })
}

/// Write the ROM proper (no header in front, nothing after its last image).
fn save(out: &Path, bytes: &Result<Vec<u8>, RomError>, replace: bool) -> anyhow::Result<()> {
    let rom = match bytes {
        Ok(b) => parse_option_rom(b)
            .map(|r| (b, r))
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let (b, rom) = match rom {
        Ok(x) => x,
        Err(e) => {
            errln!("not saved to {}: {e}", out.display());
            return Ok(());
        }
    };
    let end = match rom.images.last() {
        Some(i) if i.length > 0 => (i.offset + i.length).min(b.len()),
        _ => b.len(),
    };
    let start = rom.leading_bytes.min(end);
    crate::userfile::write_new_atomic(out, &b[start..end], replace)
        .context("the ROM was not saved")?;
    errln!(
        "saved {} bytes to {}{}",
        end - start,
        out.display(),
        if start > 0 {
            format!(" ({start} header bytes cut off)")
        } else {
            String::new()
        }
    );
    Ok(())
}
