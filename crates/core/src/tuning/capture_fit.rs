//! What a captured host can take: a snapshot keeps only the files a scan
//! read, so a value the change would set that was never read there (a
//! device's driver_override, a write-only trigger next to it) is not in the
//! capture, and applying to the captured tree would stop half-way. The
//! Tuning page offers such a change unticked, saying so; a live host has
//! them all and is never asked.

use super::facts::TuneFacts;
use super::model::Change;

/// The values `c` sets that this capture does not hold (their paths).
/// Actions (a trigger written, never read back) follow the values they go
/// with, and may-fail writes are left out: neither stops an apply alone.
pub fn not_in_capture(facts: &TuneFacts, c: &Change) -> Vec<String> {
    c.values
        .iter()
        .filter(|v| !v.action && !v.may_fail)
        .filter(|v| facts.value(&v.path).is_none())
        .map(|v| v.path.clone())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;
    use crate::tuning::model::{Kind, Request};

    #[test]
    fn a_device_without_its_driver_override_is_not_in_the_capture() {
        let (root, _guard) = crate::demo::unpack_demo().unwrap();
        let snap = crate::host::scan(&root).unwrap();
        let facts = crate::tuning::facts::gather(&root);
        let req = Request {
            gpus: vec!["0000:0b:00.0".parse().unwrap()],
            ..Request::default()
        };
        let p = crate::tuning::plan::plan(&snap, &facts, &req).unwrap();
        let c = p
            .changes
            .iter()
            .find(|c| c.id.kind == Kind::VfioBind)
            .unwrap();
        let missing = not_in_capture(&facts, c);
        assert!(
            missing
                .iter()
                .any(|m| m.ends_with("0000:0b:00.0/driver_override")),
            "{missing:?}"
        );
        let missing: Vec<String> = missing
            .into_iter()
            .filter(|m| m.contains("0b:00.0/"))
            .collect();
        assert_eq!(
            missing,
            vec!["/sys/bus/pci/devices/0000:0b:00.0/driver_override".to_string()]
        );
    }
}
