//! libvirt's per-vCPU statistics: `vcpu.N.<counter>.sum` fields (KVM's own
//! counters, passed on from QEMU's `query-stats`), either as the numbers the
//! API returns or as the `field=value` lines `virsh domstats --vcpu` prints.

/// `field=value` lines (`virsh domstats`); `yes`/`no` as 1/0, other text skipped.
pub fn parse_domstats_text(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once('=')?;
            let v = match v.trim() {
                "yes" => 1,
                "no" => 0,
                n => n.parse().ok()?,
            };
            Some((k.trim().to_string(), v))
        })
        .collect()
}

/// KVM's cumulative counters per vCPU: (vCPU, counter, value) from every
/// `vcpu.N.<counter>.sum` field. Gauges (`.cur`) and libvirt's own
/// `time`/`wait`/`delay` are not KVM counters and are left out.
pub fn kvm_counters_of(params: &[(String, u64)]) -> Vec<(u32, String, u64)> {
    params
        .iter()
        .filter_map(|(field, v)| {
            let rest = field.strip_prefix("vcpu.")?;
            let (n, rest) = rest.split_once('.')?;
            let name = rest.strip_suffix(".sum")?;
            Some((n.parse().ok()?, name.to_string(), *v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_virsh_output() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/domstats/vcpu-nested-kvm.txt"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let params = parse_domstats_text(&text);
        assert!(params.contains(&("vcpu.0.time".to_string(), 2_030_000_000)));
        assert!(params.contains(&("vcpu.0.blocking.cur".to_string(), 0)));
        let kvm = kvm_counters_of(&params);
        assert!(kvm.contains(&(0, "exits".to_string(), 11418)));
        assert!(kvm.contains(&(0, "halt_exits".to_string(), 1287)));
        assert!(kvm.iter().any(|(v, n, _)| *v == 1 && n == "io_exits"));
        assert!(kvm.iter().all(|(_, n, _)| n != "time" && n != "blocking"));
        // A libvirt without KVM counters: nothing, not an error.
        let old = parse_domstats_text("vcpu.0.state=1\nvcpu.0.time=5\nvcpu.0.wait=0\n");
        assert!(kvm_counters_of(&old).is_empty());
        assert!(parse_domstats_text("garbage\n=\nvcpu.0.x.sum=-1\n").is_empty());
    }
}
