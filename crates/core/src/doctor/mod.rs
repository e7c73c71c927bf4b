//! Troubleshooting: symptom-driven flows. Each symptom names the checks that
//! can explain it, what we cannot see from the host (the guest, a running VM),
//! and ends in a diagnosis with the evidence and the fixes.

pub mod symptoms;

use crate::checks::model::{Finding, Status};
use serde::Serialize;
pub use symptoms::{SYMPTOMS, Symptom};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// At least one relevant check fails or warns: likely the cause.
    CauseFound,
    /// Everything we can see is fine; the cause is elsewhere (guest, VM config).
    NothingFound,
    /// What we need could not be read (not root, a partial capture, no VM running).
    CannotTell,
}

impl Outcome {
    /// The verdict in words, the same in the CLI, the app and the README.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::CauseFound => "Likely cause found",
            Outcome::NothingFound => "No clear cause on the host",
            Outcome::CannotTell => "Cannot tell from here",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    pub symptom: String,
    pub title: String,
    pub outcome: Outcome,
    /// One paragraph in plain words.
    pub summary: String,
    /// The relevant findings, problems first, with their evidence and fixes.
    pub findings: Vec<Finding>,
    /// What to check where we cannot look (the guest, the VM definition, live data).
    pub next_steps: Vec<String>,
}

pub fn find_symptom(id: &str) -> Option<&'static Symptom> {
    SYMPTOMS.iter().find(|s| s.id == id)
}

/// Walk one symptom over the host's findings. `domain_named` says that the
/// VM was named (`--domain`, the app's VM field): its findings are among
/// `findings`, and the summary does not ask for its name again.
///
/// The verdict is "cannot tell" when nothing could be checked, and also when
/// more of the symptom's checks could not read what they need than could
/// (a thin capture, not root): two passes among eight unreadable checks are
/// no "no clear cause".
pub fn diagnose(symptom: &Symptom, findings: &[Finding], domain_named: bool) -> Diagnosis {
    let cannot_see = symptom.cannot_see_for(domain_named);
    let relevant: Vec<Finding> = findings
        .iter()
        .filter(|f| symptom.checks.contains(&f.id.as_str()))
        .cloned()
        .collect();
    let problems: Vec<&Finding> = relevant
        .iter()
        .filter(|f| matches!(f.status, Status::Fail | Status::Warn))
        .collect();
    let unknown = relevant
        .iter()
        .filter(|f| f.status == Status::Unknown)
        .count();
    let passed = relevant.iter().filter(|f| f.status == Status::Pass).count();
    // An Info finding with a fix was checked and is worth a look for this
    // symptom (no hugepages, deep idle states); one without a fix only
    // informs ("the VM is shut off") and checks nothing.
    let suggestions = relevant
        .iter()
        .filter(|f| f.status == Status::Info && f.fix.is_some())
        .count();
    // Host checks that said nothing: they did not apply (no device in use,
    // no split-lock detection) or had nothing to read (a thin capture).
    let host_checks = symptom
        .checks
        .iter()
        .filter(|c| !c.starts_with("vm."))
        .count();
    let silent = symptom
        .checks
        .iter()
        .filter(|c| !c.starts_with("vm."))
        .filter(|c| !relevant.iter().any(|f| f.id == **c))
        .count();
    let looked = passed + suggestions;
    let (outcome, summary) = if !problems.is_empty() {
        let titles: Vec<&str> = problems.iter().map(|f| f.title.as_str()).collect();
        (
            Outcome::CauseFound,
            format!(
                "Found {} likely cause(s) on the host: {}. Fix these first (each below says how), then try again.",
                problems.len(),
                titles.join("; ")
            ),
        )
    } else if passed + suggestions == 0 {
        (
            Outcome::CannotTell,
            format!(
                "Nothing on the host could be checked for this symptom{}. {}",
                if unknown > 0 {
                    " (run as root, or capture the whole host)"
                } else {
                    ""
                },
                cannot_see
            ),
        )
    } else if unknown + silent > looked {
        // Most of what could explain it was not seen: two passes among
        // eight checks that read nothing are no "no clear cause".
        (
            Outcome::CannotTell,
            format!(
                "Too little could be checked to tell: {} of this symptom's checks could not read what they need or had nothing to read here, and only {looked} could (run as root, or capture the whole host). {}",
                unknown + silent,
                cannot_see
            ),
        )
    } else {
        let mut parts = Vec::new();
        if passed > 0 {
            parts.push(format!("{passed} check(s) passed"));
        }
        if suggestions > 0 {
            parts.push(format!(
                "{suggestions} suggestion(s) below could still help"
            ));
        }
        if unknown > 0 {
            parts.push(format!("{unknown} could not be read"));
        }
        if silent > 0 {
            parts.push(format!(
                "{silent} of its {host_checks} host checks did not apply or had nothing to read here"
            ));
        }
        (
            Outcome::NothingFound,
            format!(
                "No clear cause on the host side ({}). {}",
                parts.join(", "),
                cannot_see
            ),
        )
    };
    Diagnosis {
        symptom: symptom.id.to_string(),
        title: symptom.title.to_string(),
        outcome,
        summary,
        findings: relevant,
        next_steps: symptom.next_steps.iter().map(|s| s.to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_symptom_names_real_checks() {
        // The ids a symptom lists must be ids the checks produce.
        for s in SYMPTOMS {
            for c in s.checks {
                assert!(crate::checks::is_check_id(c), "{}: unknown check {c}", s.id);
            }
            assert!(!s.next_steps.is_empty(), "{}: no next steps", s.id);
        }
    }

    #[test]
    fn outcomes() {
        let s = find_symptom("paused-at-start").unwrap_or(&SYMPTOMS[0]);
        let warn = Finding::new("mem.thp", "THP always", Status::Warn);
        let pass = Finding::new("mem.ksm", "KSM off", Status::Pass);
        let unknown = Finding::new("mem.hugepages", "?", Status::Unknown);
        assert_eq!(
            diagnose(s, &[warn, pass.clone()], false).outcome,
            Outcome::CauseFound
        );
        // Every host check looked, one only suggests: no clear cause, and
        // the suggestion is said.
        let host: Vec<&str> = s
            .checks
            .iter()
            .copied()
            .filter(|c| !c.starts_with("vm."))
            .collect();
        let info = Finding::new("mem.hugepages", "No hugepages reserved", Status::Info)
            .fix("Reserve some.");
        let mut all: Vec<Finding> = host
            .iter()
            .filter(|c| **c != "mem.hugepages")
            .map(|c| Finding::new(c, "fine", Status::Pass))
            .collect();
        all.push(info.clone());
        let d = diagnose(s, &all, false);
        assert_eq!(d.outcome, Outcome::NothingFound, "{}", d.summary);
        assert!(
            d.summary.starts_with(&format!(
                "No clear cause on the host side ({} check(s) passed, 1 suggestion(s) below",
                host.len() - 1
            )),
            "{}",
            d.summary
        );
        // One look among checks that read nothing: not green.
        let d = diagnose(s, &[info], false);
        assert_eq!(d.outcome, Outcome::CannotTell, "{}", d.summary);
        assert!(
            d.summary.contains(&format!(
                "{} of this symptom's checks could not read what they need or had nothing to read here, and only 1 could",
                host.len() - 1
            )),
            "{}",
            d.summary
        );
        assert_eq!(
            diagnose(s, &[pass, unknown.clone()], false).outcome,
            Outcome::CannotTell
        );
        // Information alone (a VM that is shut off) checked nothing.
        let state = Finding::new("vm.state", "'win11' is shut off", Status::Info);
        assert_eq!(diagnose(s, &[state], false).outcome, Outcome::CannotTell);
        assert_eq!(diagnose(s, &[unknown], false).outcome, Outcome::CannotTell);
        assert_eq!(diagnose(s, &[], false).outcome, Outcome::CannotTell);
        // Most checks could not read: not green, whatever passed.
        let unknowns: Vec<Finding> = ["mem.hugepages", "mem.fragmentation", "mem.ksm"]
            .iter()
            .map(|id| Finding::new(id, "?", Status::Unknown))
            .chain([Finding::new("mem.thp", "THP madvise", Status::Pass)])
            .collect();
        let d = diagnose(s, &unknowns, false);
        assert_eq!(d.outcome, Outcome::CannotTell, "{}", d.summary);
        assert!(
            d.summary.contains("could not read what they need"),
            "{}",
            d.summary
        );
    }

    #[test]
    fn a_named_domain_is_not_asked_for_again() {
        let s = find_symptom("wont-stop-start").unwrap_or(&SYMPTOMS[0]);
        let state = Finding::new("vm.state", "'win11' is shut off", Status::Info);
        let failed = Finding::new("vm.last_start", "The last start failed", Status::Fail);
        let without = diagnose(s, &[], false);
        assert!(without.summary.contains("--domain"), "{}", without.summary);
        let with = diagnose(s, &[state, failed], true);
        assert_eq!(with.outcome, Outcome::CauseFound);
        let quiet = diagnose(
            s,
            &[Finding::new("vm.last_start", "no failure", Status::Pass)],
            true,
        );
        assert!(!quiet.summary.contains("--domain"), "{}", quiet.summary);
        for sym in SYMPTOMS {
            assert!(
                !sym.cannot_see_for(true).contains("--domain"),
                "{}: asks for --domain when it was given",
                sym.id
            );
        }
    }
}
