//! Scanning off the UI thread: one short-lived thread per scan, its result sent
//! over a channel that the app drains in `logic`.

use crate::checks::model::Finding;
use crate::host::{HostSnapshot, scan};
use crate::report::findings::{FindingsRequest, host_findings};
use crate::report::libvirt::LibvirtAt;
use crate::sysroot::HostRoot;
use std::sync::mpsc::{Receiver, channel};

/// A scanned host and its prerequisite findings.
pub type ScanResult = Result<(HostSnapshot, Vec<Finding>), String>;

/// Start a scan; the receiver yields one result. `wake` is called when it is
/// ready. `libvirt`: the connection whose access is checked too (the live
/// host's system libvirt, the demo's test driver; none for a capture), as
/// the CLI's `check` does.
pub fn spawn_scan(
    root: HostRoot,
    libvirt: Option<String>,
    wake: impl FnOnce() + Send + 'static,
) -> Receiver<ScanResult> {
    spawn_one("scan", wake, move || {
        scan(&root)
            .map(|snap| {
                // The same findings as `check` (one composition, in
                // report::findings), without a password dialog.
                let req = FindingsRequest {
                    libvirt: libvirt.as_deref().map(|uri| LibvirtAt {
                        uri,
                        connect: crate::libvirt::connect,
                    }),
                    quiet: true,
                    ..FindingsRequest::default()
                };
                let findings = host_findings(&root, &snap, &req);
                (snap, findings)
            })
            .map_err(|e| format!("{e:#}"))
    })
}

/// Run `work` on a thread of its own; its one result comes on the
/// receiver (the app may have closed meanwhile: then it is dropped), then
/// `wake`. A thread that cannot start is said as the result.
fn spawn_one<T: Send + 'static>(
    name: &str,
    wake: impl FnOnce() + Send + 'static,
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Receiver<Result<T, String>> {
    let (tx, rx) = channel();
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(work());
            wake();
        });
    if let Err(e) = spawned {
        let (tx2, rx2) = channel();
        let _ = tx2.send(Err(format!("could not start the {name} thread: {e}")));
        return rx2;
    }
    rx
}

/// Another machine's snapshot, fetched over SSH and opened (kept unpacked
/// while the app shows it).
/// With the machine's id (see `remote::Fetched`).
pub type FetchResult = Result<crate::remote::OpenedHost, String>;

/// Fetch `target`'s snapshot off the UI thread; `wake` when it is there.
pub fn spawn_fetch(
    target: crate::remote::SshTarget,
    wake: impl FnOnce() + Send + 'static,
) -> Receiver<FetchResult> {
    spawn_one("fetch", wake, move || {
        // As the CLI opens it: fetched into a folder of the user's alone.
        crate::remote::HostSource::Remote(target)
            .open()
            .map_err(|e| format!("{e:#}"))
    })
}
