//! What a call's exit learns: its return value, what it wrote through its pointers, and
//! the statuses of what it received.

use crate::{
    emit::reserve,
    mem::{copy_words, read_user, read_user_into, read_user_prefix, MIN_POINTER},
    scratch::{MAX_STATUS_BYTES, STATUS_CHUNK_BYTES},
};
use tracer_common::{
    count_mode, kind, status_mode, CallFrame, CallLayout, CallResult, EventHeader, FlavorConfig,
    StatusArrayRecord, ARRAY_CHUNK, ARRAY_MAX_CHUNKS, UNSET, UNSET32,
};

/// What a call's exit probe has read before it fills the record.
pub struct ExitSeen {
    /// The return register.
    pub ret: u64,
    /// Where the call returns to.
    pub site: u64,
    pub cpu: u32,
    /// The int the call wrote through its `out` pointer (UNSET32 if none): read once by
    /// the exit, which also decides with it whether a test completed a request.
    pub out: i32,
}

/// Fills what a call's exit learns (in the ring): its return value, what it wrote
/// through the pointers its entry kept in `frame`, and its site. (Inlined: a BPF function
/// takes at most five arguments.)
#[inline(always)]
pub fn call_result(
    r: &mut CallResult,
    seen: &ExitSeen,
    frame: &CallFrame,
    layout: &CallLayout,
    flavor: &FlavorConfig,
) {
    // PVM, MPI and pthread calls all return int.
    r.ret = seen.ret as i32;
    r.site = seen.site;
    r.cpu = seen.cpu;
    r._reserved = 0;
    r.handle = 0;
    if frame.handle_out != 0 {
        if flavor.handle_size == 4 {
            // Little-endian: the low half of `handle`.
            let low = unsafe { &mut *(&mut r.handle as *mut u64 as *mut u32) };
            read_user_into(low, frame.handle_out, 0);
        } else {
            read_user_into(&mut r.handle, frame.handle_out, 0);
        }
    }
    r.out = seen.out;
    r.peer = UNSET32;
    r.tag = UNSET32;
    r.bytes = UNSET;
    match layout.status_mode {
        status_mode::MPI_STATUS => read_status(frame.status[0], flavor, r),
        status_mode::INT_POINTERS => {
            read_user_into(&mut r.peer, frame.status[0], UNSET32);
            read_user_into(&mut r.tag, frame.status[1], UNSET32);
            if let Some(v) = read_user::<i32>(frame.status[2]) {
                r.bytes = v as i64;
            }
        }
        status_mode::PVM_RBUF if r.ret > 0 && flavor.rbuf_vaddr != 0 => {
            if let Some(msg) = read_user::<u64>(frame.bias.wrapping_add(flavor.rbuf_vaddr)) {
                read_user_into(&mut r.peer, msg + flavor.pmsg_src_off as u64, UNSET32);
                read_user_into(&mut r.tag, msg + flavor.pmsg_tag_off as u64, UNSET32);
                if let Some(v) = read_user::<i32>(msg + flavor.pmsg_len_off as u64) {
                    r.bytes = v as i64;
                }
            }
        }
        _ => {}
    }
}

/// MPICH keeps a status's byte count in two words: the low 32 bits, then the high bits
/// shifted left by one above the "cancelled" bit.
fn mpich_count(v: u64) -> i64 {
    ((v & 0xffff_ffff) | (((v >> 32) >> 1) << 32)) as i64
}

/// The source, tag and size an MPI_Status says, written by the kernel straight into the
/// ring record ([`read_user_into`]).
fn read_status(status: u64, flavor: &FlavorConfig, r: &mut CallResult) {
    if status < MIN_POINTER {
        return;
    }
    read_user_into(
        &mut r.peer,
        status + flavor.status_source_off as u64,
        UNSET32,
    );
    read_user_into(&mut r.tag, status + flavor.status_tag_off as u64, UNSET32);
    let count = status + flavor.status_count_off as u64;
    match flavor.count_mode {
        count_mode::SIZE_T => read_user_into(&mut r.bytes, count, UNSET),
        count_mode::MPICH_SPLIT => {
            if let Some(v) = read_user::<u64>(count) {
                r.bytes = mpich_count(v);
            }
        }
        _ => {}
    }
}

static UNSET_INTS: [i32; ARRAY_CHUNK] = [UNSET32; ARRAY_CHUNK];
static UNSET_SIZES: [i64; ARRAY_CHUNK] = [UNSET; ARRAY_CHUNK];

/// Chunk `chunk` of the `total` statuses at `base`, as one `StatusArrayRecord`; false
/// when there is no such chunk (or no room for it): the array is written. The chunk's
/// statuses are read at once into `chunk_bytes` (map memory: too big for the stack) and
/// their fields picked from there, with no branch per status. Called once per chunk by
/// `bpf_loop`, so that the verifier walks it once, not once per chunk.
pub fn emit_status_chunk(
    h: &EventHeader,
    base: u64,
    total: u32,
    flavor: &FlavorConfig,
    chunk_bytes: &mut [u8; STATUS_CHUNK_BYTES],
    chunk: u32,
) -> bool {
    let size = flavor.status_size;
    if base < MIN_POINTER || size == 0 || size > MAX_STATUS_BYTES || chunk >= ARRAY_MAX_CHUNKS {
        return false;
    }
    let (source_off, tag_off, count_off) = (
        flavor.status_source_off as usize,
        flavor.status_tag_off as usize,
        flavor.status_count_off as usize,
    );
    let first = chunk * ARRAY_CHUNK as u32;
    if first >= total {
        return false;
    }
    let Some(mut place) = reserve::<StatusArrayRecord>() else {
        return false;
    };
    let r = place.record();
    copy_words(&mut r.header, h);
    r.header.kind = kind::STATUS_ARRAY;
    r.first = first;
    r.total = total;
    copy_words(&mut r.source, &UNSET_INTS);
    copy_words(&mut r.tag, &UNSET_INTS);
    copy_words(&mut r.bytes, &UNSET_SIZES);
    let n = (total - first).min(ARRAY_CHUNK as u32);
    let at = base + size as u64 * first as u64;
    if read_user_prefix(chunk_bytes, at, n * size) {
        for j in 0..ARRAY_CHUNK {
            if j as u32 >= n {
                break;
            }
            let status = j * size as usize;
            r.source[j] = field_at::<i32>(chunk_bytes, status + source_off);
            r.tag[j] = field_at::<i32>(chunk_bytes, status + tag_off);
            let count = field_at::<u64>(chunk_bytes, status + count_off);
            r.bytes[j] = match flavor.count_mode {
                count_mode::SIZE_T => count as i64,
                count_mode::MPICH_SPLIT => mpich_count(count),
                _ => UNSET,
            };
        }
    }
    place.submit();
    true
}

/// The `T` at byte `offset` of a chunk of statuses. The offset is masked to the chunk's
/// first 256 bytes, which the verifier can see stay inside the map value.
#[inline(always)]
fn field_at<T: Copy>(chunk_bytes: &[u8; STATUS_CHUNK_BYTES], offset: usize) -> T {
    let offset = offset & 0xff;
    // SAFETY: offset + size_of::<T>() <= 256 + 8 <= STATUS_CHUNK_BYTES.
    unsafe { core::ptr::read_unaligned(chunk_bytes.as_ptr().add(offset) as *const T) }
}
