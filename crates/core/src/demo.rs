//! The bundled sample host: a real machine's snapshot (see assets/demo-host.SOURCE.md),
//! unpacked to a temporary directory and scanned like any `--root`. Both faces
//! use it (`--demo`), so it lives in the library, not in `ui/`.

use crate::capture::extract;
use crate::sysroot::HostRoot;
use anyhow::Context;

const DEMO_ARCHIVE: &[u8] = include_bytes!("../../../assets/demo-host.tar.gz");

/// Unpack the demo host; the directory lives as long as the returned guard.
pub fn unpack_demo() -> anyhow::Result<(HostRoot, tempfile::TempDir)> {
    let dir = crate::userfile::private_tempdir("vfio-assistant-demo-", None)
        .context("creating a temporary directory for the demo host")?;
    extract(DEMO_ARCHIVE, dir.path()).context("unpacking the bundled demo host")?;
    Ok((HostRoot::at(dir.path()), dir))
}
