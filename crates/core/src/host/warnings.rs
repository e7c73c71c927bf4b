//! Partial failure as data: a read that failed becomes a `Warning` with the path
//! and what went wrong, and the scan goes on.

use crate::sysroot::ReadError;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, PartialOrd, Ord)]
pub struct Warning {
    /// What we tried to read (or `scan` for whole-scan problems).
    pub path: String,
    pub message: String,
}

/// Collects warnings while a model is built.
#[derive(Debug, Default)]
pub struct Warnings(Vec<Warning>);

impl Warnings {
    pub fn push(&mut self, err: &ReadError) {
        let (path, message) = match err {
            ReadError::NotFound { path } => (path.clone(), "not present".to_string()),
            ReadError::PermissionDenied { path } => (
                path.clone(),
                "permission denied (run as root to read it)".to_string(),
            ),
            ReadError::Io { path, message } => (path.clone(), message.clone()),
            ReadError::Invalid {
                path,
                value,
                reason,
            } => (
                path.clone(),
                format!("unexpected value {value:?}: {reason}"),
            ),
        };
        self.0.push(Warning { path, message });
    }

    pub fn note(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Warning {
            path: path.into(),
            message: message.into(),
        });
    }

    /// The value, or `None` with the error recorded.
    pub fn take<T>(&mut self, result: Result<T, ReadError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.push(&e);
                None
            }
        }
    }

    /// Like `take` for optional reads: absent stays `None` silently.
    pub fn take_opt<T>(&mut self, result: Result<Option<T>, ReadError>) -> Option<T> {
        self.take(result).flatten()
    }

    /// Take another collector's warnings.
    pub fn extend(&mut self, other: Warnings) {
        self.0.extend(other.0);
    }

    pub fn into_sorted(self) -> Vec<Warning> {
        let mut v = self.0;
        v.sort();
        v.dedup();
        v
    }
}
