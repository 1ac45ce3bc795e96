//! What one thread's records say about its time: its span, its CPU clock, the time it
//! spent blocked (inside outermost MPI/PVM calls, in futex waits outside them), the time
//! it was runnable but not running, and its selected-procedure activations.
//!
//! The definitions follow the analysis (`analysis::Analyzer` and its work clock): an
//! MPI/PVM call made inside another one (by the library itself) belongs to the outer
//! call, and a futex wait inside an MPI/PVM call is part of that call.

use serde::Serialize;
use tracer_common::CallRecord;

use crate::analysis::poll_loop_went_on;
use crate::format::calls::{self, split_call_field, Role};
use crate::format::pairing::{close_call, drop_unwound};
use crate::format::records::Record;

/// Why a thread was blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cause {
    /// Point-to-point sends and receives, request completion (Wait*, Test), PVM messages.
    Message,
    /// MPI collectives.
    Collective,
    /// Synchronization between threads: futex(2) waits outside MPI/PVM calls (locks,
    /// condition variables, joins), the pthread calls probed with `--locks`, and
    /// OpenMP's waits (barriers, a master waiting for its team, idle workers).
    Futex,
    /// Other MPI/PVM calls: init, finalize, rank/size, communicator creation, pvm_mytid.
    Other,
}

impl Cause {
    pub(crate) const ALL: [Cause; 4] = [
        Cause::Message,
        Cause::Collective,
        Cause::Futex,
        Cause::Other,
    ];

    /// The cause of the time inside MPI/PVM call `id`.
    pub(crate) fn of_call(id: u16) -> Cause {
        match calls::spec(id).map(|s| s.role) {
            Some(Role::Send | Role::Recv | Role::SendRecv | Role::Completion | Role::OneSided) => {
                Cause::Message
            }
            Some(Role::Collective) => Cause::Collective,
            Some(
                Role::Setup
                | Role::ThreadCreate
                | Role::SemInit
                | Role::OmpParallel
                | Role::OmpOutlined
                | Role::OmpFork
                | Role::OmpSerialized,
            )
            | None => Cause::Other,
            // pthread calls (--locks): synchronization between threads, as futex waits.
            Some(
                Role::LockAcquire
                | Role::LockRelease
                | Role::CondWait
                | Role::CondSignal
                | Role::BarrierWait
                | Role::ThreadJoin
                | Role::SemWait
                | Role::SemPost
                | Role::OmpBarrier
                | Role::OmpJoin
                | Role::OmpIdle,
            ) => Cause::Futex,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What blocked a thread, as a distribution key: an MPI/PVM call id, or a futex wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    Call(u16),
    Futex,
}

impl Kind {
    pub(super) fn name(self) -> String {
        match self {
            Kind::Call(id) => calls::name(id),
            Kind::Futex => "futex".into(),
        }
    }

    pub(super) fn cause(self) -> Cause {
        match self {
            Kind::Call(id) => Cause::of_call(id),
            Kind::Futex => Cause::Futex,
        }
    }
}

/// A blocking interval that ended: an outermost call's exit, a futex wait's return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Blocking {
    pub kind: Kind,
    /// The caller's return address (0 when unknown).
    pub site: u64,
    pub wall_ns: u64,
}

/// A selected-procedure activation that returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Activation {
    pub procedure: usize,
    pub wall_ns: u64,
    pub cpu_ns: u64,
    /// No other activation of the same procedure is open below it on this thread:
    /// its time counts in the procedure's totals (recursion is not counted twice).
    pub outermost: bool,
}

#[derive(Clone, Copy, Debug)]
struct Open {
    kind: Kind,
    site: u64,
    ts: u64,
    cpu: u64,
}

#[derive(Clone, Copy, Debug)]
struct OpenActivation {
    procedure: usize,
    ts: u64,
    cpu: u64,
}

/// Where the scheduler has the thread, as far as its records tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sched {
    /// Nothing seen yet.
    Unknown,
    Running,
    /// Switched out in a sleeping state (waiting for an event).
    Sleeping,
    /// Runnable but not running since `since` (preempted, or woken), with the thread's
    /// CPU clock `cpu` then.
    Runnable {
        since: u64,
        cpu: u64,
    },
}

pub(crate) use crate::analysis::workclock::still_runnable;

/// Per-thread accounting, fed the thread's own records in timestamp order.
#[derive(Clone, Debug)]
pub(crate) struct ThreadAcc {
    pub tid: u32,
    /// 0 until a record names the thread's process.
    pub pid: u32,
    pub first_ts: u64,
    pub last_ts: u64,
    first_cpu: Option<u64>,
    /// The CPU clock where the thread's work starts to count
    /// ([`ThreadAcc::start_work_clock`]).
    work_from_cpu: Option<u64>,
    cpu: u64,
    /// MPI/PVM calls in progress, outermost first.
    calls: Vec<Open>,
    /// A futex wait outside MPI/PVM calls in progress.
    futex: Option<Open>,
    /// Where the last outermost poll that found nothing returned, until the thread's next
    /// record tells whether the time since was the polling loop's (blocked, as the
    /// analysis's work clock has it).
    poll_gap: Option<Open>,
    /// CPU time spent inside blocking intervals.
    cpu_blocked: u64,
    /// Wall time blocked, by [`Cause`].
    blocked: [u64; 4],
    sched: Sched,
    cpu_wait: u64,
    active: Vec<OpenActivation>,
    /// The thread's exit record was seen.
    pub exited: bool,
}

impl ThreadAcc {
    pub(super) fn new(tid: u32, ts: u64) -> Self {
        ThreadAcc {
            tid,
            pid: 0,
            first_ts: ts,
            last_ts: ts,
            first_cpu: None,
            work_from_cpu: None,
            cpu: 0,
            calls: Vec::new(),
            futex: None,
            poll_gap: None,
            cpu_blocked: 0,
            blocked: [0; 4],
            sched: Sched::Unknown,
            cpu_wait: 0,
            active: Vec::new(),
            exited: false,
        }
    }

    /// One of the thread's own records: its time, process (0 if the record does not
    /// know it) and CPU clock.
    pub(super) fn own(&mut self, ts: u64, pid: u32, cpu_ns: u64) {
        self.touch(ts);
        if pid != 0 {
            self.pid = pid;
        }
        self.first_cpu.get_or_insert(cpu_ns);
        self.cpu = self.cpu.max(cpu_ns);
    }

    /// The thread's work counts from CPU clock `cpu_ns` on; the first call decides.
    /// Until then it has none.
    pub(crate) fn start_work_clock(&mut self, cpu_ns: u64) {
        self.work_from_cpu.get_or_insert(cpu_ns);
    }

    fn touch(&mut self, ts: u64) {
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(ts);
    }

    /// CPU time while traced: the clock's advance from the first record to the latest.
    pub(super) fn cpu_ns(&self) -> u64 {
        self.first_cpu.map_or(0, |f| self.cpu.saturating_sub(f))
    }

    /// CPU time outside blocking intervals, from where the work clock started.
    pub(super) fn work_ns(&self) -> u64 {
        self.work_from_cpu.map_or(0, |f| {
            self.cpu.saturating_sub(f).saturating_sub(self.cpu_blocked)
        })
    }

    pub(crate) fn blocked_ns(&self, c: Cause) -> u64 {
        self.blocked[c.index()]
    }

    pub(super) fn cpu_wait_ns(&self) -> u64 {
        self.cpu_wait
    }

    // --- scheduling ---

    /// Another thread made this one runnable (a wakeup of a thread already running or
    /// runnable changes nothing).
    pub(crate) fn woken(&mut self, ts: u64) {
        if matches!(self.sched, Sched::Sleeping | Sched::Unknown) {
            self.touch(ts);
            // The clock stands where the thread last switched out.
            self.sched = Sched::Runnable {
                since: ts,
                cpu: self.cpu,
            };
        }
    }

    /// The thread left its CPU at `ts` with its CPU clock at `cpu` (exact at a switch).
    pub(crate) fn switch_out(&mut self, ts: u64, cpu: u64, prev_state: i64) {
        self.settle_missed_switch_in(ts, cpu);
        self.sched = if still_runnable(prev_state) {
            Sched::Runnable { since: ts, cpu }
        } else {
            Sched::Sleeping
        };
    }

    pub(crate) fn switch_in(&mut self, ts: u64) {
        if let Sched::Runnable { since, .. } = self.sched {
            self.cpu_wait += ts.saturating_sub(since);
        }
        self.sched = Sched::Running;
    }

    /// The thread made a record in its own context at `ts`, its CPU clock at `cpu`, so
    /// it is on a CPU.
    pub(super) fn ran(&mut self, ts: u64, cpu: u64) {
        self.settle_missed_switch_in(ts, cpu);
        self.sched = Sched::Running;
    }

    /// A record of the thread running while it was runnable: its switch-in was missed.
    /// This kernel does that now and then (about one switch in 300 under load, and
    /// `perf`'s sched_switch misses the same ones), so the wait it ended is recovered
    /// from the clock: the thread has run `cpu` less its clock when it became runnable
    /// since it got the CPU. Exact when `cpu` is a switch-out's; otherwise within the
    /// clock's bound on the kernel's count (a tick).
    fn settle_missed_switch_in(&mut self, ts: u64, cpu: u64) {
        if let Sched::Runnable { since, cpu: then } = self.sched {
            let switched_in = ts.saturating_sub(cpu.saturating_sub(then));
            self.cpu_wait += switched_in.saturating_sub(since);
        }
    }

    // --- blocking ---

    pub(super) fn call_enter(&mut self, id: u16, e: &CallRecord) {
        self.calls.push(Open {
            kind: Kind::Call(id),
            site: e.site,
            ts: e.header.ts_ns,
            cpu: e.header.cpu_ns,
        });
    }

    /// Calls the probes found returned without their exits: dropped, as the analyzer
    /// drops them (their blocking intervals are not known).
    pub(super) fn calls_unwound(&mut self, calls: u32) {
        drop_unwound(&mut self.calls, calls);
    }

    /// A call's exit; the outermost one ends a blocking interval. Exit records carry the
    /// call site; entry records did in recordings made before that (and still do for
    /// calls that can block).
    pub(super) fn call_exit(&mut self, x: &CallRecord) -> Option<Blocking> {
        let (ts, cpu) = (x.header.ts_ns, x.header.cpu_ns);
        // Paired by call id, as the analyzer pairs them: a missing exit or entry costs
        // that call alone (`pairing`).
        let exit_id = split_call_field(x.header.call).id;
        let mut open = close_call(&mut self.calls, exit_id, |c| match c.kind {
            Kind::Call(id) => id,
            Kind::Futex => u16::MAX,
        })?
        .entry;
        if !self.calls.is_empty() {
            return None; // a call made by the library itself
        }
        if x.site != 0 {
            open.site = x.site;
        }
        let Kind::Call(id) = open.kind else {
            return None;
        };
        // Creating a thread is work (the analysis's work clock agrees).
        if !calls::waits(id) {
            return None;
        }
        if calls::polled_nothing(id, x) {
            self.poll_gap = Some(Open { ts, cpu, ..open });
        }
        Some(self.close(open, ts, cpu))
    }

    /// The thread's record `r`, before it is accounted: after a poll that found nothing,
    /// it may tell that the time since was the polling loop's, hence blocked.
    pub(crate) fn settle_poll(&mut self, r: &Record) {
        let Some(gap) = self.poll_gap else {
            return;
        };
        let Some(went_on) = poll_loop_went_on(r, !self.calls.is_empty(), gap.cpu) else {
            return;
        };
        self.poll_gap = None;
        if went_on {
            self.close(gap, r.header().ts_ns, r.header().cpu_ns);
        }
    }

    /// A futex wait begins (only outside MPI/PVM calls: inside one it is the call's time;
    /// inside pthread_create, which is work, it is a wait of its own).
    pub(crate) fn futex_wait(&mut self, ts: u64, cpu: u64, site: u64) {
        let in_waiting_call = self
            .calls
            .iter()
            .any(|c| matches!(c.kind, Kind::Call(id) if calls::waits(id)));
        if !in_waiting_call {
            self.futex = Some(Open {
                kind: Kind::Futex,
                site,
                ts,
                cpu,
            });
        }
    }

    pub(crate) fn futex_exit(&mut self, ts: u64, cpu: u64) -> Option<Blocking> {
        let open = self.futex.take()?;
        Some(self.close(open, ts, cpu))
    }

    fn close(&mut self, open: Open, ts: u64, cpu: u64) -> Blocking {
        let wall_ns = ts.saturating_sub(open.ts);
        self.blocked[open.kind.cause().index()] += wall_ns;
        self.cpu_blocked += cpu.saturating_sub(open.cpu);
        Blocking {
            kind: open.kind,
            site: open.site,
            wall_ns,
        }
    }

    /// The thread ended (or the recording did): a call or futex wait still open counts
    /// as blocked up to the thread's last record. It did not complete, so it is not
    /// returned for the distributions.
    pub(super) fn end(&mut self) {
        let (ts, cpu) = (self.last_ts, self.cpu);
        if let Some(open) = self.calls.first().copied() {
            self.close(open, ts, cpu);
        }
        if let Some(open) = self.futex.take() {
            self.close(open, ts, cpu);
        }
        self.calls.clear();
        self.active.clear();
    }

    // --- selected procedures ---

    pub(super) fn enter(&mut self, procedure: usize, ts: u64, cpu: u64) {
        self.active.push(OpenActivation { procedure, ts, cpu });
    }

    /// A procedure returned; None if its entry was not seen (tracing began inside it).
    pub(super) fn exit(&mut self, procedure: usize, ts: u64, cpu: u64) -> Option<Activation> {
        let i = self.active.iter().rposition(|a| a.procedure == procedure)?;
        let a = self.active.remove(i);
        Some(Activation {
            procedure,
            wall_ns: ts.saturating_sub(a.ts),
            cpu_ns: cpu.saturating_sub(a.cpu),
            outermost: !self.active.iter().any(|b| b.procedure == procedure),
        })
    }
}
