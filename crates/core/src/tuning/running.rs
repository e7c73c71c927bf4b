//! Whether the process that wrote a journal entry still runs. An entry left
//! "applying" or "undoing" is either interrupted (a power cut, a killed
//! helper) or still at work: the app that started it was closed, and the
//! helper, which ignores the hangup (`txn::keep_on_hangup`), goes on to its
//! end. Only the first may be restored; the second is waited for.
//!
//! The entry's id holds its writer's pid (`journal::new_id`). The writer
//! still runs when the host has not booted since the entry was made and a
//! process with that pid started before it was made: a pid is given again
//! only after its process ended, so such a process is the writer itself.

use super::journal::{Entry, EntryState};
use crate::sysroot::{HostPath, HostRoot};

/// The pid of the process still applying or undoing `e`, or none (it ended:
/// interrupted, or not in progress at all).
pub fn writer_still_runs(root: &HostRoot, e: &Entry) -> Option<u32> {
    if !matches!(e.state, EntryState::Applying | EntryState::Undoing) {
        return None;
    }
    let boot_now = root
        .read_attr(&HostPath::proc("sys/kernel/random/boot_id"))
        .ok();
    if e.boot_id.is_some() && boot_now.is_some() && e.boot_id != boot_now {
        return None;
    }
    let pid: u32 = e.id.split('-').nth(1)?.parse().ok()?;
    let stat = root
        .read_attr(&HostPath::proc(&format!("{pid}/stat")))
        .ok()?;
    let booted_at: u64 = root
        .read_attr(&HostPath::proc("stat"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let started_at = booted_at + start_ticks(&stat)? / ticks_per_second();
    (started_at <= e.created).then_some(pid)
}

/// Field 22 of `/proc/PID/stat`, when the process started (clock ticks
/// after the boot). The name in parentheses may hold spaces and
/// parentheses: the fields are counted after its last ')'.
fn start_ticks(stat: &str) -> Option<u64> {
    let (_, after) = stat.rsplit_once(')')?;
    // `after` begins with field 3 (the state).
    after.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The kernel's USER_HZ, the unit of `/proc`'s times.
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a constant of the C library; it has no
    // preconditions and touches no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_read_after_the_name() {
        // A line as Linux writes it, its name given a space and a ')'.
        let stat = "4242 (vfio-a) ssis) S 4241 4242 4242 0 -1 4194560 157 0 0 0 0 0 0 0 20 0 1 0 918273 8441856 512 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 3 0 0 0 0 0";
        assert_eq!(start_ticks(stat), Some(918273));
        assert_eq!(start_ticks("4242 (x) S 1"), None);
        assert_eq!(start_ticks("no parenthesis"), None);
    }
}
