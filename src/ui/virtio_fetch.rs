//! The virtio-win disc fetched from the window with the user's consent
//! (install::download): the job, its progress (bytes and the announced
//! total, read by the page each frame) and its cancel flag.

use crate::ui::runtime::Slot;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct VirtioFetch {
    pub job: Slot<Result<String, String>>,
    /// Bytes so far, and the total the server announced (0: unknown).
    pub bytes: Arc<AtomicU64>,
    pub total: Arc<AtomicU64>,
    pub cancel: Arc<AtomicBool>,
    pub done: Option<Result<String, String>>,
}

impl VirtioFetch {
    pub fn new() -> Self {
        VirtioFetch {
            job: Slot::new("downloading virtio-win"),
            bytes: Arc::new(AtomicU64::new(0)),
            total: Arc::new(AtomicU64::new(0)),
            cancel: Arc::new(AtomicBool::new(false)),
            done: None,
        }
    }

    /// Start fetching Fedora's stable disc to `to`.
    pub fn start(
        &mut self,
        to: String,
        wake: impl FnOnce() + Send + 'static,
    ) -> Result<(), String> {
        self.done = None;
        self.bytes.store(0, Ordering::Relaxed);
        self.total.store(0, Ordering::Relaxed);
        self.cancel.store(false, Ordering::Relaxed);
        let (bytes, total, cancel) = (self.bytes.clone(), self.total.clone(), self.cancel.clone());
        self.job.start(
            move || {
                let mut seen = |b: u64, t: Option<u64>| {
                    bytes.store(b, Ordering::Relaxed);
                    total.store(t.unwrap_or(0), Ordering::Relaxed);
                };
                crate::install::download::download(
                    &crate::install::download::Source::stable(),
                    std::path::Path::new(&to),
                    &mut seen,
                    &cancel,
                )
                .map(|p| p.display().to_string())
                .map_err(|e| e.to_string())
            },
            wake,
        )
    }

    /// (bytes, total) so far.
    pub fn progress(&self) -> (u64, Option<u64>) {
        let t = self.total.load(Ordering::Relaxed);
        (self.bytes.load(Ordering::Relaxed), (t > 0).then_some(t))
    }
}

impl Default for VirtioFetch {
    fn default() -> Self {
        Self::new()
    }
}
