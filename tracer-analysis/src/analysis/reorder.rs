//! Putting records in timestamp order. Records from different CPUs reach the ring buffer
//! in reservation order, which can differ slightly from timestamp order; the engine
//! needs causal order (a send before its receive), which timestamps from one machine
//! clock give. Online and offline analysis both go through this buffer.
//!
//! Records with one timestamp are put in the order their probe wrote them: the records
//! of one probe hit share its header's time but may reach userspace in two reads (a
//! CPU's slots and the ring are read one after the other, and a probe writes to the ring
//! when its CPU's slots are full), so their arrival order is not enough (hpcc: a
//! Waitall's handle array arrived before its entry, and its two receives went unmatched).

use std::collections::VecDeque;

use tracer_common::{kind, record_size, EventHeader};

use crate::format::records::{self, Record};

/// How far records may be out of timestamp order in the stream (one ring buffer, many
/// CPUs); the engine sees them once they are this much older than the newest.
pub(crate) const REORDER_WINDOW_NS: u64 = 50_000_000;

/// Bytes of a record kept in the window itself. The window holds 50 ms of records
/// (25,000 at 500,000 events/s); as whole `Record`s (176 bytes, the size of the largest
/// kind) that is 4.4 MB, past a core's L2 cache, and copying records into and out of it
/// took 12.6 % of the live tracer's samples (perf, futex flood). 64 bytes hold the futex, scheduler, fork,
/// exit and procedure records that make up most of a trace (1.6 MB for the same window);
/// the longer ones (MPI/PVM calls, arrays, exec) wait in a side table.
const SLOT_BYTES: usize = 64;
const HEADER_BYTES: usize = std::mem::size_of::<EventHeader>();
// Slots read the timestamp from their first bytes.
const _: () = assert!(std::mem::offset_of!(EventHeader, ts_ns) == 0);
// A handle array is always long: its slot has room for its first index.
const _: () = assert!(std::mem::size_of::<tracer_common::HandleArrayRecord>() > SLOT_BYTES);

/// One record in the window: its byte image when it fits, else its header followed by
/// its number in [`ReorderBuffer::spilled`].
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Slot([u8; SLOT_BYTES]);

impl Slot {
    fn ts(&self) -> u64 {
        u64::from_ne_bytes(self.0[..8].try_into().unwrap())
    }

    /// What the record is to the others of its probe hit ([`HitPart`]).
    fn hit_part(&self) -> HitPart {
        match records::peek_kind(&self.0) {
            Ok(kind::CALL_ENTER) => HitPart::Entry,
            Ok(kind::CALL_EXIT) => HitPart::Exit,
            Ok(kind::HANDLE_ARRAY) => HitPart::Array {
                first: u32::from_ne_bytes(self.0[CHUNK_AT].try_into().unwrap()),
            },
            Ok(kind::STATUS_ARRAY) => HitPart::Array { first: 0 },
            _ => HitPart::Other,
        }
    }

    fn tid(&self) -> u32 {
        u32::from_ne_bytes(self.0[TID_AT].try_into().unwrap())
    }

    /// Whether this record, come after `earlier`, goes before it: `earlier` is later in
    /// time, or both are of one probe hit (one time, one thread) that wrote this one
    /// first. A hit writes a call's entry, then the arrays its entry or exit read
    /// (handle arrays in the order of their first index), then the call's exit, which
    /// the analysis takes as the end of the call (an exit's arrays belong to the call
    /// still open). Nothing else moves: the enter and exit records the OpenMP lowering
    /// makes at one time keep their order.
    fn goes_before(&self, earlier: &Slot) -> bool {
        if earlier.ts() != self.ts() {
            return earlier.ts() > self.ts();
        }
        if earlier.tid() != self.tid() {
            return false;
        }
        match (self.hit_part(), earlier.hit_part()) {
            (HitPart::Entry, HitPart::Array { .. }) => true,
            (HitPart::Array { .. }, HitPart::Exit) => true,
            (HitPart::Array { first }, HitPart::Array { first: before }) => first < before,
            _ => false,
        }
    }
}

/// What a record is to the other records of its probe hit ([`Slot::goes_before`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HitPart {
    Entry,
    /// A handle array's chunk (by its first index) or a status array.
    Array {
        first: u32,
    },
    Exit,
    Other,
}

/// Records in (timestamp, arrival) order. They arrive nearly sorted (the ring buffer
/// holds them in reservation order, a few microseconds off timestamp order at most), so
/// a record is inserted by walking back from the newest end, usually zero steps: O(1) per
/// record where a binary heap of 50 ms of records (25,000 at 500,000 events/s) took
/// O(log n) cache-missing steps and a heap allocation per record.
pub(crate) struct ReorderBuffer {
    window_ns: u64,
    newest: u64,
    queue: VecDeque<Slot>,
    /// Records longer than a slot, in arrival order: entry `i` is long record number
    /// `first_spilled + i`. They leave in nearly the order they came, so this table is
    /// read front to back, memory the prefetcher follows (a table of reused entries was
    /// read in no order: a cache miss per line of every MPI call record, 19 % of the live
    /// tracer's samples on a ping-pong). An entry taken out of order stays empty until
    /// the ones before it are taken.
    spilled: VecDeque<Option<Record>>,
    first_spilled: u64,
}

/// Where a slot keeps its long record's number: after the header.
const SPILLED_AT: std::ops::Range<usize> = HEADER_BYTES..HEADER_BYTES + 8;
/// Where a slot keeps a handle array's first index (`HandleArrayRecord::first`), after
/// the long record's number ([`Slot::hit_part`]; handle arrays are always long).
const CHUNK_AT: std::ops::Range<usize> = HEADER_BYTES + 8..HEADER_BYTES + 12;
/// Where a slot has its record's thread id (in the header, which every slot holds).
const TID_AT: std::ops::Range<usize> = {
    let at = std::mem::offset_of!(EventHeader, tid);
    at..at + 4
};

impl ReorderBuffer {
    pub(crate) fn new(window_ns: u64) -> Self {
        ReorderBuffer {
            window_ns,
            newest: 0,
            queue: VecDeque::new(),
            spilled: VecDeque::new(),
            first_spilled: 0,
        }
    }

    pub(crate) fn push(&mut self, r: &Record) {
        let ts = r.header().ts_ns;
        self.newest = self.newest.max(ts);
        let bytes = r.as_bytes();
        let mut slot = Slot([0; SLOT_BYTES]);
        if bytes.len() <= SLOT_BYTES {
            slot.0[..bytes.len()].copy_from_slice(bytes);
        } else {
            let number = self.first_spilled + self.spilled.len() as u64;
            self.spilled.push_back(Some(r.clone()));
            slot.0[..HEADER_BYTES].copy_from_slice(&bytes[..HEADER_BYTES]);
            slot.0[SPILLED_AT].copy_from_slice(&number.to_ne_bytes());
            if let Record::HandleArray(a) = r {
                slot.0[CHUNK_AT].copy_from_slice(&a.first.to_ne_bytes());
            }
        }
        // After every record it does not go before (in arrival order otherwise).
        let mut at = self.queue.len();
        while at > 0 && slot.goes_before(&self.queue[at - 1]) {
            at -= 1;
        }
        if at == self.queue.len() {
            self.queue.push_back(slot);
        } else {
            self.queue.insert(at, slot);
        }
    }

    /// The record a slot holds (or points to; that entry is empty from now on).
    fn take(&mut self, slot: &Slot) -> Record {
        let kind = records::peek_kind(&slot.0).expect("a slot starts with a header");
        let len = record_size(kind).expect("push stored a known kind");
        if len <= SLOT_BYTES {
            return records::decode(&slot.0[..len]).expect("push stored a whole record");
        }
        let number = u64::from_ne_bytes(slot.0[SPILLED_AT].try_into().unwrap());
        let r = self.spilled[(number - self.first_spilled) as usize]
            .take()
            .expect("push stored the record");
        while self.spilled.front().is_some_and(Option::is_none) {
            self.spilled.pop_front();
            self.first_spilled += 1;
        }
        r
    }

    /// Hands over, in order, every record older than the window behind the newest (by
    /// value: a consumer that keeps it needs no copy).
    pub(crate) fn ready(&mut self, mut f: impl FnMut(Record)) {
        let limit = self.newest.saturating_sub(self.window_ns);
        while self.queue.front().is_some_and(|s| s.ts() <= limit) {
            let slot = self.queue.pop_front().unwrap();
            f(self.take(&slot));
        }
    }

    /// Hands over everything left, in order.
    pub(crate) fn flush(&mut self, mut f: impl FnMut(Record)) {
        while let Some(slot) = self.queue.pop_front() {
            f(self.take(&slot));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::{
        kind, CallRecord, ExecRecord, ExitRecord, FutexRecord, HandleArrayRecord, StatusArrayRecord,
    };

    fn rec(ts: u64) -> Record {
        let mut e = ExitRecord::default();
        e.header.kind = kind::EXIT;
        e.header.ts_ns = ts;
        Record::Exit(e)
    }

    #[test]
    fn releases_in_order_after_the_window() {
        let mut b = ReorderBuffer::new(10);
        let mut out = Vec::new();
        for ts in [5, 3, 20, 12, 14, 40] {
            b.push(&rec(ts));
            b.ready(|r| out.push(r.header().ts_ns));
        }
        assert_eq!(out, vec![3, 5, 12, 14, 20]);
        b.flush(|r| out.push(r.header().ts_ns));
        assert_eq!(out, vec![3, 5, 12, 14, 20, 40]);
    }

    /// Records longer than a slot come back whole, in order with the short ones, and
    /// their side table empties as they leave, also when they leave out of arrival order.
    #[test]
    fn long_records_come_back_whole() {
        let header = |k, ts| EventHeader {
            ts_ns: ts,
            kind: k,
            tid: 7,
            tgid: 7,
            cpu_ns: ts / 2,
            ..Default::default()
        };
        let mut exec = ExecRecord {
            header: header(kind::EXEC, 30),
            filename_len: 3,
            ..Default::default()
        };
        exec.filename[..3].copy_from_slice(b"abc");
        let mut call = CallRecord::unset(header(kind::CALL_ENTER, 10));
        call.site = 0x1234;
        let futex = FutexRecord {
            header: header(kind::FUTEX_ENTER, 20),
            uaddr: 0xdead,
            op: 1,
            val: 2,
            ret: -1,
            site: 0xbeef,
        };
        let input = [
            Record::Exec(Box::new(exec)),
            Record::CallEnter(call),
            Record::FutexEnter(futex),
        ];
        let mut b = ReorderBuffer::new(0);
        let mut out = Vec::new();
        for round in 0..3 {
            for r in &input {
                b.push(r);
            }
            b.flush(|r| out.push(r));
            assert_eq!(
                out,
                [input[1].clone(), input[2].clone(), input[0].clone()],
                "round {round}"
            );
            out.clear();
        }
        assert!(b.spilled.is_empty());
        // A long record that arrives after a later one leaves first; the table keeps
        // the later one until then.
        let mut b = ReorderBuffer::new(60);
        let mut later = CallRecord::unset(header(kind::CALL_ENTER, 50));
        later.site = 0x5678;
        let (later, earlier) = (Record::CallEnter(later), input[1].clone());
        b.push(&later);
        b.push(&earlier);
        b.push(&rec(100));
        b.ready(|r| out.push(r));
        assert_eq!(
            out,
            std::slice::from_ref(&earlier),
            "60 behind 100: up to 40 goes"
        );
        assert_eq!(
            b.spilled.len(),
            2,
            "the taken entry waits for the one before it"
        );
        b.flush(|r| out.push(r));
        assert_eq!(out, [earlier, later, rec(100)]);
        assert!(b.spilled.is_empty());
    }

    /// The records of a probe hit, all with its time, leave in the order the probe wrote
    /// them whatever order they came in: an entry before the handles it read, the
    /// chunks of an array by their first index, an exit after the statuses it read.
    /// Records of other times are not moved.
    #[test]
    fn the_records_of_one_probe_hit_leave_in_the_order_written() {
        let header = |k, ts| EventHeader {
            ts_ns: ts,
            kind: k,
            tid: 7,
            tgid: 7,
            ..Default::default()
        };
        let entry = Record::CallEnter(CallRecord::unset(header(kind::CALL_ENTER, 10)));
        let chunk = |first| {
            Record::HandleArray(Box::new(HandleArrayRecord {
                header: header(kind::HANDLE_ARRAY, 10),
                first,
                total: 12,
                ..Default::default()
            }))
        };
        let statuses = Record::StatusArray(Box::new(StatusArrayRecord {
            header: header(kind::STATUS_ARRAY, 20),
            ..Default::default()
        }));
        let exit = Record::CallExit(CallRecord::unset(header(kind::CALL_EXIT, 20)));
        let written = [
            rec(5),
            entry.clone(),
            chunk(0),
            chunk(8),
            statuses.clone(),
            exit.clone(),
            rec(30),
        ];
        // As two reads may hand them over: the ring's records of a time before the
        // slots' ones.
        let arrived = [rec(5), chunk(8), chunk(0), entry, exit, statuses, rec(30)];
        let mut b = ReorderBuffer::new(1000);
        for r in &arrived {
            b.push(r);
        }
        let mut out = Vec::new();
        b.flush(|r| out.push(r));
        assert_eq!(out, written);

        // Calls entered and left at one time (the OpenMP lowering's records, a fork
        // then a join) keep their order, and so do the records of another thread.
        let call = |k, tid| {
            let mut c = CallRecord::unset(header(k, 40));
            c.header.tid = tid;
            c
        };
        let lowered = [
            Record::CallEnter(call(kind::CALL_ENTER, 7)),
            Record::CallExit(call(kind::CALL_EXIT, 7)),
            Record::CallEnter(call(kind::CALL_ENTER, 7)),
            Record::CallExit(call(kind::CALL_EXIT, 7)),
            Record::StatusArray(Box::new(StatusArrayRecord {
                header: EventHeader {
                    tid: 8,
                    ..header(kind::STATUS_ARRAY, 40)
                },
                ..Default::default()
            })),
            Record::CallEnter(call(kind::CALL_ENTER, 9)),
        ];
        for r in &lowered {
            b.push(r);
        }
        out.clear();
        b.flush(|r| out.push(r));
        assert_eq!(out, lowered);

        // A Testsome that completed requests: the 3 requests it tested, then its 2
        // indices, numbered on after them, then its exit.
        let array = |first, total| {
            Record::HandleArray(Box::new(HandleArrayRecord {
                header: header(kind::HANDLE_ARRAY, 50),
                first,
                total,
                ..Default::default()
            }))
        };
        let exit = Record::CallExit(CallRecord::unset(header(kind::CALL_EXIT, 50)));
        let written = [array(0, 3), array(3, 5), exit.clone()];
        for r in [array(3, 5), exit, array(0, 3)] {
            b.push(&r);
        }
        out.clear();
        b.flush(|r| out.push(r));
        assert_eq!(out, written);
    }
}
