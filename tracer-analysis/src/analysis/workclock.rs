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
    /// Elapsed time minus time runnable but not running: on CPU or asleep. (The what-if
    /// replay tells sleep, which any placement keeps, from CPU contention, which it
    /// recomputes.)
    Awake,
}

impl ClockKind {
    /// The clock's name in reports (as `--clock` spells it).
    pub fn name(self) -> &'static str {
        match self {
            ClockKind::Cpu => "cpu",
            ClockKind::Wall => "wall",
            ClockKind::Awake => "awake",
        }
    }
}

/// `prev_state` of a switch-out: the kernel reports 0 (TASK_RUNNING) for a task that
/// gave up the CPU while runnable, and TASK_REPORT_MAX (0x100 on current kernels) for a
/// preempted one; the sleeping and stopped states are the bits below 0x100.
pub(crate) fn still_runnable(prev_state: i64) -> bool {
    prev_state & 0xff == 0
}

/// The work clocks of one thread, all three kept (the what-if replay needs them all;
/// the critical path uses one, its `kind`).
#[derive(Clone, Debug, Default)]
pub(crate) struct WorkClock {
    kind: ClockKind,
    /// Per raw clock (indexed by [`ClockKind::index`]): time spent blocked so far, when
    /// the outermost blocking interval began, and the largest work value handed out (a
    /// clock never runs backwards).
    blocked: [u64; 4],
    block_start: [u64; 4],
    last: [u64; 4],
    /// Nesting depth of blocking intervals (an MPI call may futex-wait inside).
    depth: u32,
    /// The raw clocks when a poll that found nothing returned, while it is not yet known
    /// whether the thread polls again at once (see [`Self::end_blocking_after_poll`]).
    poll_ended: Option<[u64; 4]>,
    /// Time runnable but not running so far, and since when the thread is (if it is).
    runnable: u64,
    preempted_at: Option<u64>,
    /// Of that time, the part its CPU ran other work (processes outside the program,
    /// see [`OtherWork`]) so far; and, while it is runnable, the CPU it waits for and that
    /// CPU's [`OtherWork`] clock when it began to.
    held: u64,
    waits_on: Option<(u32, u64)>,
}

/// Index of the held clock in [`super::model::Clocks`]: time runnable but not running
/// while the CPU ran work outside the program (what-if keeps it as it was).
pub(crate) const HELD: usize = 3;

/// Every raw clock by index: the three kinds ([`ClockKind::index`]), then [`HELD`].
const RAW_CLOCKS: [usize; 4] = [0, 1, 2, HELD];

impl ClockKind {
    /// Position in [`WorkClock::works`]: cpu, awake, wall.
    pub fn index(self) -> usize {
        match self {
            ClockKind::Cpu => 0,
            ClockKind::Awake => 1,
            ClockKind::Wall => 2,
        }
    }
}

impl WorkClock {
    pub(crate) fn new(kind: ClockKind) -> Self {
        WorkClock {
            kind,
            ..Default::default()
        }
    }

    /// Raw clock `k` (a [`ClockKind::index`], or [`HELD`]). The held clock advances only
    /// when the thread gets its CPU back ([`Self::switched_in`]).
    fn raw_at(&self, k: usize, ts_ns: u64, cpu_ns: u64) -> u64 {
        match k {
            0 => cpu_ns,
            2 => ts_ns,
            1 => {
                let waiting = self.preempted_at.map_or(0, |p| ts_ns.saturating_sub(p));
                ts_ns.saturating_sub(self.runnable + waiting)
            }
            _ => self.held,
        }
    }

    fn work_of(&mut self, kind: ClockKind, ts_ns: u64, cpu_ns: u64) -> u64 {
        self.work_at(kind.index(), ts_ns, cpu_ns)
    }

    fn work_at(&mut self, k: usize, ts_ns: u64, cpu_ns: u64) -> u64 {
        let raw = self.raw_at(k, ts_ns, cpu_ns);
        let blocked = if self.depth > 0 {
            self.blocked[k] + raw.saturating_sub(self.block_start[k])
        } else {
            self.blocked[k]
        };
        self.last[k] = self.last[k].max(raw.saturating_sub(blocked));
        self.last[k]
    }

    /// Work done so far on the thread's clock, as of an event stamped (ts_ns, cpu_ns).
    pub(crate) fn work(&mut self, ts_ns: u64, cpu_ns: u64) -> u64 {
        self.work_of(self.kind, ts_ns, cpu_ns)
    }

    /// Every work clock and the raw clocks under them: cpu, awake, wall and held.
    pub(crate) fn clocks(&mut self, ts_ns: u64, cpu_ns: u64) -> super::model::Clocks {
        let work = RAW_CLOCKS.map(|k| self.work_at(k, ts_ns, cpu_ns));
        super::model::Clocks {
            work,
            raw: RAW_CLOCKS.map(|k| self.raw_at(k, ts_ns, cpu_ns)),
        }
    }

    pub(crate) fn begin_blocking(&mut self, ts_ns: u64, cpu_ns: u64) {
        if self.depth == 0 {
            self.block_start = RAW_CLOCKS.map(|k| self.raw_at(k, ts_ns, cpu_ns));
        }
        self.depth += 1;
    }

    pub(crate) fn end_blocking(&mut self, ts_ns: u64, cpu_ns: u64) {
        match self.depth {
            0 => {}
            1 => self.end_outermost(RAW_CLOCKS.map(|k| self.raw_at(k, ts_ns, cpu_ns))),
            _ => self.depth -= 1,
        }
    }

    /// Ends the outermost blocking interval at raw clocks `raw`.
    fn end_outermost(&mut self, raw: [u64; 4]) {
        for k in RAW_CLOCKS {
            self.blocked[k] += raw[k].saturating_sub(self.block_start[k]);
        }
        self.depth = 0;
        self.poll_ended = None;
    }

    /// A poll (MPI_Test, MPI_Iprobe, pvm_nrecv, ...) returned without finding what it
    /// polled for. If it was the outermost blocking call, whether its interval ends here
    /// is decided by the thread's next record ([`Self::settle_poll`]): a busy-polling
    /// loop spends about a third of its time between the calls, most of it our own
    /// probes' traps, and that time is waiting too.
    pub(crate) fn end_blocking_after_poll(&mut self, ts_ns: u64, cpu_ns: u64) {
        if self.depth == 1 {
            self.poll_ended = Some(RAW_CLOCKS.map(|k| self.raw_at(k, ts_ns, cpu_ns)));
        } else {
            self.end_blocking(ts_ns, cpu_ns);
        }
    }

    /// CPU clock when the last poll returned with nothing, if the thread has not done
    /// anything since.
    pub(crate) fn poll_ended_cpu(&self) -> Option<u64> {
        self.poll_ended.map(|raw| raw[0])
    }

    /// Ends the interval of the poll that found nothing: through now (ts_ns, cpu_ns) when
    /// the time since it returned was part of the polling loop, else when it returned.
    pub(crate) fn settle_poll(&mut self, loop_went_on: bool, ts_ns: u64, cpu_ns: u64) {
        if let Some(ended) = self.poll_ended {
            if loop_went_on {
                self.end_blocking(ts_ns, cpu_ns);
            } else {
                self.end_outermost(ended);
            }
        }
    }

    /// The thread left CPU `cpu` with state `prev_state`; `other` is that CPU's
    /// [`OtherWork`] clock now.
    pub(crate) fn switched_out(&mut self, ts_ns: u64, prev_state: i64, cpu: u32, other: u64) {
        if still_runnable(prev_state) {
            self.preempted_at = Some(ts_ns);
            self.waits_on = Some((cpu, other));
        }
    }

    /// The thread made a record of its own, so it is on a CPU: a switch-in that was
    /// missed ends no wait (runnable time is never over-counted).
    pub(crate) fn ran(&mut self) {
        self.preempted_at = None;
        self.waits_on = None;
    }

    /// The CPU the thread waits for while runnable, if it is.
    pub(crate) fn waits_on(&self) -> Option<u32> {
        self.waits_on.map(|(c, _)| c)
    }

    /// The thread got a CPU again; `other` is the [`OtherWork`] clock, now, of the CPU
    /// it waited for ([`Self::waits_on`]).
    pub(crate) fn switched_in(&mut self, ts_ns: u64, other: u64) {
        if let Some(p) = self.preempted_at.take() {
            let waited = ts_ns.saturating_sub(p);
            self.runnable += waited;
            if let Some((_, since)) = self.waits_on.take() {
                self.held += other.saturating_sub(since).min(waited);
            }
        }
    }
}

/// Per CPU, how long it ran work outside the program (or nothing) so far: the time a
/// program thread waiting for that CPU was held back by other work on the machine,
/// which a what-if replay cannot work out from the program's own threads.
#[derive(Clone, Debug, Default)]
pub(crate) struct OtherWork {
    /// The program thread on the CPU now (if any), since when the CPU ran other work
    /// (when none), and that time before.
    running: Option<u32>,
    since: u64,
    other: u64,
}

impl OtherWork {
    /// The clock at `ts_ns`.
    pub(crate) fn at(&self, ts_ns: u64) -> u64 {
        match self.running {
            Some(_) => self.other,
            None => self.other + ts_ns.saturating_sub(self.since),
        }
    }

    /// Program thread `tid` runs on the CPU (a record of its own, or a switch-in).
    pub(crate) fn runs(&mut self, tid: u32, ts_ns: u64) {
        if self.running.is_none() {
            self.other += ts_ns.saturating_sub(self.since);
        }
        self.running = Some(tid);
    }

    /// Thread `tid` left the CPU.
    pub(crate) fn left(&mut self, tid: u32, ts_ns: u64) {
        if self.running == Some(tid) {
            self.running = None;
            self.since = ts_ns;
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
        // Preempted from 1100 to 1400, asleep from 1500 to 1900.
        let mut a = WorkClock::new(ClockKind::Awake);
        a.switched_out(1100, 0x100, 0, 0);
        a.switched_in(1400, 200);
        a.switched_out(1500, 1, 0, 200);
        a.switched_in(1900, 200);
        assert_eq!(a.work(2000, 5), 2000 - 300);
        let every_clock = [ClockKind::Cpu, ClockKind::Awake, ClockKind::Wall];
        assert_eq!(every_clock.map(|k| a.work_of(k, 2000, 5)), [5, 1700, 2000]);
        // Its CPU ran other work for 200 of the 300 ns it was runnable.
        assert_eq!(a.clocks(2000, 5).raw[HELD], 200);
    }

    #[test]
    fn the_gap_after_an_empty_poll_is_settled_by_what_follows() {
        let mut c = WorkClock::new(ClockKind::Cpu);
        c.begin_blocking(0, 100);
        c.end_blocking_after_poll(0, 110);
        assert_eq!(c.poll_ended_cpu(), Some(110));
        assert_eq!(c.work(0, 112), 100, "undecided: not work yet");
        c.settle_poll(true, 0, 112); // the loop polled again
        c.begin_blocking(0, 112);
        c.end_blocking_after_poll(0, 120);
        c.settle_poll(false, 0, 150); // it went on to other work
        assert_eq!(c.poll_ended_cpu(), None);
        assert_eq!(c.work(0, 150), 130);
        // Nested inside another blocking interval, a poll ends nothing.
        c.begin_blocking(0, 150);
        c.begin_blocking(0, 150);
        c.end_blocking_after_poll(0, 160);
        assert_eq!(c.poll_ended_cpu(), None);
        c.end_blocking(0, 170);
        assert_eq!(c.work(0, 180), 140);
    }
}
