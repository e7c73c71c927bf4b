//! A job slot: one background job of one kind at a time, with a typed
//! result. Each page's runtime holds its own slots (the wizard's define does
//! not wait for the Devices page's ROM read), a job asked for while its slot
//! is busy is refused with a reason instead of dropped, and a job that dies
//! without an answer comes back as an error in its own slot.

use std::sync::mpsc::{Receiver, TryRecvError, channel};

pub struct Slot<T> {
    rx: Option<Receiver<T>>,
    /// What the job does, for messages ("validating the domain").
    what: &'static str,
}

impl<T: Send + 'static> Slot<T> {
    pub const fn new(what: &'static str) -> Self {
        Slot { rx: None, what }
    }

    pub fn is_busy(&self) -> bool {
        self.rx.is_some()
    }

    /// Run `job` on its own thread; `wake` is called when it is done. When
    /// a job already runs here, nothing starts and the reason comes back.
    pub fn start(
        &mut self,
        job: impl FnOnce() -> T + Send + 'static,
        wake: impl FnOnce() + Send + 'static,
    ) -> Result<(), String> {
        if self.rx.is_some() {
            return Err(format!("Still {}: wait for it to finish.", self.what));
        }
        let (tx, rx) = channel();
        let spawned = std::thread::Builder::new()
            .name(self.what.into())
            .spawn(move || {
                let _ = tx.send(job());
                wake();
            });
        match spawned {
            Ok(_) => {
                self.rx = Some(rx);
                Ok(())
            }
            Err(e) => Err(format!("could not start {}: {e}", self.what)),
        }
    }

    /// The job's result once it is done (`Err` when it died without one).
    pub fn poll(&mut self) -> Option<Result<T, String>> {
        let rx = self.rx.as_ref()?;
        let got = match rx.try_recv() {
            Ok(v) => Ok(v),
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => {
                Err(format!("{} stopped without a result", self.what))
            }
        };
        self.rx = None;
        Some(got)
    }
}

/// A slot whose job answers `Result<T, String>`: a lost job and a failed
/// one read the same.
pub fn flatten<T>(r: Result<Result<T, String>, String>) -> Result<T, String> {
    r.and_then(|x| x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn wait<T: Send + 'static>(s: &mut Slot<T>) -> Result<T, String> {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(r) = s.poll() {
                return r;
            }
            assert!(Instant::now() < until, "the job never answered");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn one_job_at_a_time_and_a_busy_slot_says_so() {
        let mut s: Slot<u32> = Slot::new("counting");
        let (go_tx, go_rx) = channel::<()>();
        s.start(
            move || {
                let _ = go_rx.recv();
                7
            },
            || {},
        )
        .unwrap();
        assert!(s.is_busy());
        let refused = s.start(|| 8, || {}).unwrap_err();
        assert!(refused.contains("Still counting"), "{refused}");
        go_tx.send(()).unwrap();
        assert_eq!(wait(&mut s), Ok(7));
        assert!(!s.is_busy());
        s.start(|| 9, || {}).unwrap();
        assert_eq!(wait(&mut s), Ok(9));
    }

    #[test]
    fn a_job_that_dies_is_an_error_in_its_own_slot() {
        let mut s: Slot<u32> = Slot::new("reading the ROM");
        s.start(|| panic!("boom"), || {}).unwrap();
        let e = wait(&mut s).unwrap_err();
        assert!(
            e.contains("reading the ROM stopped without a result"),
            "{e}"
        );
    }
}
