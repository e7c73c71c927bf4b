//! The one walk of a path inside a root, a component at a time, each link
//! resolved as if the root were `/` (an absolute target starts at the root,
//! `..` stops there), with the kernel's limit on links followed. Two callers
//! look at what each step meets: the confined open where `openat2` is
//! missing (confined.rs), and the snapshot, which records every link and
//! folder on the way (capture.rs).

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Links followed in one resolution before it counts as a loop (the kernel's
/// own limit).
pub(crate) const MAX_LINK_HOPS: usize = 40;

/// What the walk met at one physical path (the caller looked).
pub(crate) enum Met {
    /// A link to this target: followed.
    Link(PathBuf),
    /// Anything else: the walk goes on below it.
    NotLink,
    /// The walk ends here, at this path (a missing last component, a last
    /// link not to be followed).
    Stop,
}

/// Resolve `rel` (relative to the root) one component at a time; `look`
/// says what is at each physical path reached (`true`: the last
/// component). The physical path the walk ends at.
pub(crate) fn walk_links(
    rel: &Path,
    mut look: impl FnMut(&Path, bool) -> io::Result<Met>,
) -> io::Result<PathBuf> {
    // Components still to resolve, the next one last.
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, rel);
    let mut cur = PathBuf::new();
    let mut hops = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            // `..` at the root stays at the root.
            cur.pop();
            continue;
        }
        let next = cur.join(&part);
        match look(&next, todo.is_empty())? {
            Met::Stop => return Ok(next),
            Met::NotLink => cur = next,
            Met::Link(target) => {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(rustix::io::Errno::LOOP.into());
                }
                if target.is_absolute() {
                    cur = PathBuf::new();
                }
                push_components(&mut todo, &target);
            }
        }
    }
    Ok(cur)
}

/// Push `path`'s components onto `todo` so that the first is popped first.
fn push_components(todo: &mut Vec<OsString>, path: &Path) {
    for c in path.components().rev() {
        match c {
            Component::Normal(p) => todo.push(p.to_owned()),
            Component::ParentDir => todo.push("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
}
