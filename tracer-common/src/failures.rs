//! Why a probe could not write a record or finish a step: the index of a per-CPU counter
//! in the probes' `FAILURES` map, which userspace sums over the CPUs and reports next to
//! the lost records.

/// A probe's failure, by reason. The probes count each in `FAILURES` at this index; the
/// numbers are not in recordings (they hold the names), but keep them stable all the
/// same: a retired reason stays a gap.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeFailure {
    /// No room for a record in the ring buffer: the record is lost (the lost-records
    /// count is this counter).
    RingFull = 0,
    /// A read of the traced program's memory failed (a page not present, a bad pointer):
    /// the record goes out with that field unset.
    UserRead = 1,
    /// A tracepoint's field could not be read: the event's record is not written.
    TracepointField = 2,
    /// A map was full (the traced set, the threads' states): a process or thread goes
    /// untraced.
    MapInsert = 3,
    /// A call nested deeper than `MAX_CALL_DEPTH` in probed calls: its exit record is not
    /// written.
    CallTooDeep = 4,
    /// A held process could not be stopped (at exec or after dlopen): it may run before
    /// userspace probed what it needs.
    Signal = 5,
    /// A call's array (handles, ranks, statuses) could not be handed to the program that
    /// writes it: its records are not written.
    TailCall = 6,
    /// Counted by userspace, not by a probe: a held process was let go at the hold's
    /// deadline before userspace had probed what it needs; its first calls may be
    /// missing.
    HoldExpired = 7,
    /// A call returned without its exit probe (a return probe attached while the
    /// thread was inside the call, a longjmp out of it): its end is not known, and the
    /// probes dropped it from the thread's calls (`CALLS_UNWOUND`).
    ExitMissed = 8,
    /// Counted by userspace, not by a probe: a record the tracer read but dropped, its
    /// memory being over `--memory-limit-mib`. A lost record, as `RingFull`'s are.
    MemoryLimit = 9,
    /// Counted by a collector, not by a probe: another node's link failed before that
    /// node's session ended (one per node): what the node traced after is missing.
    NodeLost = 10,
    /// Counted by a collector, not by a probe: a record of another node that came after
    /// the merge had handed on later records (the node lagged more than the merge
    /// waits): it reached the analysis out of time order.
    NodeLate = 11,
}

impl ProbeFailure {
    /// Entries of the `FAILURES` map.
    pub const COUNT: u32 = 12;
    /// Every reason, by index.
    pub const ALL: [ProbeFailure; Self::COUNT as usize] = [
        ProbeFailure::RingFull,
        ProbeFailure::UserRead,
        ProbeFailure::TracepointField,
        ProbeFailure::MapInsert,
        ProbeFailure::CallTooDeep,
        ProbeFailure::Signal,
        ProbeFailure::TailCall,
        ProbeFailure::HoldExpired,
        ProbeFailure::ExitMissed,
        ProbeFailure::MemoryLimit,
        ProbeFailure::NodeLost,
        ProbeFailure::NodeLate,
    ];

    /// The counter's index in `FAILURES`.
    pub const fn index(self) -> u32 {
        self as u32
    }

    /// The reason with counter `index`.
    pub const fn from_index(index: u32) -> Option<Self> {
        if index < Self::COUNT {
            Some(Self::ALL[index as usize])
        } else {
            None
        }
    }

    /// The reason's name in summaries and recordings.
    pub const fn name(self) -> &'static str {
        match self {
            ProbeFailure::RingFull => "ring_full",
            ProbeFailure::UserRead => "user_read",
            ProbeFailure::TracepointField => "tracepoint_field",
            ProbeFailure::MapInsert => "map_insert",
            ProbeFailure::CallTooDeep => "call_too_deep",
            ProbeFailure::Signal => "signal",
            ProbeFailure::TailCall => "tail_call",
            ProbeFailure::HoldExpired => "hold_expired",
            ProbeFailure::ExitMissed => "exit_missed",
            ProbeFailure::MemoryLimit => "memory_limit",
            ProbeFailure::NodeLost => "node_lost",
            ProbeFailure::NodeLate => "node_late",
        }
    }
}

// Every reason is at its own index in `ALL` (what `from_index` relies on).
const _: () = {
    let mut i = 0;
    while i < ProbeFailure::ALL.len() {
        assert!(ProbeFailure::ALL[i] as usize == i);
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_reasons_are_at_their_index_with_distinct_names() {
        for (i, f) in ProbeFailure::ALL.iter().enumerate() {
            assert_eq!(f.index() as usize, i);
            assert_eq!(ProbeFailure::from_index(i as u32), Some(*f));
            for g in &ProbeFailure::ALL[i + 1..] {
                assert_ne!(f.name(), g.name());
            }
        }
        assert_eq!(ProbeFailure::from_index(ProbeFailure::COUNT), None);
        assert_eq!(ProbeFailure::RingFull.name(), "ring_full");
    }
}
