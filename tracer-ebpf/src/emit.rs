//! Writing records: into this CPU's slots when it has room, else into the ring buffer;
//! what could not be written is counted in `FAILURES` (`ProbeFailure::RingFull`), where
//! every other failure of the probes is counted too.

use crate::{
    maps::{config, count_failure, CURSORS, EVENTS, SLOTS, WRITTEN},
    mem::copy_words,
};
use aya_ebpf::helpers::{bpf_get_smp_processor_id, generated};
use core::{
    ffi::c_void,
    ptr::{read_volatile, write_volatile},
};
use tracer_common::{
    held, kind, CallRecord, EventHeader, FutexRecord, ProbeFailure, SlotCursor, ThreadState,
    SLOT_BYTES,
};

/// A header with nothing set: where the record templates start.
pub const EMPTY_HEADER: EventHeader = EventHeader {
    ts_ns: 0,
    cpu_ns: 0,
    tgid: 0,
    tid: 0,
    kind: 0,
    call: 0,
    cpu: 0,
};
/// A call record with nothing set: where every call record starts.
pub static UNSET_CALL: CallRecord = CallRecord::unset(EMPTY_HEADER);
pub const NO_FUTEX: FutexRecord = FutexRecord {
    header: EMPTY_HEADER,
    uaddr: 0,
    op: 0,
    val: 0,
    ret: 0,
    site: 0,
};

const BPF_RB_NO_WAKEUP: u64 = 1;
pub const BPF_RB_FORCE_WAKEUP: u64 = 2;
/// Wake the reader each time a CPU has written another this much (a power of two),
/// unless userspace set `ProbeConfig::wakeup_bytes`; it also drains on a short timer.
/// Waking it for every record would make it preempt the traced threads all the time (and
/// each wakeup shows up as scheduler records of its own).
const WAKEUP_BYTES: u64 = 128 << 10;
/// Ring-buffer space of a record: an 8-byte header, then the record rounded up to 8.
const fn ring_size<T>() -> u64 {
    (8 + core::mem::size_of::<T>() as u64 + 7) & !7
}

/// A wakeup only when this CPU's records cross another multiple of the wakeup size.
/// (Waking for every record once 256 KiB waited, as the first version did, sent an
/// interrupt per record while the reader was behind: on this VM an APIC write that exits
/// to the hypervisor, about 1 us per record; docs/benchmarks.md. Waking once per 4 KiB a
/// CPU wrote while the reader was behind, the second version, still put 2.6 % of a
/// traced MPI loop's time in that APIC write: a reader that is behind is awake already.)
fn wakeup_flags(size: u64) -> u64 {
    // A per-CPU count of bytes written (an array lookup the verifier inlines) rather
    // than `bpf_ringbuf_query`, which reads the reader's position: a cache line the
    // reader's CPU keeps writing.
    let Some(written) = WRITTEN.get_ptr_mut(0) else {
        return BPF_RB_NO_WAKEUP;
    };
    let written = unsafe { &mut *written };
    let every = match config() {
        Some(c) if c.wakeup_bytes != 0 => c.wakeup_bytes as u64,
        _ => WAKEUP_BYTES,
    };
    let before = *written;
    *written += size;
    // `every` is a power of two: the count crossed a multiple of it when a bit at or
    // above it changed (cheaper than dividing).
    if before ^ *written >= every {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    }
}

/// Where a record is built: the next slot of this CPU or, when its slots are full or in
/// use, the ring buffer. A struct whose fields are set on both paths rather than an enum:
/// the compiler merges the two ways of filling a record, and the verifier rejects a
/// register that only one of them set.
pub struct Place<T: 'static> {
    record: *mut T,
    /// The CPU's cursor; null for a record in the ring.
    cursor: *mut SlotCursor,
    /// The slot's sequence number, or for the ring the flags to submit with.
    head_or_flags: u64,
}

impl<T> Place<T> {
    pub fn record(&mut self) -> &mut T {
        unsafe { &mut *self.record }
    }

    /// Hands the record to userspace.
    pub fn submit(self) {
        if self.cursor.is_null() {
            unsafe {
                generated::bpf_ringbuf_submit(self.record as *mut c_void, self.head_or_flags)
            };
            return;
        }
        unsafe {
            // Userspace reads the slots below the head: the record's stores must come
            // first. The compiler keeps them there (it cannot tell the two map values
            // apart, so it does not move stores past this volatile one; BPF has no fence
            // instruction), and x86-64 keeps stores in program order.
            write_volatile(&mut (*self.cursor).head, self.head_or_flags + 1);
            write_volatile(&mut (*self.cursor).busy, 0);
        }
    }
}

/// A place for a record of type `T`; None (and counted as `ProbeFailure::RingFull`) when
/// there is none.
pub fn reserve<T: 'static>() -> Option<Place<T>> {
    if core::mem::size_of::<T>() <= SLOT_BYTES {
        if let Some(place) = next_slot::<T>() {
            return Some(place);
        }
    }
    let flags = wakeup_flags(ring_size::<T>());
    match EVENTS.reserve::<T>(0) {
        Some(mut entry) => Some(Place {
            record: entry.as_mut_ptr(),
            cursor: core::ptr::null_mut(),
            head_or_flags: flags,
        }),
        None => {
            count_failure(ProbeFailure::RingFull);
            None
        }
    }
}

/// This CPU's next slot, unless userspace has not read its slots yet or another program
/// on this CPU is filling one (this program interrupted it, or it was preempted): the
/// `busy` mark is set and checked by programs of one CPU only, so plain stores do.
fn next_slot<T>() -> Option<Place<T>> {
    let per_cpu = config()?.slots_per_cpu;
    if per_cpu == 0 {
        return None;
    }
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let cursor = CURSORS.get_ptr_mut(cpu)?;
    unsafe {
        if read_volatile(&(*cursor).busy) != 0 {
            return None;
        }
        write_volatile(&mut (*cursor).busy, 1);
        let head = read_volatile(&(*cursor).head);
        let unread = head.wrapping_sub(read_volatile(&(*cursor).tail));
        let slot = if unread < per_cpu as u64 {
            SLOTS.get_ptr_mut(cpu * per_cpu + (head as u32 & (per_cpu - 1)))
        } else {
            None
        };
        if slot.is_some() && unread == per_cpu as u64 / 2 {
            nudge_reader();
        }
        match slot {
            Some(record) => Some(Place {
                record: record as *mut T,
                cursor,
                head_or_flags: head,
            }),
            None => {
                write_volatile(&mut (*cursor).busy, 0);
                None
            }
        }
    }
}

/// Wakes the reader when half of a CPU's slots are unread. It reads them every 50 ms,
/// which a CPU writing more records than that in 50 ms would outrun, and its records
/// would then go to the ring, at the ring's cost. Through the
/// ring, which is what the reader waits on. Only then: each wakeup is an interrupt (an
/// APIC write that exits to the hypervisor on a VM; a wakeup per 2,048 records was 1 %
/// of a traced loop of MPI_Comm_rank).
fn nudge_reader() {
    // From static memory: a header built on the stack is a `memset` (a byte loop).
    static NUDGE: EventHeader = EventHeader {
        kind: kind::SLOTS_NUDGE,
        ..EMPTY_HEADER
    };
    let _ = EVENTS.output::<EventHeader>(&NUDGE, BPF_RB_FORCE_WAKEUP);
}

pub fn emit<T: 'static>(record: &T) {
    if let Some(mut place) = reserve::<T>() {
        copy_words(place.record(), record);
        place.submit();
    }
}

/// Writes the entry record the thread held back in the hope of writing it with the
/// call's exit (`CallPairRecord`, `FutexPairRecord`), if it holds one.
pub fn write_held_entry(t: &mut ThreadState) {
    match t.held {
        held::CALL => emit(&t.held_entry),
        held::FUTEX => emit(&t.held_futex),
        _ => return,
    }
    t.held = held::NOTHING;
}
