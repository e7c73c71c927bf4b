//! The kernel command line as findings cite it: the snapshot's one reading,
//! in the same words in every finding. When it could not be read, findings
//! that depend on it say they cannot tell (not "not set").

use crate::host::HostSnapshot;
use crate::sysroot::HostPath;

/// Where the line comes from, as evidence names it.
pub fn path() -> String {
    HostPath::proc("cmdline").to_string()
}

/// The line as read, or why it was not (the snapshot's warning).
pub fn seen(s: &HostSnapshot) -> String {
    match &s.kernel.cmdline {
        Some(c) => c.raw.clone(),
        None => not_read(s),
    }
}

/// Why the line is missing: "not read (…)" with the scan's own reason.
pub fn not_read(s: &HostSnapshot) -> String {
    let path = path();
    match s.warnings.iter().find(|w| w.path == path) {
        Some(w) => format!("not read ({})", w.message),
        None => "not read".to_string(),
    }
}

/// The command that captures a host again.
pub const SNAPSHOT: &str = "vfio-assistant snapshot host.tar.gz";

/// The fix for a finding that could not tell: the line is always readable
/// on a running host, so it is a capture that lacks it.
pub fn read_it() -> String {
    format!(
        "Capture the host again (its snapshot includes {}), or run on the host itself.",
        path()
    )
}
