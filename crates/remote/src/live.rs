//! The live pages on another machine: its monitor runs there and streams
//! its samples back over one SSH session (`vfio-assistant monitor --json`,
//! one JSON line per sample, read here as they come); its latency probe runs
//! there and sends its statistics back as JSON. What the local sampler and
//! probe give, the same types, so the app's Monitor page draws either.
//!
//! Root there is used when the login has it without a password (root, or
//! `sudo -n`): KVM's counters and real-time probe threads want it. Without,
//! the monitor runs as the login (interrupts, CPU time and vCPU placement
//! need no root) and the probe's threads run at normal priority, which the
//! statistics say (`realtime: false`).

use super::{RemoteError, SshTarget, quote};
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vfio_assistant_core::host::input::Reaction;
use vfio_assistant_core::monitor::idle_hold::NotCompared;
use vfio_assistant_core::monitor::latency::LatencyStats;
use vfio_assistant_core::monitor::rates::kvm_meaning;
use vfio_assistant_core::monitor::sampler::Update;

/// The longest line one sample may take (a big host's is tens of KiB).
const MAX_LINE: u64 = 4 << 20;

/// One sample as the remote monitor printed it.
pub fn parse_update(line: &str) -> Result<Update, RemoteError> {
    let mut u: Update = serde_json::from_str(line).map_err(|e| RemoteError::Unreadable {
        what: "a sample",
        detail: e.to_string(),
    })?;
    for k in &mut u.rates.kvm {
        k.meaning = kvm_meaning(&k.name);
    }
    Ok(u)
}

impl SshTarget {
    /// The prefix that gives root there without a password, or nothing
    /// (the login then runs it as itself). A captured root needs none.
    fn root_if_free(&self) -> Option<&'static str> {
        if self.root.is_some() {
            return None;
        }
        self.sudo_prefix(super::Privilege::Root, false)
            .ok()
            .map(|(p, _)| p)
    }

    /// Start the monitor there: each sample arrives on the receiver as an
    /// `Update` and `wake` is called after it. When the session ends
    /// (refused, the connection lost, the program there failed) a last
    /// `Update` carries why in `ended`, with nothing else. Setting `stop`
    /// ends the session at the next sample.
    pub fn spawn_monitor(
        &self,
        domain: Option<&str>,
        interval: Duration,
        stop: Arc<AtomicBool>,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Receiver<Update>> {
        let (tx, rx) = channel();
        let target = self.clone();
        let mut args = vec![
            "monitor".to_string(),
            "--json".into(),
            "--interval-ms".into(),
            interval.as_millis().clamp(50, 60_000).to_string(),
        ];
        if let Some(d) = domain {
            args.extend(["--domain".into(), d.to_string()]);
        }
        std::thread::Builder::new()
            .name("remote-monitor".into())
            .spawn(move || {
                let why = target.stream_monitor(&args, &stop, |u| {
                    let sent = tx.send(u).is_ok();
                    wake();
                    sent
                });
                if let Err(why) = why
                    && !stop.load(Ordering::Relaxed)
                {
                    let _ = tx.send(Update::ended(why.to_string()));
                    wake();
                }
            })?;
        Ok(rx)
    }

    /// Run the monitor there and hand each sample to `each` until it says
    /// stop, `stop` is set or the session ends; why it ended, when not asked.
    fn stream_monitor(
        &self,
        args: &[String],
        stop: &Arc<AtomicBool>,
        mut each: impl FnMut(Update) -> bool,
    ) -> Result<(), MonitorEnded> {
        let sudo = self.root_if_free().unwrap_or("");
        let line = self.ours_there(args, sudo);
        let mut child = self
            .command(&line)?
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| RemoteError::NoSsh(e.to_string()))?;
        let stderr = child.stderr.take();
        let errors = std::thread::spawn(move || stderr.map(super::drain_tail).unwrap_or_default());
        let out = child.stdout.take();
        // Stopped while nothing comes (a silent connection): the session is
        // ended from here at once, not at the next line.
        let child = Arc::new(Mutex::new(Some(child)));
        let done = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (child, done, stop) = (child.clone(), done.clone(), stop.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if stop.load(Ordering::Relaxed) {
                        if let Ok(mut c) = child.lock()
                            && let Some(c) = c.as_mut()
                        {
                            let _ = c.kill();
                        }
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        let mut bad = None;
        if let Some(out) = out {
            let mut out = BufReader::new(out);
            let mut line = String::new();
            loop {
                line.clear();
                match (&mut out).take(MAX_LINE).read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if !line.ends_with('\n') {
                    bad = Some(format!("a sample longer than {} MiB", MAX_LINE >> 20));
                    break;
                }
                match parse_update(line.trim_end()) {
                    Ok(u) => {
                        if !each(u) || stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    Err(e) => {
                        bad = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        // Asked to stop (or a bad line): the session is ended here; the
        // monitor there ends at its next write.
        done.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        let taken = child.lock().ok().and_then(|mut c| c.take());
        let Some(mut child) = taken else {
            return Err(MonitorEnded::Lost);
        };
        // The stream ended by itself: ssh exits with the command's code just
        // after it closes the output (127: the program is not there), and a
        // killed ssh would lose that code — seen under load, where the
        // kill came first. Asked to stop, or a bad line: killed at once.
        let ended_by_itself = bad.is_none() && !stop.load(Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(if ended_by_itself { 10 } else { 0 });
        while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let status = child
            .wait()
            .map_err(|e| MonitorEnded::Wait(e.to_string()))?;
        let stderr = String::from_utf8_lossy(&errors.join().unwrap_or_default()).into_owned();
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if let Some(what) = bad {
            return Err(MonitorEnded::BadSample {
                host: self.shown(),
                what,
            });
        }
        Err(match status.code() {
            Some(0) => MonitorEnded::Ended { host: self.shown() },
            code => self.classify("the monitor", code, &stderr).into(),
        })
    }

    /// The "press a key" picker there: which of `nodes` (that machine's
    /// event nodes; empty: every keyboard and mouse it has) react in
    /// `seconds`. Reading input devices wants root there (or the input
    /// group): root is used when the login has it without a password.
    pub fn watch_input(
        &self,
        nodes: &[String],
        seconds: u64,
    ) -> Result<Vec<Reaction>, RemoteError> {
        let sudo = self.root_if_free().unwrap_or("");
        let mut args = vec![
            "input".to_string(),
            "watch".into(),
            "--json".into(),
            "--seconds".into(),
            seconds.clamp(1, 60).to_string(),
            "--".into(),
        ];
        args.extend(nodes.iter().cloned());
        let line = self.ours_there(&args, sudo);
        let out = self.run("watching its keyboards and mice", &line, 4 << 20)?;
        serde_json::from_slice(&out).map_err(|e| RemoteError::Unreadable {
            what: "the picker's answer",
            detail: e.to_string(),
        })
    }

    /// The latency probe there on `cpus` for `seconds`; with
    /// `compare_idle` measured again with shallow idle states only (root
    /// there: refused in words without). The first result is the probe as
    /// configured, the second the comparison when asked.
    pub fn latency(
        &self,
        cpus: &[u32],
        seconds: u64,
        compare_idle: bool,
    ) -> Result<LatencyPair, RemoteError> {
        let root = self.root_if_free();
        let compare = compare_idle && root.is_some();
        let sudo = root.unwrap_or("");
        let mut args = vec![
            "latency".to_string(),
            "--json".into(),
            "--cpus".into(),
            vfio_assistant_core::parse::cpulist::format_cpulist(cpus),
            "--duration-s".into(),
            seconds.clamp(1, 60).to_string(),
        ];
        if compare {
            args.push("--compare-idle".into());
        }
        let line = self.ours_there(&args, sudo);
        let limit = 16 << 20;
        let out = self.run("the latency probe", &line, limit)?;
        let text = String::from_utf8_lossy(&out);
        let unread = |e: serde_json::Error| RemoteError::Unreadable {
            what: "the probe's statistics",
            detail: e.to_string(),
        };
        if compare {
            #[derive(serde::Deserialize)]
            struct Both {
                as_configured: Vec<LatencyStats>,
                shallow_idle_only: Vec<LatencyStats>,
            }
            let b: Both = serde_json::from_str(&text).map_err(unread)?;
            return Ok((b.as_configured, Some(Ok(b.shallow_idle_only))));
        }
        let stats: Vec<LatencyStats> = serde_json::from_str(&text).map_err(unread)?;
        let refused = compare_idle.then(|| {
            Err(NotCompared::NoRootThere {
                host: self.shown(),
                program: quote(&self.program()),
            })
        });
        Ok((stats, refused))
    }
}

/// Why the live monitor there stopped sending, when nobody asked it to.
#[derive(Debug, thiserror::Error)]
pub enum MonitorEnded {
    #[error("{0}")]
    Remote(#[from] RemoteError),
    #[error("the monitor's session was lost")]
    Lost,
    /// Waiting for ssh to end failed (the system's words).
    #[error("{0}")]
    Wait(String),
    #[error("the monitor on {host} sent {what}")]
    BadSample { host: String, what: String },
    #[error("the monitor on {host} ended")]
    Ended { host: String },
}

/// The probe as configured, and the comparison with shallow idle states
/// when asked (or why it was not measured).
pub type LatencyPair = (
    Vec<LatencyStats>,
    Option<Result<Vec<LatencyStats>, NotCompared>>,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_reads_back_with_its_counters_meanings() {
        let line = r#"{"t_s":2.0,"rates":{"dt_s":1.0,"irq_per_cpu":[[0,10.0]],"sources":[],"cpu_use":[],"freq_mhz":[],"governors":[],"vcpus":[],"kvm":[{"name":"halt_exits","per_s":5.0,"per_vcpu":[[0,5.0]],"meaning":"x"}],"kvm_source":"debugfs","problems":[]},"vm":null,"vm_problem":null}"#;
        let u = parse_update(line).unwrap();
        assert_eq!(u.rates.irq_per_cpu, vec![(0, 10.0)]);
        assert_eq!(u.rates.kvm[0].meaning, kvm_meaning("halt_exits"));
        assert!(parse_update("{\"t_s\":").is_err());
    }
}
