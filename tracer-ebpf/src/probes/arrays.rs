//! The arrays a call passes or fills (request handles, ranks, task ids, statuses), written
//! by a program of their own that the call programs reach by tail call, as their last step.
//! Inside the call programs, the verifier walked the loop over an array's chunks once for
//! every state a call program could reach it in: 0.38 M instructions and 0.7 s for the
//! entry program alone, most of a session's start-up. On its own it is walked once.

use super::uprobe_twins;
use crate::{
    emit::reserve,
    maps::{count_failure, ARRAY_PROGS, ARRAY_SCRATCH, FLAVORS},
    mem::{copy_of, copy_words, probe_user_prefix, read_user_prefix},
    probes::status::emit_status_chunk,
    scratch::{array_kind, ArrayJob},
};
use aya_ebpf::{helpers::generated::bpf_loop, programs::ProbeContext, EbpfContext};
use core::ptr::{read_volatile, write_volatile};
use tracer_common::{
    kind, EventHeader, HandleArrayRecord, ProbeFailure, ThreadState, ARRAY_CHUNK, ARRAY_MAX_CHUNKS,
};

/// What a call program does after its `try_*` function.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AfterCall {
    Done,
    /// An array is staged: end in [`write_array`].
    WriteArray,
}

/// Leaves `job` for `call_arrays`. Without room (counted as `ProbeFailure::TailCall`)
/// the array is not written.
pub fn stage_array(job: &ArrayJob) -> AfterCall {
    let Some(scratch) = ARRAY_SCRATCH.get_ptr_mut(0) else {
        count_failure(ProbeFailure::TailCall);
        return AfterCall::Done;
    };
    // SAFETY: a per-CPU map value, used by this CPU's programs only, one at a time
    // (`busy`); volatile, so that the mark is written before the job.
    unsafe {
        if read_volatile(&(*scratch).busy) != 0 {
            count_failure(ProbeFailure::TailCall);
            return AfterCall::Done;
        }
        write_volatile(&mut (*scratch).busy, 1);
        copy_words(&mut (*scratch).job, job);
    }
    AfterCall::WriteArray
}

/// Runs `call_arrays` on the staged job: on success the calling program ends here. The
/// verifier allows a tail call only in a function that returns an int, so this is inlined
/// into the program's entry ([`uprobe_twins`]'s bodies are).
#[inline(always)]
pub fn write_array<C: EbpfContext>(ctx: &C) {
    // SAFETY: `ctx` is this program's context.
    unsafe { ARRAY_PROGS.tail_call(ctx, 0) };
    // Still here: the tail call failed.
    count_failure(ProbeFailure::TailCall);
    release_scratch();
}

fn release_scratch() {
    if let Some(scratch) = ARRAY_SCRATCH.get_ptr_mut(0) {
        // SAFETY: as in `stage_array`.
        unsafe { write_volatile(&mut (*scratch).busy, 0) };
    }
}

uprobe_twins!(uprobe call_arrays, call_arrays_m => call_arrays_body);

fn call_arrays_body(_ctx: &ProbeContext) {
    let Some(scratch) = ARRAY_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's room, held (`busy`) since the call program staged the job.
    let scratch = unsafe { &mut *scratch };
    let job = &scratch.job;
    match job.kind {
        array_kind::UNSIZED_INTS => emit_unsized_ints(&job.header, job.base),
        // A chunk per `bpf_loop` call: the verifier walks the chunk's code once, where
        // an unrolled loop over the chunks had it walk every copy (47,766 instructions
        // verified at every start).
        _ => unsafe {
            bpf_loop(
                ARRAY_MAX_CHUNKS,
                staged_chunk as *mut core::ffi::c_void,
                core::ptr::null_mut(),
                0,
            );
        },
    }
    // SAFETY: as in `stage_array`.
    unsafe { write_volatile(&mut scratch.busy, 0) };
}

/// `bpf_loop` callback: writes chunk `chunk` of the array staged in this CPU's
/// `ARRAY_SCRATCH`; 1 (the loop ends) when the array has no more chunks.
#[inline(never)]
extern "C" fn staged_chunk(chunk: u64, _ctx: *mut core::ffi::c_void) -> i64 {
    let Some(scratch) = ARRAY_SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: as in `call_arrays_body`, which is waiting for this loop.
    let scratch = unsafe { &mut *scratch };
    let job = &scratch.job;
    let chunk = chunk as u32;
    let more = match job.kind {
        array_kind::HANDLES_4 => emit_handle_chunk(&job.header, job.base, job.total, 4, 0, chunk),
        array_kind::HANDLES_8 => emit_handle_chunk(&job.header, job.base, job.total, 8, 0, chunk),
        array_kind::STATUSES => match FLAVORS.get(job.flavor) {
            Some(flavor) => emit_status_chunk(
                &job.header,
                job.base,
                job.total,
                flavor,
                &mut scratch.statuses,
                chunk,
            ),
            None => false,
        },
        _ => false,
    };
    if more {
        0
    } else {
        1
    }
}

static NO_WORDS: [u32; ARRAY_CHUNK] = [0; ARRAY_CHUNK];
static NO_VALUES: [u64; ARRAY_CHUNK] = [0; ARRAY_CHUNK];

/// The array's `HandleArrayRecord`s, a chunk each (elements of `elem` bytes, widened),
/// built in place: the call exit program, which writes the array of Waitsome/Testsome
/// itself, has no stack left for a record. `after` is how many elements this probe hit
/// wrote before, in another array (a Testsome's tested requests before its indices): the
/// records number their elements on from there, so that userspace, which puts the
/// records of one hit in order by `first`, reads the arrays in the order written.
pub fn emit_handle_array(h: &EventHeader, base: u64, total: u32, elem: u32, after: u32) {
    let mut array = HandleArray {
        header: h,
        base,
        total,
        elem,
        after,
    };
    // A chunk per `bpf_loop` call, as in `call_arrays_body`.
    unsafe {
        bpf_loop(
            ARRAY_MAX_CHUNKS,
            handle_chunk as *mut core::ffi::c_void,
            &mut array as *mut HandleArray as *mut core::ffi::c_void,
            0,
        )
    };
}

/// The arguments of [`emit_handle_array`], for its `bpf_loop` callback.
#[repr(C)]
struct HandleArray {
    header: *const EventHeader,
    base: u64,
    total: u32,
    elem: u32,
    after: u32,
}

/// `bpf_loop` callback: chunk `chunk` of the [`HandleArray`] at `ctx`; 1 (the loop ends)
/// when the array has no more chunks.
#[inline(never)]
extern "C" fn handle_chunk(chunk: u64, ctx: *mut core::ffi::c_void) -> i64 {
    // SAFETY: `emit_handle_array` passes its `HandleArray`, and waits for the loop.
    let a = unsafe { &*(ctx as *const HandleArray) };
    let h = unsafe { &*a.header };
    if emit_handle_chunk(h, a.base, a.total, a.elem, a.after, chunk as u32) {
        0
    } else {
        1
    }
}

/// Chunk `chunk` of the array [`emit_handle_array`] writes; false when there is no such
/// chunk (or no room for it).
fn emit_handle_chunk(
    h: &EventHeader,
    base: u64,
    total: u32,
    elem: u32,
    after: u32,
    chunk: u32,
) -> bool {
    let first = chunk * ARRAY_CHUNK as u32;
    if chunk >= ARRAY_MAX_CHUNKS || first >= total {
        return false;
    }
    let Some(mut place) = reserve::<HandleArrayRecord>() else {
        return false;
    };
    let r = place.record();
    copy_words(&mut r.header, h);
    r.header.kind = kind::HANDLE_ARRAY;
    r.first = after + first;
    r.total = after + total;
    read_chunk(
        &mut r.values,
        base + elem as u64 * first as u64,
        total - first,
        elem,
    );
    place.submit();
    true
}

/// A chunk of ints at `base` whose array's length is unknown (`CallLayout::array_unsized`),
/// in one `HandleArrayRecord` whose `total` says how many were read: the whole chunk, or,
/// when its end is not mapped, the ints up to the end of `base`'s page. The array's first
/// element is mapped, hence its whole page; an array going on past that page would have
/// the next page mapped, so a failed whole read means the array ends in the first page
/// and nothing of it is lost.
fn emit_unsized_ints(h: &EventHeader, base: u64) {
    const CHUNK_BYTES: u32 = 4 * ARRAY_CHUNK as u32;
    let Some(mut place) = reserve::<HandleArrayRecord>() else {
        return;
    };
    let r = place.record();
    copy_words(&mut r.header, h);
    r.header.kind = kind::HANDLE_ARRAY;
    r.first = 0;
    copy_words(&mut r.values, &NO_VALUES);
    let mut words = copy_of(&NO_WORDS);
    let in_page = 4096 - (base & 4095) as u32;
    let read = if probe_user_prefix(&mut words, base, CHUNK_BYTES) {
        CHUNK_BYTES
    } else if read_user_prefix(&mut words, base, in_page) {
        in_page.min(CHUNK_BYTES)
    } else {
        0
    };
    r.total = read / 4;
    for j in 0..ARRAY_CHUNK {
        r.values[j] = words[j] as u64;
    }
    place.submit();
}

/// Up to a chunk of `left` elements of `elem` bytes (4 or 8) at `addr`, widened, in one
/// read; the values past the array's end are zero.
pub fn read_chunk(values: &mut [u64; ARRAY_CHUNK], addr: u64, left: u32, elem: u32) {
    copy_words(values, &NO_VALUES);
    if elem == 4 {
        let mut words = copy_of(&NO_WORDS);
        read_user_prefix(&mut words, addr, left.saturating_mul(4));
        for j in 0..ARRAY_CHUNK {
            values[j] = words[j] as u64;
        }
    } else {
        read_user_prefix(values, addr, left.saturating_mul(8));
    }
}

/// The handles a test of requests passed, read at its entry into `t.tested`
/// (`array_when::IF_OUT_POSITIVE`), as a `HandleArrayRecord` before its exit.
pub fn emit_tested_array(h: &EventHeader, t: &ThreadState) {
    let Some(mut place) = reserve::<HandleArrayRecord>() else {
        return;
    };
    let r = place.record();
    copy_words(&mut r.header, h);
    r.header.kind = kind::HANDLE_ARRAY;
    r.first = 0;
    r.total = t.tested_total;
    copy_words(&mut r.values, &t.tested);
    place.submit();
}
