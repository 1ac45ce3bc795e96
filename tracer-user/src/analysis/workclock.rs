//! The work clock of one thread: its CPU time (or, with `--clock wall`, elapsed time)
//! minus the time it spent inside communication and synchronization calls. Busy-polling
//! MPI libraries spin on the CPU inside MPI_Recv: that time is waiting, not work.

/// Which raw clock the work clock is built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClockKind {
    /// On-CPU time of the thread (the default).
    #[default]
    Cpu,
    /// Elapsed time; runnable-but-not-running time then counts as work.
    Wall,
}

#[derive(Clone, Debug, Default)]
pub struct WorkClock {
    kind: ClockKind,
    /// Raw clock spent blocked so far.
    blocked: u64,
    /// Nesting depth of blocking intervals (an MPI call may futex-wait inside).
    depth: u32,
    /// Raw clock when the outermost blocking interval began.
    block_start: u64,
    /// Largest work value handed out (the clock never runs backwards).
    last: u64,
}

impl WorkClock {
    pub fn new(kind: ClockKind) -> Self {
        WorkClock {
            kind,
            ..Default::default()
        }
    }

    fn raw(&self, ts_ns: u64, cpu_ns: u64) -> u64 {
        match self.kind {
            ClockKind::Cpu => cpu_ns,
            ClockKind::Wall => ts_ns,
        }
    }

    /// Work done so far, as of an event stamped (ts_ns, cpu_ns).
    pub fn work(&mut self, ts_ns: u64, cpu_ns: u64) -> u64 {
        let raw = self.raw(ts_ns, cpu_ns);
        let blocked = if self.depth > 0 {
            self.blocked + raw.saturating_sub(self.block_start)
        } else {
            self.blocked
        };
        self.last = self.last.max(raw.saturating_sub(blocked));
        self.last
    }

    pub fn begin_blocking(&mut self, ts_ns: u64, cpu_ns: u64) {
        if self.depth == 0 {
            self.block_start = self.raw(ts_ns, cpu_ns);
        }
        self.depth += 1;
    }

    pub fn end_blocking(&mut self, ts_ns: u64, cpu_ns: u64) {
        match self.depth {
            0 => {}
            1 => {
                self.blocked += self.raw(ts_ns, cpu_ns).saturating_sub(self.block_start);
                self.depth = 0;
            }
            _ => self.depth -= 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_time_is_not_work() {
        let mut c = WorkClock::new(ClockKind::Cpu);
        assert_eq!(c.work(0, 100), 100);
        c.begin_blocking(0, 100);
        assert_eq!(c.work(0, 150), 100, "spinning inside a blocking call");
        c.begin_blocking(0, 160); // nested futex wait
        c.end_blocking(0, 170);
        c.end_blocking(0, 200);
        assert_eq!(c.work(0, 200), 100);
        assert_eq!(c.work(0, 230), 130);
        let mut w = WorkClock::new(ClockKind::Wall);
        assert_eq!(w.work(1000, 5), 1000);
    }
}
