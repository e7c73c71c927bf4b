//! A thread's `/proc/<pid>/task/<tid>/{stat,schedstat,status}`: where it last
//! ran, how long it ran and waited for a CPU, and how often it was switched out.
//!
//! Not procfs-core's `Stat`/`Status`: its `Stat` slices at `(`−1 and `)`+2
//! and panics on a malformed line (a captured tree is untrusted input), and
//! `Status` needs fifteen fields the monitor never reads. `/proc/mounts`
//! stays hand-read too (`host::usage`): procfs-core does not decode `\040`,
//! so a mount point with a space would be misnamed.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskStat {
    pub comm: String,
    pub state: char,
    /// The CPU it last ran on (field 39).
    pub processor: u32,
    pub utime: u64,
    pub stime: u64,
}

/// `stat`: the name is in parentheses and may hold spaces and `)` (QEMU's vCPU
/// threads are `CPU 0/KVM`), so the fields are counted after the last `)`.
pub fn parse_task_stat(text: &str) -> Option<TaskStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some(TaskStat {
        comm,
        state: rest.first()?.chars().next()?,
        processor: u32::try_from(field(39)?).ok()?,
        utime: field(14)?,
        stime: field(15)?,
    })
}

/// `schedstat`: nanoseconds on a CPU, nanoseconds waiting on a run queue, timeslices.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64, u64)> {
    let mut it = text.split_whitespace().map(|t| t.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next()??))
}

/// `status`: (voluntary, involuntary) context switches.
pub fn parse_ctxt_switches(text: &str) -> Option<(u64, u64)> {
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((
        get("voluntary_ctxt_switches:")?,
        get("nonvoluntary_ctxt_switches:")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/qmp/");
        std::fs::read_to_string(format!("{path}{name}")).unwrap_or_default()
    }

    #[test]
    fn a_real_vcpu_thread() {
        let s = parse_task_stat(&fixture("task-vcpu0-stat.txt")).unwrap();
        assert_eq!(s.comm, "CPU 0/KVM");
        assert_eq!(s.state, 'S');
        assert_eq!(s.processor, 0);
        assert_eq!(s.stime, 150);
        let (run, wait, slices) = parse_schedstat(&fixture("task-vcpu0-schedstat.txt")).unwrap();
        assert!(run > 0 && wait > 0 && slices > 0);
        assert_eq!(
            parse_ctxt_switches(&fixture("task-vcpu0-status.txt")),
            Some((264, 111))
        );
    }

    #[test]
    fn odd_names_and_garbage() {
        let odd = "42 (a) b) (c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 7 38";
        let s = parse_task_stat(odd).unwrap();
        assert_eq!(s.comm, "a) b) (c");
        assert_eq!(s.processor, 36);
        for bad in ["", "42 (x", "42 (x) R 1 2", "\u{0})(", "1 (x) R -1"] {
            assert!(parse_task_stat(bad).is_none(), "{bad:?}");
        }
        assert!(parse_schedstat("1 2").is_none());
        assert!(parse_ctxt_switches("voluntary_ctxt_switches: x").is_none());
    }
}
