//! The boot images built since an apply, for kernels it never knew. A
//! kernel update after the apply builds the new kernel's initramfs from the
//! files the apply changed (vfio-pci and its IDs, our modprobe.d file):
//! putting back the apply's own image leaves that one as it is, and the
//! next boot into the new kernel would still hand the card to vfio-pci.
//! Undo rebuilds each such image from the restored inputs, with the same
//! generator the apply used, and checks it afterwards.

use super::command::{Cmd, ImageName, KernelAt, Release, image_path};
use super::journal::Entry;
use super::model::{Change, CommandStep};
use crate::sysroot::{HostPath, HostRoot};
use std::time::UNIX_EPOCH;

/// When `path` was last written, in seconds (None: not there).
fn written_at(root: &HostRoot, path: &HostPath) -> Option<u64> {
    let m = root.metadata(path).ok()?.modified().ok()?;
    Some(m.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// The kernel releases this host has modules for (`/lib/modules/RELEASE`),
/// and when each folder was last written (a kernel installed, or its
/// modules rebuilt).
fn releases(root: &HostRoot) -> Vec<(Release, Option<u64>)> {
    let dir = HostPath::lib("modules");
    let mut out: Vec<(Release, Option<u64>)> = root
        .list_dir(&dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| {
            let written = written_at(root, &dir.join(&n));
            Release::try_from(n).ok().map(|r| (r, written))
        })
        .collect();
    out.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    out
}

/// The change's own image generators (in the order it ran them), for
/// `release`: `(command, the image it writes when it writes one in /boot)`.
fn generators_for(own: &[&Cmd], release: &Release) -> Vec<(Cmd, Option<String>)> {
    let mut out: Vec<(Cmd, Option<String>)> = Vec::new();
    for cmd in own {
        let mapped = match cmd {
            // A kernel installed since has its default image built by
            // Debian's hook: the plain command, hook and all.
            Cmd::UpdateInitramfs { .. } | Cmd::UpdateInitramfsOnly { .. } => (
                Cmd::UpdateInitramfs {
                    release: release.clone(),
                },
                Some(image_path(ImageName::InitrdImg, release)),
            ),
            Cmd::Dracut { image, .. } => (
                Cmd::Dracut {
                    image: *image,
                    release: release.clone(),
                },
                Some(image_path(*image, release)),
            ),
            // Our own UKI's command stands for kernel-install's default
            // build of a kernel installed since.
            Cmd::KernelInstallAdd { kernel, .. } | Cmd::KernelInstallAddOurs { kernel, .. } => (
                Cmd::KernelInstallAdd {
                    release: release.clone(),
                    kernel: *kernel,
                },
                None,
            ),
            _ => continue,
        };
        if !out.iter().any(|(c, _)| c.argv() == mapped.0.argv()) {
            out.push(mapped);
        }
    }
    out
}

/// Where `release`'s kernel is, as `kernel-install add` would be given it.
fn kernel_of(release: &Release, at: KernelAt) -> HostPath {
    match at {
        KernelAt::Boot => HostPath::boot(&format!("vmlinuz-{}", release.as_str())),
        KernelAt::UsrLib => HostPath::usr(&format!("lib/modules/{}/vmlinuz", release.as_str())),
    }
}

/// The commands that rebuild, from the restored inputs, every boot image
/// written since the apply for a kernel other than those the change's own
/// commands rebuild (each generator the change ran, in its order: dracut,
/// then kernel-install to copy it to the ESP); and the images in /boot they
/// write (to check afterwards). A kernel counts as touched since when its
/// image in /boot or its modules folder was written after the apply began.
pub fn rebuilt_since(
    root: &HostRoot,
    entry: &Entry,
    c: &Change,
) -> (Vec<CommandStep>, Vec<String>) {
    let own: Vec<&Cmd> = c
        .undo_commands
        .iter()
        .chain(&c.commands)
        .map(|s| &s.cmd)
        .collect();
    let known = |r: &Release| {
        own.iter().any(|cmd| match cmd {
            Cmd::UpdateInitramfs { release }
            | Cmd::UpdateInitramfsOnly { release }
            | Cmd::Dracut { release, .. }
            | Cmd::KernelInstallAdd { release, .. } => release == r,
            _ => false,
        })
    };
    let since = |t: Option<u64>| t.is_some_and(|t| t >= entry.created);
    let why = "built since the apply (a kernel update) from the changed files: rebuilt from the restored ones";
    let (mut steps, mut images) = (Vec::new(), Vec::new());
    for (release, modules_written) in releases(root) {
        if known(&release) {
            continue;
        }
        let gens = generators_for(&own, &release);
        let image_since = gens
            .iter()
            .filter_map(|(_, i)| i.as_deref())
            .any(|i| HostPath::from_absolute(i).is_some_and(|p| since(written_at(root, &p))));
        if !(image_since || since(modules_written)) {
            continue;
        }
        for (cmd, image) in gens {
            if let Cmd::KernelInstallAdd { kernel, .. } = &cmd {
                // A kernel whose files are gone (removed since) has no entry
                // to rebuild.
                if !root.exists(&kernel_of(&release, *kernel)) {
                    continue;
                }
            }
            // An image that is not there carries nothing (and
            // `update-initramfs -u` refuses to make one).
            if let Some(i) = &image
                && !HostPath::from_absolute(i).is_some_and(|p| root.exists(&p))
            {
                continue;
            }
            steps.push(CommandStep::new(cmd, why));
            images.extend(image);
        }
    }
    (steps, images)
}
