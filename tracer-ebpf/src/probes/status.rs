//! What a call's exit learns: its return value, what it wrote through its pointers, and
//! the statuses of what it received.

use crate::{
    emit::emit,
    mem::{read_user, read_user_into, MIN_POINTER},
};
use tracer_common::{
    count_mode, kind, status_mode, CallFrame, CallLayout, CallResult, EventHeader, FlavorConfig,
    StatusArrayRecord, ARRAY_CHUNK, ARRAY_MAX_CHUNKS, UNSET, UNSET32,
};

/// Fills what a call's exit learns (in the ring): its return value, what it wrote
/// through the pointers its entry kept in `frame`, and its site. (Inlined: a BPF function
/// takes at most five arguments.)
#[inline(always)]
pub fn call_result(
    r: &mut CallResult,
    ret: u64,
    site: u64,
    cpu: u32,
    frame: &CallFrame,
    layout: &CallLayout,
    flavor: &FlavorConfig,
) {
    // PVM, MPI and pthread calls all return int.
    r.ret = ret as i32;
    r.site = site;
    r.cpu = cpu;
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
    read_user_into(&mut r.out, frame.out, UNSET32);
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

/// The message size an MPI_Status at `status` says.
fn status_bytes(status: u64, flavor: &FlavorConfig) -> i64 {
    let at = status + flavor.status_count_off as u64;
    match flavor.count_mode {
        count_mode::SIZE_T => read_user::<u64>(at).map(|v| v as i64).unwrap_or(UNSET),
        count_mode::MPICH_SPLIT => match read_user::<u64>(at) {
            Some(v) => mpich_count(v),
            None => UNSET,
        },
        _ => UNSET,
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

pub fn emit_status_array(h: &EventHeader, base: u64, total: u32, flavor: &FlavorConfig) {
    if base < MIN_POINTER {
        return;
    }
    let mut rec = StatusArrayRecord {
        header: *h,
        first: 0,
        total,
        source: [UNSET32; ARRAY_CHUNK],
        tag: [UNSET32; ARRAY_CHUNK],
        bytes: [UNSET; ARRAY_CHUNK],
    };
    rec.header.kind = kind::STATUS_ARRAY;
    let size = flavor.status_size as u64;
    for chunk in 0..ARRAY_MAX_CHUNKS {
        let first = chunk * ARRAY_CHUNK as u32;
        if first >= total {
            break;
        }
        rec.first = first;
        for j in 0..ARRAY_CHUNK {
            let i = first + j as u32;
            if i >= total {
                rec.source[j] = UNSET32;
                rec.tag[j] = UNSET32;
                rec.bytes[j] = UNSET;
                continue;
            }
            let s = base + size * i as u64;
            rec.source[j] =
                read_user::<i32>(s + flavor.status_source_off as u64).unwrap_or(UNSET32);
            rec.tag[j] = read_user::<i32>(s + flavor.status_tag_off as u64).unwrap_or(UNSET32);
            rec.bytes[j] = status_bytes(s, flavor);
        }
        emit(&rec);
    }
}
