//! The tracer's memory bound. Whatever the event rate, the tracer's resident memory
//! stays near `--memory-limit-mib`: checked at every tick of the event loop (50 ms),
//! and once over it the records the reader takes from the probes are dropped and
//! counted (`ProbeFailure::MemoryLimit`, lost records that every command warns of),
//! while the session goes on holding, probing and letting go processes as before and
//! the recording keeps what it had. What grows with the traced program is the analysis
//! state (threads, open calls, messages not yet matched); the buffers the probes write
//! are fixed at load time (docs/reliability.md).

use crate::probes::machine_memory_bytes;

/// Default: a quarter of the machine's memory, at most 8 GiB.
pub fn default_limit_bytes() -> u64 {
    const MAX: u64 = 8 << 30;
    machine_memory_bytes().map_or(MAX, |t| (t / 4).min(MAX))
}

/// The tracer's resident memory now (/proc/self/statm's resident pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as u64)
}

pub(super) struct MemoryLimit {
    limit_bytes: u64,
    over: bool,
    /// Records dropped since the limit was passed.
    pub(super) dropped: u64,
}

impl MemoryLimit {
    pub(super) fn new(limit_bytes: u64) -> Self {
        MemoryLimit {
            limit_bytes,
            over: false,
            dropped: 0,
        }
    }

    /// Whether records are dropped now.
    pub(super) fn over(&self) -> bool {
        self.over
    }

    /// Reads the tracer's memory; past the limit, records are dropped from now on (the
    /// analysis state does not shrink, so there is no way back).
    pub(super) fn check(&mut self) {
        if self.over {
            return;
        }
        if resident_bytes().is_some_and(|b| b > self.limit_bytes) {
            self.over = true;
            log::warn!(
                "the tracer's memory passed --memory-limit-mib ({} MiB): records are \
                 dropped from now on, and counted as lost",
                self.limit_bytes >> 20
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_passed_once_and_for_good() {
        let mut m = MemoryLimit::new(u64::MAX);
        m.check();
        assert!(!m.over());
        let mut m = MemoryLimit::new(1);
        m.check();
        assert!(
            m.over(),
            "this test's process has more than a byte resident"
        );
        let d = default_limit_bytes();
        assert!(d > 0 && d <= 8 << 30);
    }
}
