//! Which links an unpacked snapshot may hold. Every link target is walked
//! lexically, component by component, from the link's folder; the walk is
//! what the kernel does as long as no folder on the way is itself a link. So
//! a link is refused when a folder its target passes through is a link
//! unpacked before it, or when it would be made where an earlier link's
//! target passes through (the same trick, the other order). Where a target
//! *ends* at a link, that is fine: each link on a chain is held to the same
//! rule from its own place. Real captured trees meet neither case: sysfs's
//! links (`bus/pci/devices/X -> ../../../devices/pci0000:00/X`, a driver's
//! `../../bus/pci/drivers/x`) climb through real folders and end at a link
//! at most, and a snapshot stores every entry at its physical path.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Why a link is refused (the archive's entry name goes in front).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum LinkRefused {
    #[error("a link to {}, which leaves the folder", .target.display())]
    LeavesFolder { target: PathBuf },
    #[error(
        "a link to {}, which goes through {}, itself a link (it could lead out of the folder)",
        .target.display(),
        .through.display()
    )]
    ThroughLink { target: PathBuf, through: PathBuf },
    #[error(
        "a link where an earlier link's target passes through (it could lead that one out of the folder; its target here: {})",
        .target.display()
    )]
    OnEarlierTarget { target: PathBuf },
}

/// The links unpacked so far and the folders their targets pass through
/// (relative to the unpacked folder).
#[derive(Debug, Default)]
pub(super) struct Links {
    links: HashSet<PathBuf>,
    passed: HashSet<PathBuf>,
}

impl Links {
    /// May a link be made at `rel` pointing at `target` (a target already
    /// kept inside, see `inside_target`)? If so it is counted; if not, why.
    pub(super) fn admit(&mut self, rel: &Path, target: &Path) -> Result<(), LinkRefused> {
        let mut at: Vec<OsString> = if target.is_absolute() {
            Vec::new()
        } else {
            rel.parent()
                .into_iter()
                .flat_map(|p| p.components())
                .map(|c| c.as_os_str().to_owned())
                .collect()
        };
        let steps: Vec<Component> = target
            .components()
            .filter(|c| matches!(c, Component::Normal(_) | Component::ParentDir))
            .collect();
        let mut passed = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            match step {
                Component::ParentDir => {
                    at.pop().ok_or_else(|| LinkRefused::LeavesFolder {
                        target: target.to_path_buf(),
                    })?;
                }
                Component::Normal(name) => {
                    at.push(name.to_os_string());
                    if i + 1 == steps.len() {
                        break; // where it ends may be a link
                    }
                    let through: PathBuf = at.iter().collect();
                    if self.links.contains(&through) || through == rel {
                        return Err(LinkRefused::ThroughLink {
                            target: target.to_path_buf(),
                            through,
                        });
                    }
                    passed.push(through);
                }
                _ => {}
            }
        }
        if self.passed.contains(rel) {
            return Err(LinkRefused::OnEarlierTarget {
                target: target.to_path_buf(),
            });
        }
        self.links.insert(rel.to_path_buf());
        self.passed.extend(passed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(links: &mut Links, rel: &str, target: &str) -> Result<(), LinkRefused> {
        links.admit(Path::new(rel), Path::new(target))
    }

    #[test]
    fn sysfs_links_are_admitted() {
        let mut l = Links::default();
        for (rel, target) in [
            (
                "sys/bus/pci/devices/0000:01:00.0",
                "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
            ),
            (
                "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver",
                "../../../../bus/pci/drivers/vfio-pci",
            ),
            (
                "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/iommu_group",
                "../../../../kernel/iommu_groups/1",
            ),
            (
                "sys/kernel/iommu_groups/1/devices/0000:01:00.0",
                "../../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
            ),
            // Ending at a link (bus/pci/devices/X above) is fine.
            ("sys/class/x", "../bus/pci/devices/0000:01:00.0"),
            ("top", "."),
        ] {
            admit(&mut l, rel, target).unwrap();
        }
    }

    #[test]
    fn a_target_through_a_link_is_refused_in_either_order() {
        let mut l = Links::default();
        admit(&mut l, "u", ".").unwrap();
        let e = admit(&mut l, "var", "u/u/../../../elsewhere")
            .unwrap_err()
            .to_string();
        assert!(e.contains("goes through u, itself a link"), "{e}");
        let e = admit(&mut l, "a/b", "../u/..").unwrap_err().to_string();
        assert!(e.contains("goes through u"), "{e}");
        // The other order: the target first, the link on its way after.
        let mut l = Links::default();
        admit(&mut l, "var", "w/x/../..").unwrap();
        let e = admit(&mut l, "w", ".").unwrap_err().to_string();
        assert!(e.contains("earlier link's target passes through"), "{e}");
        let e = admit(&mut l, "w/x", "..").unwrap_err().to_string();
        assert!(e.contains("earlier link's target passes through"), "{e}");
        // Through itself.
        let e = admit(&mut Links::default(), "s", "s/../..")
            .unwrap_err()
            .to_string();
        assert!(e.contains("itself a link"), "{e}");
        // Climbing past the top (a target not kept inside first).
        let e = admit(&mut Links::default(), "a/b", "../../..")
            .unwrap_err()
            .to_string();
        assert!(e.contains("leaves the folder"), "{e}");
    }
}
