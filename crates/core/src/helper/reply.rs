//! What the helper says back, one JSON line at a time
//! (docs/helper-protocol.md, "Output"): a closed enum both ends share. The
//! helper writes each line with `HelperReply::to_line`, and the app and the
//! CLI read each with `HelperReply::parse`, so no face picks a reply apart by
//! its key names.

use crate::tuning::apply::{Outcome, Progress};
use crate::tuning::status::EntryStatus;
use serde::{Deserialize, Serialize};

/// One line of the helper's standard output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HelperReply {
    /// A step as it happens: `{"event": "started" | "done" | …, …}`.
    Progress(Progress),
    /// How the request ended: `{"result": …}`, with `"recovery"` (how to get
    /// back should the next boot fail) after an apply that ran.
    Result {
        result: ReplyResult,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovery: Option<String>,
    },
    /// Refused, nothing changed: `{"error": "…"}`.
    Error { error: String },
}

/// What a `result` line holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ReplyResult {
    /// `status`: the journal's transactions and where each stands.
    Status { status: Vec<EntryStatus> },
    /// An apply or an undo that ran: its transaction.
    Outcome(Outcome),
    /// An apply with no change to make: `{"id": null, "state": "nothing_to_do"}`.
    Nothing(NothingToDo),
}

/// The one shape of "nothing to do" (its `id` is always null).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum NothingToDo {
    NothingToDo { id: () },
}

impl HelperReply {
    /// Refused, nothing changed, because of `why`.
    pub fn error(why: impl Into<String>) -> Self {
        HelperReply::Error { error: why.into() }
    }

    /// An apply with nothing to change.
    pub fn nothing_to_do() -> Self {
        HelperReply::Result {
            result: ReplyResult::Nothing(NothingToDo::NothingToDo { id: () }),
            recovery: None,
        }
    }

    /// The line as the helper writes it (keys in sorted order, as the
    /// protocol has always had them, no newline).
    pub fn to_line(&self) -> String {
        match serde_json::to_value(self) {
            Ok(v) => v.to_string(),
            // Nothing in a reply has a key that is not a string; said
            // rather than lost all the same.
            Err(e) => serde_json::json!({ "error": e.to_string() }).to_string(),
        }
    }

    /// One line read back; `None` when it is not one of the replies.
    pub fn parse(line: &str) -> Option<Self> {
        serde_json::from_str(line).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::journal::EntryState;
    use crate::tuning::status::Standing;

    /// Every line shape docs/helper-protocol.md shows, as the helper wrote
    /// it before the enum (`json!` maps: sorted keys), reads as its reply
    /// and is written back byte for byte.
    #[test]
    fn every_documented_line_round_trips() {
        let outcome = Outcome {
            id: "01764620000123-0004242-0".into(),
            state: EntryState::Applied,
            failure: None,
            notes: vec!["only 3 of 4 hugepages".into()],
            needs_reboot: true,
        };
        let rolled = Outcome {
            state: EntryState::RolledBack,
            failure: Some("step 4: no".into()),
            needs_reboot: false,
            ..outcome.clone()
        };
        let entry = EntryStatus {
            id: "01764620000123-0004242-0".into(),
            created: 1_764_620_000,
            changes: vec!["thp".parse().unwrap()],
            completed: 1,
            standing: Standing::WaitingForReboot,
            pending_tokens: vec!["iommu=pt".into()],
            unbound: vec![
                "0000:01:00.0 is on amdgpu, not vfio-pci: its own driver took it first".into(),
            ],
            drifted: Vec::new(),
            leftovers: Vec::new(),
            next_boot: None,
            detail: None,
            tried_once: None,
            keep: None,
            failure: None,
        };
        let step = "vfio-boot: write /etc/modprobe.d/vfio-assistant.conf";
        let progress = |p: Progress| serde_json::to_value(&p).unwrap().to_string();
        let cases: Vec<(String, HelperReply)> = vec![
            (
                progress(Progress::Started { step: step.into() }),
                HelperReply::Progress(Progress::Started { step: step.into() }),
            ),
            (
                format!(r#"{{"event":"done","step":"{step}"}}"#),
                HelperReply::Progress(Progress::Done { step: step.into() }),
            ),
            (
                r#"{"event":"refused","step":"epp: cpu0","why":"EBUSY"}"#.into(),
                HelperReply::Progress(Progress::Refused {
                    step: "epp: cpu0".into(),
                    why: "EBUSY".into(),
                }),
            ),
            (
                r#"{"event":"failed","step":"step 4","why":"no"}"#.into(),
                HelperReply::Progress(Progress::Failed {
                    step: "step 4".into(),
                    why: "no".into(),
                }),
            ),
            (
                r#"{"event":"rolled_back","step":"restore /etc/x"}"#.into(),
                HelperReply::Progress(Progress::RolledBack {
                    step: "restore /etc/x".into(),
                }),
            ),
            (
                r#"{"detail":"after the reboot","event":"verified","ok":true,"what":"cmdline"}"#
                    .into(),
                HelperReply::Progress(Progress::Verified {
                    what: "cmdline".into(),
                    ok: true,
                    detail: "after the reboot".into(),
                }),
            ),
            (
                serde_json::json!({ "result": outcome, "recovery": "hold Shift" }).to_string(),
                HelperReply::Result {
                    result: ReplyResult::Outcome(outcome.clone()),
                    recovery: Some("hold Shift".into()),
                },
            ),
            (
                serde_json::json!({ "result": rolled }).to_string(),
                HelperReply::Result {
                    result: ReplyResult::Outcome(rolled.clone()),
                    recovery: None,
                },
            ),
            (
                serde_json::json!({ "result": { "id": null, "state": "nothing_to_do" } })
                    .to_string(),
                HelperReply::nothing_to_do(),
            ),
            (
                serde_json::json!({ "result": { "status": [entry.clone()] } }).to_string(),
                HelperReply::Result {
                    result: ReplyResult::Status {
                        status: vec![entry],
                    },
                    recovery: None,
                },
            ),
            (
                serde_json::json!({ "result": { "status": [] } }).to_string(),
                HelperReply::Result {
                    result: ReplyResult::Status { status: Vec::new() },
                    recovery: None,
                },
            ),
            (
                serde_json::json!({ "error": "refused before changing anything: x" }).to_string(),
                HelperReply::error("refused before changing anything: x"),
            ),
        ];
        for (line, reply) in cases {
            assert_eq!(HelperReply::parse(&line), Some(reply.clone()), "{line}");
            assert_eq!(reply.to_line(), line);
        }
        for not_a_reply in [
            "",
            "hello",
            r#"{"event":"exploded"}"#,
            r#"{"result":{"state":"x"}}"#,
        ] {
            assert_eq!(HelperReply::parse(not_a_reply), None, "{not_a_reply}");
        }
    }
}
