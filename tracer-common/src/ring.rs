//! Ring-only transport forms: records the probes write and userspace turns into the
//! recording records (`records`) before anything else sees them.

use crate::{EventHeader, FutexRecord, SwitchRecord};

// Short forms for the ring buffer. Writing a record costs the probe about as much per
// cache line it touches as everything else it does (docs/benchmarks.md, round 4), so
// the ring carries what a call's exit learns and not the fields that are always unset
// there; userspace rebuilds the whole records (`tracer_user::records::unpair`).

/// What a call's exit learns: its return value, what it wrote through the pointers its
/// entry kept, and its call site. The fields of a `CALL_EXIT` [`crate::CallRecord`] that
/// are not in the header or always unset at exit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallResult {
    pub handle: u64,
    pub bytes: i64,
    /// The return address, taken from the return probe's instruction pointer.
    pub site: u64,
    pub ret: i32,
    pub peer: i32,
    pub tag: i32,
    /// The CPU of the exit (a [`CallPairRecord`]'s header has the entry's).
    pub cpu: u32,
    /// The int the call wrote through its output pointer, [`crate::UNSET32`] when none.
    pub out: i32,
    pub _reserved: u32,
}

/// A call's exit: `CALL_EXIT` in short ([`crate::kind::CALL_RETURN`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallReturnRecord {
    pub header: EventHeader,
    pub result: CallResult,
}

/// A call that cannot block (`CallLayout::cannot_block`), whole. Its entry record waits
/// in the thread's state (`ThreadState::held`) and goes out with the exit: one
/// ring-buffer reservation per call instead of two. Any other record of the thread
/// between the two writes the entry on its own first, so a thread's records stay in
/// order. The header is the entry's, with `kind` [`crate::kind::CALL_PAIR`]; the entry's
/// other fields are the ones such a call sets (no `peer2`, `tag2`, `site`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallPairRecord {
    pub header: EventHeader,
    pub comm: u64,
    pub handle: u64,
    pub bytes: i64,
    pub peer: i32,
    pub tag: i32,
    pub count: i32,
    pub elem_size: i32,
    pub exit_ts_ns: u64,
    pub exit_cpu_ns: u64,
    pub result: CallResult,
}

/// A futex call that did not sleep, whole: as [`CallPairRecord`], for every futex call
/// whose enter record is still held at its exit (a wait that sleeps writes its enter
/// before its switch-out). `enter.header.kind` is [`crate::kind::FUTEX_PAIR`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FutexPairRecord {
    pub enter: FutexRecord,
    pub exit_ts_ns: u64,
    pub exit_cpu_ns: u64,
    pub ret: i64,
    pub exit_cpu: u32,
    pub _reserved: u32,
}

/// A CPU going from one traced thread to another, whole: the `SWITCH_OUT` of the thread
/// that leaves and the `SWITCH_IN` of the one that comes, which share the stamp and the
/// CPU. Oversubscribed ranks switch among themselves tens of thousands of times a second
/// (docs/benchmarks.md, issue 22): one reservation and one slot instead of two.
/// `out.header.kind` is [`crate::kind::SWITCH_PAIR`]; a switch to or from a thread we do
/// not trace is still one `SWITCH_OUT` or `SWITCH_IN`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchPairRecord {
    pub out: SwitchRecord,
    /// The CPU time of the thread that comes, by its clock.
    pub in_cpu_ns: u64,
    pub in_tgid: u32,
    pub in_tid: u32,
}

/// Bytes of user stack, from the stack pointer up, the sampler copies for the unwinder: 16
/// KiB, a power of two (the probe masks offsets with it). perf's `--call-graph dwarf`
/// copies 8 KiB by default, which ran out in 2-3 % of an Open MPI job's samples
/// (`mpirun`'s start-up and the ranks' `MPI_Init` keep deeper stacks; docs/sampling.md).
pub const SAMPLE_STACK_BYTES: usize = 16384;

/// What the sampler's probe writes (ring only, kind [`crate::kind::RAW_SAMPLE`]): the
/// interrupted thread's user registers the unwinder starts from and the top of its user
/// stack. `tracer record` unwinds it into a [`crate::SampleRecord`] as it reads the ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSampleRecord {
    /// The thread's header, as [`crate::SampleRecord::header`] (`kind` = RAW_SAMPLE).
    pub header: EventHeader,
    /// User instruction pointer, stack pointer and frame pointer (rip, rsp, rbp).
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// Bytes of `stack` copied from `sp` up; 0 when the registers could not be read.
    pub stack_len: u32,
    pub _reserved: u32,
    pub stack: [u8; SAMPLE_STACK_BYTES],
}
