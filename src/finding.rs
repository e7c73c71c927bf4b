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
    /// Concrete steps, when there is something to do.
    pub fix: Option<String>,
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
    pub fn device(mut self, address: &str) -> Self {
        self.device = Some(address.to_string());
        self
    }
}
