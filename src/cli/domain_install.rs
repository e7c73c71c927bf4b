//! `domain new --unattended …` (the answer media built and put in the new
//! domain, install/for_domain.rs) and `domain install-done NAME` (the
//! install's CDs taken out, the answer media deleted).
//!
//! The password is read from a file or standard input, never from the
//! command line (any local user sees a process's arguments in `ps`).

use super::domain_life::LifeArgs;
use super::out::outln;
use crate::install::for_domain::InstallChoices;
use crate::install::progress::finish;
use crate::install::unattend::Secret;
use clap::Args;
use std::io::Read as _;
use std::path::PathBuf;

#[derive(Debug, Args, Default, Clone)]
pub struct InstallArgs {
    /// Install Windows without questions: build answer media (the answer
    /// file, the drivers from --virtio-iso, the first logon's script)
    /// beside --iso and add it as a third CD. Needs --iso, --virtio-iso,
    /// --user and --password-file.
    #[arg(long, requires_all = ["iso", "virtio_iso", "user", "password_file"])]
    pub unattended: bool,
    /// The Windows account to create (an administrator), with --unattended.
    #[arg(long, value_name = "NAME", requires = "unattended")]
    pub user: Option<String>,
    /// A file whose first line is the account's password, or - for standard
    /// input. Written only onto the answer media, which `domain
    /// install-done` deletes.
    #[arg(long, value_name = "FILE", requires = "unattended")]
    pub password_file: Option<String>,
    /// The edition to install, as the ISO names it (default: Pro, else the
    /// ISO's first).
    #[arg(long, value_name = "NAME", requires = "unattended")]
    pub edition: Option<String>,
    /// The Looking Glass host installer (looking-glass-host-setup.exe, the
    /// same version as your client), installed at the first logon.
    #[arg(long, value_name = "FILE", requires = "unattended")]
    pub lg_installer: Option<PathBuf>,
    /// Where to write the answer media (default: NAME-answer.iso beside --iso).
    #[arg(long, value_name = "PATH", requires = "unattended")]
    pub answer_media: Option<PathBuf>,
}

/// At most this much is read for a password.
const MAX_PASSWORD: u64 = 4096;

/// The first line of `file` (or standard input for "-").
pub fn read_password(file: &str) -> anyhow::Result<Secret> {
    let mut text = String::new();
    if file == "-" {
        std::io::stdin()
            .take(MAX_PASSWORD)
            .read_to_string(&mut text)
            .map_err(|e| anyhow::anyhow!("reading the password from standard input: {e}"))?;
    } else {
        text = crate::userfile::read_text(std::path::Path::new(file), MAX_PASSWORD)?;
    }
    let line = text.lines().next().unwrap_or("").to_string();
    Ok(Secret(line))
}

impl InstallArgs {
    /// The choices, when --unattended; the ISOs come from `domain new`'s own flags.
    pub fn choices(
        &self,
        iso: Option<&str>,
        virtio: Option<&str>,
    ) -> anyhow::Result<Option<InstallChoices>> {
        if !self.unattended {
            return Ok(None);
        }
        let (Some(iso), Some(virtio), Some(user), Some(pw)) = (
            iso,
            virtio,
            self.user.as_deref(),
            self.password_file.as_deref(),
        ) else {
            anyhow::bail!("--unattended needs --iso, --virtio-iso, --user and --password-file");
        };
        Ok(Some(InstallChoices {
            windows_iso: iso.into(),
            virtio_iso: virtio.into(),
            user: user.to_string(),
            password: read_password(pw)?,
            edition: self.edition.clone(),
            looking_glass_installer: self.lg_installer.clone(),
            out: self.answer_media.clone(),
        }))
    }
}

/// `domain install-done NAME`.
pub fn run_install_done(args: &LifeArgs, demo: bool) -> anyhow::Result<i32> {
    let hv = args.connect.open(demo)?;
    let delete = |p: &str| std::fs::remove_file(p);
    let done = finish(&hv, &args.name, &delete)?;
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "name": args.name,
                "install": done.is_some(),
                "cds_removed": done.as_ref().map(|f| f.cds_removed),
                "answer_deleted": done.as_ref().and_then(|f| f.answer_deleted.clone()),
            })
        )?;
        return Ok(if done.is_some() { 0 } else { 1 });
    }
    match done {
        None => {
            outln!(
                "'{}' has no unattended install to finish (no answer media in its definition).",
                args.name
            )?;
            Ok(1)
        }
        Some(f) => {
            outln!(
                "Took {} install CD(s) out of '{}' (a running VM keeps them until it stops).",
                f.cds_removed,
                args.name
            )?;
            match f.answer_deleted {
                Some(p) => {
                    outln!("Deleted the answer media {p} (it held the account's password).")?
                }
                None => outln!(
                    "Could not delete the answer media: delete it yourself, it holds the account's password."
                )?,
            }
            Ok(0)
        }
    }
}

#[derive(Debug, Args)]
pub struct VirtioArgs {
    /// Fetch Fedora's newest stable virtio-win disc (about 700 MB), checked
    /// against the SHA-256 published beside it before it is kept.
    #[arg(long, requires = "to")]
    pub download: bool,
    /// Where to save it (with --download).
    #[arg(long, value_name = "PATH")]
    pub to: Option<PathBuf>,
}

/// `domain virtio-win [--download --to PATH]`: where the disc is, or fetch it.
pub fn run_virtio(root: &crate::sysroot::HostRoot, args: &VirtioArgs) -> anyhow::Result<i32> {
    use crate::install::download::{Source, download};
    if !args.download {
        return match crate::install::virtio_win::find(root) {
            Some(p) => {
                outln!("{}", p.display())?;
                Ok(0)
            }
            None => {
                outln!(
                    "No virtio-win disc where distributions put it (Fedora's virtio-win package: /usr/share/virtio-win/virtio-win.iso). Fetch Fedora's with `vfio-assistant domain virtio-win --download --to PATH`, or name one you have with --virtio-iso."
                )?;
                Ok(1)
            }
        };
    }
    let Some(to) = &args.to else {
        anyhow::bail!("--download needs --to PATH");
    };
    let src = Source::stable();
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let mut last = 0u64;
    let mut show = |b: u64, t: Option<u64>| {
        let mib = b >> 20;
        if mib >= last + 50 || t == Some(b) {
            last = mib;
            match t {
                Some(t) => super::out::errln!("{mib} of {} MiB", t >> 20),
                None => super::out::errln!("{mib} MiB"),
            }
        }
    };
    let p = download(&src, to, &mut show, &cancel)?;
    outln!(
        "{} (SHA-256 checked against {})",
        p.display(),
        src.checksum_url
    )?;
    Ok(0)
}
