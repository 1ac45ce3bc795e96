//! The layouts of the per-CPU scratch rooms (`maps::ARRAY_SCRATCH`, `maps::STACK_WORDS`):
//! the maps declare them and the probes fill them, so they live apart from both (the
//! maps would otherwise import the probes that import the maps).

use tracer_common::{EventHeader, ARRAY_CHUNK};

/// The largest status struct the chunked read of `emit_status_array` allows (Open MPI's
/// is 24 bytes, MPICH's 20).
pub const MAX_STATUS_BYTES: u32 = 32;
/// A chunk of statuses read at once, with room for the widest field at any offset below
/// 256.
pub const STATUS_CHUNK_BYTES: usize = 256 + 8;
const _: () = assert!(ARRAY_CHUNK * MAX_STATUS_BYTES as usize <= 256);

/// What an [`ArrayJob`] writes.
pub mod array_kind {
    /// `HandleArrayRecord`s of 4-byte elements.
    pub const HANDLES_4: u32 = 0;
    /// `HandleArrayRecord`s of 8-byte elements.
    pub const HANDLES_8: u32 = 1;
    /// `StatusArrayRecord`s, laid out as the job's flavor says.
    pub const STATUSES: u32 = 2;
    /// One `HandleArrayRecord` of 4-byte elements whose number is unknown
    /// (`CallLayout::array_unsized`): as many as can be read, up to a chunk.
    pub const UNSIZED_INTS: u32 = 3;
}

/// An array for `call_arrays` to write, left by a call program in its CPU's
/// [`ArrayScratch`] (a tail call stays on the CPU and keeps no registers).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ArrayJob {
    /// The call record's header: the array's records carry it with their own kind.
    pub header: EventHeader,
    /// The array's address in the traced process.
    pub base: u64,
    /// Its length in elements.
    pub total: u32,
    /// One of [`array_kind`].
    pub kind: u32,
    /// The call's flavor (`FLAVORS` index): the layout of a status.
    pub flavor: u32,
    pub _pad: u32,
}

/// A CPU's room for the array being written (`ARRAY_SCRATCH`).
#[repr(C)]
pub struct ArrayScratch {
    /// 1 from `stage_array` until `call_arrays` is done with `job` and `statuses`. A
    /// uprobe program can be preempted: another task's call on this CPU meanwhile finds
    /// the room taken and does without its array (counted), rather than overwrite ours.
    pub busy: u64,
    pub job: ArrayJob,
    /// A chunk of statuses read at once (`emit_status_array`).
    pub statuses: [u8; STATUS_CHUNK_BYTES],
}

/// 64-bit words of user stack scanned above the stack pointer for a call site (glibc's
/// condition-variable wait needs between 16 and 32).
pub const SCAN_WORDS: usize = 64;
