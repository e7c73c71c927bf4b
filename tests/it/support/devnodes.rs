//! Device nodes and fake processes in a test tree, for the hooks' and the
//! planner's holder look (by the device number, never the path): a node
//! made with `mknod` has the device number of a real card (only root can
//! make one, as on a real host), a process of the tree is `proc/PID` with
//! its `comm`, `cgroup`, and its `fd/N` and `map_files/RANGE` links.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Whether nodes can be made here (root); when not, the test is skipped —
/// CI runs as root and must not skip.
pub fn can_mknod() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs as root: device nodes can be made"
    );
    eprintln!("skipped: making a device node needs root");
    false
}

/// A character device node `rel` under `root` with the device number
/// `major:minor`; its absolute path.
pub fn char_node(root: &Path, rel: &str, major: u32, minor: u32) -> PathBuf {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mknod reads nothing else.
    let rc = unsafe {
        libc::mknod(
            c.as_ptr(),
            libc::S_IFCHR | 0o600,
            libc::makedev(major, minor),
        )
    };
    assert_eq!(
        rc,
        0,
        "mknod {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    p
}

/// A process `pid` of the tree named `comm`, in the cgroup `cgroup`
/// (`/system.slice/x.service`), with nothing open yet.
pub fn process(root: &Path, pid: u32, comm: &str, cgroup: &str) -> PathBuf {
    let p = root.join(format!("proc/{pid}"));
    std::fs::create_dir_all(p.join("fd")).unwrap();
    std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
    std::fs::write(p.join("cgroup"), format!("0::{cgroup}\n")).unwrap();
    p
}

/// The process `proc_dir` has `target` open as `fd` (the link the kernel
/// shows: to the file itself, whatever its name).
pub fn open_fd(proc_dir: &Path, fd: u32, target: impl AsRef<Path>) {
    std::fs::create_dir_all(proc_dir.join("fd")).unwrap();
    symlink(target, proc_dir.join(format!("fd/{fd}"))).unwrap();
}

/// The process `proc_dir` has `target` mapped at `range` (`7f00-7f10`), its
/// fd closed since: a `maps` line and a `map_files` link.
pub fn mapped(proc_dir: &Path, range: &str, target: &Path, inode: u64) {
    std::fs::create_dir_all(proc_dir.join("map_files")).unwrap();
    symlink(target, proc_dir.join(format!("map_files/{range}"))).unwrap();
    let line = format!(
        "{range} rw-s 00000000 00:05 {inode}                    {}\n",
        target.display()
    );
    let maps = proc_dir.join("maps");
    let mut text = std::fs::read_to_string(&maps).unwrap_or_default();
    text.push_str(&line);
    std::fs::write(maps, text).unwrap();
}

/// Whether the second real user `vfio-remote` (scripts/setup.sh test makes
/// it) can be tried: root, and the user there. CI must not skip.
pub fn other_user() -> bool {
    let there = std::process::Command::new("id")
        .arg("vfio-remote")
        .output()
        .is_ok_and(|o| o.status.success());
    if rustix::process::geteuid().is_root() && there {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs as root with the user vfio-remote (scripts/setup.sh test)"
    );
    eprintln!("skipped: needs root and the user vfio-remote");
    false
}

/// A folder anyone may write (a marker a process of another user leaves).
pub fn open_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    d
}
