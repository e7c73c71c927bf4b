//! QMP replies the monitor reads: `query-cpus-fast` (each vCPU's thread id and
//! QOM path), `query-stats` for target `vcpu` (KVM's own counters per vCPU:
//! exits, halt_exits, io_exits, mmio_exits…), `query-status`.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QmpCpu {
    pub index: u32,
    pub thread_id: u32,
    pub qom_path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("QMP reply: {0}")]
pub struct QmpError(pub String);

fn ret(json: &str) -> Result<Value, QmpError> {
    let v: Value = serde_json::from_str(json).map_err(|e| QmpError(e.to_string()))?;
    if let Some(err) = v.get("error") {
        let desc = err.get("desc").and_then(Value::as_str).unwrap_or("error");
        return Err(QmpError(desc.to_string()));
    }
    v.get("return")
        .cloned()
        .ok_or_else(|| QmpError("no \"return\" in the reply".into()))
}

pub fn parse_cpus_fast(json: &str) -> Result<Vec<QmpCpu>, QmpError> {
    let r = ret(json)?;
    let list = r.as_array().ok_or_else(|| QmpError("not a list".into()))?;
    let mut out = Vec::new();
    for c in list {
        let num = |k: &str| {
            c.get(k)
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
        };
        let (Some(index), Some(thread_id)) = (num("cpu-index"), num("thread-id")) else {
            continue;
        };
        out.push(QmpCpu {
            index,
            thread_id,
            qom_path: c
                .get("qom-path")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        });
    }
    out.sort_by_key(|c| c.index);
    Ok(out)
}

/// One vCPU's KVM counters: its QOM path and (name, value) pairs.
pub type VcpuStats = (String, Vec<(String, u64)>);

/// (QOM path, numeric counters) per vCPU; histograms and booleans are left out.
pub fn parse_vcpu_stats(json: &str) -> Result<Vec<VcpuStats>, QmpError> {
    let r = ret(json)?;
    let list = r.as_array().ok_or_else(|| QmpError("not a list".into()))?;
    Ok(list
        .iter()
        .map(|entry| {
            let path = entry
                .get("qom-path")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let stats = entry
                .get("stats")
                .and_then(Value::as_array)
                .map(|s| {
                    s.iter()
                        .filter_map(|st| {
                            Some((
                                st.get("name")?.as_str()?.to_string(),
                                st.get("value")?.as_u64()?,
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            (path, stats)
        })
        .collect())
}

/// `query-status`: the run state (`running`, `paused`, `prelaunch`, `inmigrate`…).
pub fn parse_status(json: &str) -> Result<String, QmpError> {
    let r = ret(json)?;
    r.get("status")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| QmpError("no status".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/qmp/");
        std::fs::read_to_string(format!("{path}{name}")).unwrap_or_default()
    }

    #[test]
    fn real_replies() {
        let cpus = parse_cpus_fast(&fixture("query-cpus-fast.json")).unwrap();
        assert_eq!(cpus.len(), 2);
        assert_eq!(cpus[0].index, 0);
        assert_eq!(cpus[0].thread_id, 18175);
        assert_eq!(cpus[1].qom_path, "/machine/unattached/device[2]");
        let stats = parse_vcpu_stats(&fixture("query-stats-vcpu.json")).unwrap();
        assert_eq!(stats.len(), 2);
        let names: Vec<&str> = stats[0].1.iter().map(|(n, _)| n.as_str()).collect();
        for want in [
            "exits",
            "halt_exits",
            "io_exits",
            "mmio_exits",
            "irq_injections",
        ] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        assert!(!names.contains(&"halt_wait_hist") && !names.contains(&"guest_mode"));
        assert!(stats.iter().any(|(p, _)| p == &cpus[0].qom_path));
        assert_eq!(
            parse_status(&fixture("query-status.json")).unwrap(),
            "running"
        );
    }

    #[test]
    fn errors_and_garbage() {
        let e = parse_status(
            r#"{"error":{"class":"CommandNotFound","desc":"The command query-stats has not been found"}}"#,
        );
        assert!(e.unwrap_err().0.contains("has not been found"));
        assert!(parse_cpus_fast("not json").is_err());
        assert!(parse_cpus_fast(r#"{"return":{}}"#).is_err());
        assert_eq!(
            parse_cpus_fast(r#"{"return":[{"cpu-index":"x"}]}"#).unwrap(),
            vec![]
        );
    }
}
