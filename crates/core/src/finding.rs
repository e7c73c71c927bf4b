//! A finding: what was checked, what we saw (evidence: the file and the value),
//! the verdict, why it matters in plain words, and the fix. A leaf module:
//! the checks, the domain preflight and the tuning engine all speak it, and
//! it imports none of them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Something is wrong that stops passthrough or the VM.
    Fail,
    /// It works, but not well, or it is risky.
    Warn,
    /// We could not read what we need (often: not root).
    Unknown,
    /// Worth knowing; no judgement.
    Info,
    Pass,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Fail => "FAIL",
            Status::Warn => "WARN",
            Status::Unknown => "UNKNOWN",
            Status::Info => "INFO",
            Status::Pass => "PASS",
        }
    }
}

/// A file (or command) we read and the value we saw there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub source: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable id, e.g. `iommu.enabled`, `device.bound`.
    pub id: String,
    pub title: String,
    pub status: Status,
    /// The PCI address this finding is about, for per-device checks.
    pub device: Option<String>,
    pub evidence: Vec<Evidence>,
    /// What breaks if this is wrong, in plain words.
    pub why: String,
    /// Concrete steps, when there is something to do, in words (no command
    /// to type: that is `command`).
    pub fix: Option<String>,
    /// What carries the fix out, where it is more than words: the app shows
    /// it as a button or the page that does it.
    pub action: Option<Action>,
    /// The same as a command to type, shown by the app only as "or in a
    /// terminal: …" and by the CLI after the fix.
    pub command: Option<String>,
}

/// The tool's own ways to carry a fix out. Each is one button in the app
/// and one command in a terminal; the library says which, the faces present it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// A change of the tuning engine: the Tuning page with it selected
    /// (`tune apply --only ID`).
    Tune { change: String },
    /// Plan the VM's CPU pinning for this host and write it into the domain:
    /// the CPU page's board and its Apply (`domain tune --vcpus N`).
    PinDomain,
    /// Tune the domain's definition (Hyper-V enlightenments, timers): the
    /// CPU page's Apply with "tune the rest too" (`domain tune`).
    TuneDomain,
    /// Write a new domain: the New VM page (`domain new`).
    NewVm,
    /// Read and check the card's own ROM: its Devices page details (`rom ADDRESS`).
    ReadRom,
    /// Measure the timer latency on the VM's CPUs, also with shallow idle
    /// states only: the Monitor page's probe (`latency --compare-idle`).
    MeasureLatency,
    /// Put the host back as it was before an interrupted tuning: the Tuning
    /// page's Restore (`tune undo --last`).
    RestoreHost { transaction: String },
}

impl Finding {
    pub fn new(id: &str, title: impl Into<String>, status: Status) -> Self {
        Finding {
            id: id.to_string(),
            title: title.into(),
            status,
            device: None,
            evidence: Vec::new(),
            why: String::new(),
            fix: None,
            action: None,
            command: None,
        }
    }
    pub fn evidence(mut self, source: impl Into<String>, value: impl Into<String>) -> Self {
        self.evidence.push(Evidence {
            source: source.into(),
            value: value.into(),
        });
        self
    }
    pub fn why(mut self, why: impl Into<String>) -> Self {
        self.why = why.into();
        self
    }
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
    /// A fix only when `cond` holds (the finding is not a pass).
    pub fn fix_if(self, cond: bool, fix: impl Into<String>) -> Self {
        if cond { self.fix(fix) } else { self }
    }
    /// The action that carries the fix out, and the command that does the
    /// same in a terminal.
    pub fn action(mut self, action: Action, command: impl Into<String>) -> Self {
        self.action = Some(action);
        self.command = Some(command.into());
        self
    }
    /// Only the command to type, where the app has no button for it.
    pub fn terminal(mut self, command: impl Into<String>) -> Self {
        self.command = Some(command.into());
        self
    }
    /// The same only when `cond` holds.
    pub fn action_if(self, cond: bool, action: Action, command: impl Into<String>) -> Self {
        if cond {
            self.action(action, command)
        } else {
            self
        }
    }
    /// The fix as a terminal user reads it: the words, then the command.
    pub fn fix_text(&self) -> Option<String> {
        match (&self.fix, &self.command) {
            (Some(f), Some(c)) => Some(format!("{f} In a terminal: `{c}`")),
            (Some(f), None) => Some(f.clone()),
            (None, Some(c)) => Some(format!("In a terminal: `{c}`")),
            (None, None) => None,
        }
    }
    pub fn device(mut self, address: &str) -> Self {
        self.device = Some(address.to_string());
        self
    }
}
