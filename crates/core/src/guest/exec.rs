//! A program run in the guest by its agent: `guest-exec` starts it and
//! hands back a pid, `guest-exec-status` says when it ended with its output.
//! The wait is bounded (the program may never end), and so is the output
//! kept (qemu-ga sends it base64-encoded, whole).

use std::thread::sleep;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use super::agent::{Agent, AgentError, garbage};
use super::base64;

/// The most of each stream kept: enough for a PowerShell query's JSON.
pub const OUTPUT_CAP: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecOutput {
    /// None when a signal ended it (`signal` then says which).
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub stdout: String,
    pub stderr: String,
    /// The agent or we cut the output short.
    pub truncated: bool,
}

impl Agent<'_> {
    /// Run `path` with `args` in the guest and wait at most `wait` for it
    /// to end. A program still running then is left to the guest (the
    /// agent has no kill); the error says so.
    pub fn exec(
        &self,
        path: &str,
        args: &[&str],
        wait: Duration,
    ) -> Result<ExecOutput, AgentError> {
        let started = self.call(
            "guest-exec",
            Some(json!({ "path": path, "arg": args, "capture-output": true })),
        )?;
        let pid = started
            .get("pid")
            .and_then(Value::as_i64)
            .ok_or_else(|| garbage("guest-exec", "no pid"))?;
        let deadline = Instant::now() + wait;
        let mut nap = Duration::from_millis(50);
        loop {
            let st = self.call("guest-exec-status", Some(json!({ "pid": pid })))?;
            if let Some(out) = exec_status(&st)? {
                return Ok(out);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(AgentError::NoAnswer {
                    command: format!("{path} (pid {pid} in the guest, still running)"),
                    seconds: u32::try_from(wait.as_secs()).unwrap_or(u32::MAX),
                });
            }
            sleep(nap.min(deadline - now));
            nap = (nap * 2).min(Duration::from_millis(500));
        }
    }
}

/// `guest-exec-status`'s return: `None` while the program runs.
pub fn exec_status(v: &Value) -> Result<Option<ExecOutput>, AgentError> {
    let bad = |why: &str| garbage("guest-exec-status", why);
    let exited = v
        .get("exited")
        .and_then(Value::as_bool)
        .ok_or_else(|| bad("no 'exited'"))?;
    if !exited {
        return Ok(None);
    }
    let stream = |key: &str| -> Result<(String, bool), AgentError> {
        match v.get(key).and_then(Value::as_str) {
            None => Ok((String::new(), false)),
            Some(b64) => {
                let (bytes, cut) = base64::decode(b64, OUTPUT_CAP)
                    .ok_or_else(|| bad(&format!("'{key}' is not base64")))?;
                Ok((String::from_utf8_lossy(&bytes).into_owned(), cut))
            }
        }
    };
    let (stdout, cut_out) = stream("out-data")?;
    let (stderr, cut_err) = stream("err-data")?;
    let flag = |key: &str| v.get(key).and_then(Value::as_bool).unwrap_or(false);
    Ok(Some(ExecOutput {
        exit_code: v.get("exitcode").and_then(Value::as_i64),
        signal: v.get("signal").and_then(Value::as_i64),
        stdout,
        stderr,
        truncated: cut_out || cut_err || flag("out-truncated") || flag("err-truncated"),
    }))
}
