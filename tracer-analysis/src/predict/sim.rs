//! The simulation model both what-if replays drive, the offline one (`replay.rs`, over a
//! whole recorded graph) and the online one (`online.rs`, over the steps known so far):
//! what a thread does between two events ([`Shape`], [`held_time`]), the phases it goes
//! through on its way to the next one ([`Phase`]), its share of a CPU ([`rate`]), when a
//! polling thread notices what it waited for ([`notice_delay`]), and whether a CPU set
//! keeps the other work of the machine ([`keeps_other_work`]). One model, so that both
//! replays predict the same times for the same steps.

use std::collections::BTreeSet;

use tracer_common::kind;

use super::placement::CpuSet;
use crate::analysis::workclock::HELD;
use crate::analysis::Clocks;
use crate::format::calls::split_call_field;

/// What a thread did between two of its events, as the replay takes it: `work` needs a
/// CPU; `held` passes as it did while the thread keeps its claim on a CPU (it was
/// runnable while its CPU ran work outside the program, or it polled inside a call
/// that waited for nothing traced); `off` passes as it did; and each dependency's
/// latency follows.
pub(super) struct Shape {
    pub work: f64,
    /// Held back by other work on the machine (kept where the placement leaves the
    /// process on the CPUs it ran on: see [`keeps_other_work`]).
    pub other: f64,
    /// Spinning in a call that waited for nothing traced (always kept).
    pub spun: f64,
    pub off: f64,
    /// Off CPU in the replay but runnable in the recording: the time a thread that does
    /// not poll was runnable inside a call that waited for nothing traced, behind other
    /// work or behind the program's own threads (kept, off CPU, only where the CPU set
    /// is shared as recorded, see [`keeps_other_work`]). Carried into every placement,
    /// it was half of what the CG-shaped program's 4 ranks recorded on 2 CPUs were
    /// predicted to take on one (226 of 464 ms). It stays off CPU: a held thread claims
    /// a share of its CPU set in the replay, and a yielding rank's claim there slowed
    /// the ranks beside it twice (the pipeline of
    /// `replay_of_a_pipeline_on_two_shared_cpus_reproduces_the_run`, 2.6 % long).
    pub other_off: f64,
    /// Time inside blocking calls before the event: awake (on CPU or asleep), held back
    /// by other work on the machine, and runnable but preempted by the program's own
    /// threads (CPU contention the replay works out anew).
    awake_blocked: u64,
    held_blocked: u64,
    runnable_blocked: u64,
    polls: bool,
}

impl Shape {
    /// From the recorded elapsed time between the events, the clocks of the thread over
    /// that time, the recorded latency of each dependency (the target's time minus the
    /// source's), and whether the event ends an MPI/PVM call of a process that polls.
    /// `setup`: the event ends a setup call (MPI_Init), whose wait is for the launcher:
    /// all its unexplained time is kept whatever the placement, as it was recorded.
    pub(super) fn new(
        elapsed: u64,
        c: &Clocks,
        latencies: &[u64],
        polls: bool,
        setup: bool,
    ) -> Shape {
        let [work, awake, outside, held] = c.work;
        let work = work.min(elapsed);
        let outside = outside.clamp(work, elapsed);
        let awake = awake.clamp(work, outside);
        // Runnable while its CPU ran other work: kept as it was.
        let held = held.min(outside - awake);
        let blocked = elapsed - outside;
        let awake_blocked = c.raw[1].saturating_sub(c.work[1]).min(blocked);
        let held_blocked = c.raw[HELD]
            .saturating_sub(c.work[HELD])
            .min(blocked - awake_blocked);
        // The waiting thread arrived `blocked` before its event; a source that happened
        // after that arrival is what it waited for.
        let waited = latencies.iter().any(|&l| l <= blocked);
        // Time in a blocking call that no source explains (a rendezvous send waiting for
        // its receiver, MPI_Init waiting for the launcher) passes as it did, all of it:
        // what it waited for is not in the graph. A polling process spins through it.
        // The part of it the thread was held back by other work on the machine is held
        // time like any other, kept only where the placement keeps that work: a yielding
        // Open MPI rank on a machine busy with other jobs (4 ranks of an NPB-CG-shaped
        // program on 2 CPUs beside two compilers) spent about three quarters of its
        // unexplained time behind them, and carrying that into a placement that drops
        // the other work predicted 933 ms for a 379 ms run.
        let (unexplained, unexplained_held) = if waited {
            (0, 0)
        } else if setup {
            (blocked, 0)
        } else {
            (blocked - held_blocked, held_blocked)
        };
        // A thread that does not poll was runnable behind the program's own threads for
        // part of such a call: a hand-off of the CPU (see [`Shape::handoff`]), kept, as
        // the held part, only where the CPU set is shared as recorded.
        let unexplained_runnable = if waited || setup {
            0
        } else {
            blocked - awake_blocked - held_blocked
        };
        let (spun, off, other, other_off) = if polls {
            (unexplained, awake - work, held + unexplained_held, 0)
        } else {
            (
                0,
                awake - work + unexplained - unexplained_runnable,
                held,
                unexplained_held + unexplained_runnable,
            )
        };
        Shape {
            work: work as f64,
            other: other as f64,
            spun: spun as f64,
            off: off as f64,
            other_off: other_off as f64,
            awake_blocked,
            held_blocked,
            runnable_blocked: blocked - awake_blocked - held_blocked,
            polls,
        }
    }

    /// The latency of a dependency recorded at `latency`: all of it if the thread waited
    /// for it, else no more than the call took after the thread arrived; without the
    /// time the waiting thread was preempted by the program's own threads.
    pub(super) fn latency(&self, latency: u64) -> f64 {
        latency
            .saturating_sub(self.runnable_blocked)
            .min(self.awake_blocked + self.held_blocked) as f64
    }

    /// The part of [`Shape::latency`] the waiting thread was held back by other work on
    /// the machine (kept only where the placement keeps that work, as held time is):
    /// the recording cannot tell when in the wait that happened, so, as for the time
    /// the program's own threads preempted it, it is taken to have delayed the event.
    pub(super) fn latency_held(&self, latency: u64) -> f64 {
        let free = latency
            .saturating_sub(self.runnable_blocked + self.held_blocked)
            .min(self.awake_blocked) as f64;
        self.latency(latency) - free
    }

    /// The hand-off of the CPU a thread that does not poll waited for after what it
    /// waited for had happened: the time it was runnable behind the program's own
    /// threads then, which [`Shape::latency`] leaves out. The replay shares a CPU
    /// equally at every instant, so such a thread would get its share at once; the
    /// scheduler gives it the CPU only when the thread running there yields, blocks or
    /// ends its slice. Open MPI ranks that yield while they wait (4 ranks of an
    /// NPB-CG-shaped program on 2 CPUs, 3,000 allreduces and 3,000 exchanges) waited so
    /// after most of their exchanges; without it the replay of the placement they ran
    /// under was 0.7 to 11 % short (12 recordings), with it within 1 %. It is kept where
    /// the CPU set is shared as it was recorded ([`keeps_other_work`]): who hands the CPU
    /// over, and when, depends on who shares it; in another placement the replay shares
    /// it equally. (Kept with every rank moved onto one CPU, the recorded hand-offs of
    /// two CPUs predicted 443 to 569 ms for runs that took 233 to 301 ms.) (A polling
    /// thread's hand-off is [`notice_delay`].)
    pub(super) fn handoff(&self, latency: u64) -> f64 {
        if self.polls {
            return 0.0;
        }
        let with = latency.min(self.awake_blocked + self.held_blocked + self.runnable_blocked);
        (with as f64 - self.latency(latency)).max(0.0)
    }
}

/// Whether a process ran only on CPUs of its placed set (`ran_on`, all within it; a
/// process not seen running yet has not left it).
fn ran_within(placed: &CpuSet, ran_on: Option<&BTreeSet<u32>>) -> bool {
    placed.node.is_empty() && ran_on.is_none_or(|r| placed.cpus.is_superset(r))
}

/// Whether the processes placed on one CPU set keep the time other work on the machine
/// held them back: when every one of them ran within that set, i.e. the set is shared as
/// it was recorded, with the other work that ran there. A set that gains a process from
/// elsewhere, and a process moved elsewhere, are assumed to find their CPUs free of
/// other work: a prediction for another placement is one for a machine running only
/// the program.
pub(super) fn keeps_other_work<'a>(
    placed: Option<&CpuSet>,
    members_ran_on: impl IntoIterator<Item = Option<&'a BTreeSet<u32>>>,
) -> bool {
    placed.is_some_and(|p| members_ran_on.into_iter().all(|r| ran_within(p, r)))
}

/// Time a thread is held before its event: the time it spun in a call that waited for
/// nothing traced, and the time other work on the machine held it back when its CPU
/// set keeps that work (`keep_other`, see [`keeps_other_work`]).
pub(super) fn held_time(spun: f64, other: f64, keep_other: bool) -> f64 {
    spun + if keep_other { other } else { 0.0 }
}

/// Time a thread is off CPU before its event: its time asleep and unexplained, and the
/// time other work held it back inside an unexplained call where its CPU set keeps that
/// work (see [`Shape::other_off`]).
pub(super) fn off_time(off: f64, other_off: f64, keep_other: bool) -> f64 {
    off + if keep_other { other_off } else { 0.0 }
}

/// Above this many bytes Open MPI sends a message by rendezvous (its shared-memory
/// transport's eager limit): the sender announces it, the receiver answers, and only
/// then does the data move. MPICH (over UCX here) is given none: with 64 KiB messages
/// between two polling ranks on one CPU its receives complete as soon after the send as
/// small messages do (about 2 ms, one hand-off of the CPU), Open MPI's about 2 to 4 ms
/// later.
pub(crate) const OPEN_MPI_EAGER_LIMIT_BYTES: u64 = 4096;

/// How much later than its dependencies are met a polling thread (`spins`) notices
/// them, on a CPU set with more runnable threads than CPUs (`busy`): it sees them when it
/// next gets a CPU, half a time slice later on average. A rendezvous message whose
/// sender shares that CPU set (`rendezvous_beside`) costs a whole slice more: the
/// receiver answers the sender's announcement and keeps the CPU, polling for the data,
/// until its slice ends; only then does the sender see the answer and move the data.
pub(super) fn notice_delay(slice_ns: f64, busy: bool, spins: bool, rendezvous_beside: bool) -> f64 {
    match (busy && spins, rendezvous_beside) {
        (false, _) => 0.0,
        (true, false) => slice_ns / 2.0,
        (true, true) => slice_ns * 1.5,
    }
}

/// Whether a message of `bytes` (None: not a message; Some(None): size unknown)
/// received by the call whose exit is labelled `receive_label` waits for its sender
/// after the receiver answered (see [`OPEN_MPI_EAGER_LIMIT_BYTES`]).
pub(super) fn is_rendezvous(receive_label: u32, bytes: Option<Option<u64>>) -> bool {
    let flavor = split_call_field(receive_label as u16).flavor;
    is_mpi_or_pvm_exit(receive_label)
        && flavor == crate::format::calls::Flavor::OpenMpi.id()
        && matches!(bytes, Some(Some(b)) if b > OPEN_MPI_EAGER_LIMIT_BYTES)
}

/// What the transport itself costs: per message size class, the least latency a message
/// of that class had in the recording when its receiver was waiting for it. A receiver
/// that arrived later found its message there, and its latency is only what its call
/// still took.
///
/// A recorded latency is that cost plus the time the receiver took to notice, which is
/// scheduling: the CPU sharing the run had (a rank yielding on one CPU while its
/// partner, on the other, held its message). Where the receiver's CPU set is shared as
/// recorded, the replay keeps it; elsewhere it works the sharing out anew, and a message
/// costs no more than its class's least latency. NPB-CG-shaped, 4 ranks on 2 CPUs
/// predicted on one: the recorded latencies put 159 ms of messages on a 283 ms path,
/// where a run pinned to one CPU took 236 ms; with this, 242 ms (docs/whatif.md).
#[derive(Clone, Debug)]
pub(super) struct Transport {
    least: [f64; 65],
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            least: [f64::INFINITY; 65],
        }
    }
}

impl Transport {
    /// A message's size class: 0 for no or unknown bytes, else 1 + log2 of its size,
    /// rounded down.
    pub(super) fn class(bytes: Option<u64>) -> u32 {
        match bytes {
            None | Some(0) => 0,
            Some(b) => 64 - b.leading_zeros(),
        }
    }

    /// A message of `class` whose receiver was waiting took `latency`.
    pub(super) fn note(&mut self, class: u32, latency: f64) {
        let least = &mut self.least[class as usize];
        *least = least.min(latency);
    }

    /// The latency of a dependency recorded at `recorded` (of a message of `class`, or
    /// None for another dependency) whose receiver's CPU set is shared as recorded
    /// (`keep`) or not.
    pub(super) fn latency(&self, class: Option<u32>, recorded: f64, keep: bool) -> f64 {
        match class {
            Some(class) if !keep => recorded.min(self.least[class as usize]),
            _ => recorded,
        }
    }
}

/// The time slice a thread runs before a thread waiting for the same CPU gets it: the
/// scheduler tick on this kernel (CONFIG_HZ=250, and the slice EEVDF gives a task on 2
/// CPUs, 1.5 ms, ends at the next tick).
pub const DEFAULT_SLICE_NS: f64 = 4e6;

/// Whether a vertex label is the exit of an MPI/PVM setup call (MPI_Init: it waits for
/// the launcher, not for the program).
pub(super) fn is_setup_exit(label: u32) -> bool {
    is_mpi_or_pvm_exit(label) && !super::communication_call(split_call_field(label as u16).id)
}

/// Whether a vertex label is the exit of an MPI/PVM call.
pub(super) fn is_mpi_or_pvm_exit(label: u32) -> bool {
    let (k, field) = ((label >> 16) as u16, label as u16);
    k == kind::CALL_EXIT && crate::format::calls::is_mpi_or_pvm(split_call_field(field).id)
}

/// Where a thread is on its way to its next event, in both replays (offline and
/// online): work needing a CPU, then time held (passing as it did while the thread
/// keeps its claim on a CPU), then time off, then the wait for the event's
/// dependencies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Phase {
    /// Waiting for its next step to be known (online only).
    Idle,
    /// CPU work left.
    Work(f64),
    /// Held until this time.
    Held(f64),
    /// Off CPU until this time.
    Off(f64),
    /// Waiting for the dependencies of the next event.
    Wait,
    Done,
}

/// Work left below a picosecond is rounding.
const EPS: f64 = 1e-3;

impl Phase {
    /// The first phase of a step of `work`, `held` and `off` begun at `t`.
    pub(super) fn start(work: f64, held: f64, off: f64, t: f64) -> Phase {
        if work > 0.0 {
            Phase::Work(work)
        } else {
            Phase::after_work(held, off, t)
        }
    }

    fn after_work(held: f64, off: f64, t: f64) -> Phase {
        if held > 0.0 {
            Phase::Held(t + held)
        } else if off > 0.0 {
            Phase::Off(t + off)
        } else {
            Phase::Wait
        }
    }

    /// The phase after this one if it has ended by `t` (None if it goes on, or it is
    /// the wait, which the caller settles).
    pub(super) fn ended(self, held: f64, off: f64, t: f64) -> Option<Phase> {
        match self {
            Phase::Work(left) if left <= EPS => Some(Phase::after_work(held, off, t)),
            Phase::Held(until) if until <= t => Some(if off > 0.0 {
                Phase::Off(t + off)
            } else {
                Phase::Wait
            }),
            Phase::Off(until) if until <= t => Some(Phase::Wait),
            _ => None,
        }
    }

    /// Whether the thread claims a CPU (`spins`: it polls while it waits).
    pub(super) fn runnable(self, spins: bool) -> bool {
        match self {
            Phase::Work(_) | Phase::Held(_) => true,
            Phase::Wait => spins,
            _ => false,
        }
    }

    /// When this phase ends at the latest, at `rate` of a CPU from `t` (None for the wait
    /// and the phases that have no end of their own).
    pub(super) fn end(self, t: f64, rate: f64) -> Option<f64> {
        match self {
            Phase::Work(left) => Some(t + left / rate),
            Phase::Held(until) | Phase::Off(until) => Some(until),
            _ => None,
        }
    }

    /// `dt` passed at `rate` of a CPU.
    pub(super) fn advance(&mut self, dt: f64, rate: f64) {
        if let Phase::Work(left) = self {
            *left -= dt * rate;
        }
    }
}

/// Each thread's share of a CPU: the `capacity` CPUs of a set shared equally among the
/// `load` threads that claim them (processor sharing), at most one CPU each.
pub(super) fn rate(capacity: f64, load: usize) -> f64 {
    if load > 0 {
        (capacity / load as f64).min(1.0)
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::{call, kind};

    /// 1000 ns between two events: 100 of work, then 900 inside a blocking call, of
    /// which 100 on CPU, 300 held back by other work and 500 runnable behind the
    /// program's own threads.
    fn blocked_step(latency: u64, polls: bool) -> Shape {
        let c = Clocks {
            work: [100, 100, 100, 0],
            raw: [200, 200, 1000, 300],
        };
        Shape::new(1000, &c, &[latency], polls, false)
    }

    #[test]
    fn a_wait_keeps_its_hand_off_and_its_held_time_apart() {
        // The source came 600 ns before the event (the thread had waited 300 ns for it).
        let s = blocked_step(600, false);
        assert_eq!(s.latency(600), 100.0, "without the program's preemption");
        assert_eq!(s.latency_held(600), 100.0, "of which held by other work");
        assert_eq!(
            s.handoff(600),
            500.0,
            "runnable behind the program's threads"
        );
        // Kept, held and handed off: the recorded 600 ns again.
        assert_eq!(s.latency(600) + s.handoff(600), 600.0);
        // A polling thread's hand-off is the notice delay.
        assert_eq!(blocked_step(600, true).handoff(600), 0.0);
    }

    #[test]
    fn unexplained_blocked_time_held_by_other_work_is_held_time() {
        // The source came before the thread arrived: nothing explains the 900 ns.
        let s = blocked_step(950, false);
        assert_eq!(
            s.other_off, 800.0,
            "behind other work or the program's threads: kept where the set is as recorded"
        );
        assert_eq!(s.other, 0.0, "off CPU: no claim on one");
        assert_eq!(s.off, 100.0, "on CPU: kept");
        let p = blocked_step(950, true);
        assert_eq!((p.spun, p.other, p.off), (600.0, 300.0, 0.0));
    }

    #[test]
    fn a_rendezvous_beside_its_sender_is_noticed_a_slice_later() {
        let slice = DEFAULT_SLICE_NS;
        assert_eq!(
            notice_delay(slice, false, true, true),
            0.0,
            "a CPU to spare"
        );
        assert_eq!(notice_delay(slice, true, false, true), 0.0, "asleep: woken");
        assert_eq!(notice_delay(slice, true, true, false), slice / 2.0);
        assert_eq!(notice_delay(slice, true, true, true), 1.5 * slice);
    }

    #[test]
    fn only_open_mpi_messages_above_its_eager_limit_go_by_rendezvous() {
        let recv_exit = |flavor: u8| {
            ((kind::CALL_EXIT as u32) << 16) | ((flavor as u32) << 8) | call::MPI_RECV as u32
        };
        let open_mpi = recv_exit(crate::format::calls::Flavor::OpenMpi.id());
        let mpich = recv_exit(crate::format::calls::Flavor::Mpich.id());
        let big = Some(Some(OPEN_MPI_EAGER_LIMIT_BYTES + 1));
        assert!(is_rendezvous(open_mpi, big));
        assert!(!is_rendezvous(
            open_mpi,
            Some(Some(OPEN_MPI_EAGER_LIMIT_BYTES))
        ));
        assert!(!is_rendezvous(open_mpi, Some(None)), "size unknown");
        assert!(!is_rendezvous(open_mpi, None), "not a message");
        assert!(!is_rendezvous(mpich, big));
    }
}
