//! Every hold has a deadline. The probes stop a traced process at its exec (and a rank
//! after each dlopen) until the reader has probed what its program needs and lets it go;
//! a thread of its own lets go every process still held `HOLD_DEADLINE` after the probes
//! stopped it, whatever the reader is doing (a slow attach, a helper that does not
//! answer, a reader far behind a flood), and counts it: such a process may have run
//! calls before they were probed (docs/reliability.md, "Every hold has a deadline").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::probes::{monotonic_ns, HeldProcesses};

/// How long a process may stay held. Probing a program at its exec (`ldd`, then the
/// probes it needs) took at most 58 ms in `whole_machine`'s test, far under it.
pub(crate) const HOLD_DEADLINE: Duration = Duration::from_secs(3);

/// How often the held set is checked.
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// The thread that lets go the holds past their deadline.
pub(super) struct HoldDeadline {
    /// Dropped to stop the thread: it wakes at once, not at its next check (a session's
    /// stop waited up to `CHECK_EVERY` for it).
    stop: Option<mpsc::Sender<()>>,
    expired: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl HoldDeadline {
    pub(super) fn start(mut held: HeldProcesses) -> std::io::Result<HoldDeadline> {
        let (stop, stopped) = mpsc::channel::<()>();
        let expired = Arc::new(AtomicU64::new(0));
        let thread = {
            let expired = expired.clone();
            std::thread::Builder::new()
                .name("hold-deadline".into())
                .spawn(move || loop {
                    let gone = held.let_go_expired(monotonic_ns(), HOLD_DEADLINE);
                    for pid in &gone {
                        log::warn!(
                            "process {pid} was held {HOLD_DEADLINE:?} and let go: \
                             its first calls may not be traced"
                        );
                    }
                    expired.fetch_add(gone.len() as u64, Ordering::Relaxed);
                    match stopped.recv_timeout(CHECK_EVERY) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                })?
        };
        Ok(HoldDeadline {
            stop: Some(stop),
            expired,
            thread: Some(thread),
        })
    }

    /// Processes let go at the deadline so far.
    pub(super) fn expired(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }
}

impl Drop for HoldDeadline {
    fn drop(&mut self) {
        self.stop = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
