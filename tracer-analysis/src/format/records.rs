//! Decoding raw records (ring buffer or recording) into typed values.

use std::mem::size_of;

use tracer_common::{
    kind, record_size, CallPairRecord, CallRecord, CallResult, CallReturnRecord, EventHeader,
    ExecRecord, ExitRecord, ForkRecord, FutexPairRecord, FutexRecord, HandleArrayRecord,
    ProcessEndRecord, RecordKind, SampleRecord, StatusArrayRecord, SwitchPairRecord, SwitchRecord,
    UnwoundRecord, WakeRecord, UNSET, UNSET32,
};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record of {0} bytes is shorter than a header")]
    Short(usize),
    #[error("unknown record kind {0}")]
    UnknownKind(u16),
    #[error("record of kind {kind} has {got} bytes, expected {want}")]
    WrongSize { kind: u16, got: usize, want: usize },
}

/// One decoded record. Each variant holds the fixed-size struct of its kind; the rare
/// long ones (arrays, exec: up to 168 bytes) are boxed, so a record is 112 bytes (a call)
/// where it was 176: records are moved several times on their way to the analysis, and
/// most are futex and scheduler records of 40 to 64 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    CallEnter(CallRecord),
    CallExit(CallRecord),
    HandleArray(Box<HandleArrayRecord>),
    StatusArray(Box<StatusArrayRecord>),
    FuncEnter(EventHeader),
    FuncExit(EventHeader),
    FutexEnter(FutexRecord),
    FutexExit(FutexRecord),
    SwitchOut(SwitchRecord),
    SwitchIn(SwitchRecord),
    Wakeup(WakeRecord),
    WakeupNew(WakeRecord),
    Fork(ForkRecord),
    Exec(Box<ExecRecord>),
    Exit(ExitRecord),
    ProcessEnd(ProcessEndRecord),
    CallsUnwound(UnwoundRecord),
    Sample(Box<SampleRecord>),
}

// Keep the common records small (see `Record`): box a new long kind.
const _: () = assert!(std::mem::size_of::<Record>() <= 112);

fn read<T: Copy>(bytes: &[u8]) -> T {
    debug_assert!(bytes.len() >= std::mem::size_of::<T>());
    // SAFETY: the caller checked the length; all record types are plain old data.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}

/// The kind of the record at the start of `bytes`.
pub fn peek_kind(bytes: &[u8]) -> Result<u16, DecodeError> {
    peek_header(bytes).map(|h| h.kind)
}

/// The header of the record at the start of `bytes`.
pub fn peek_header(bytes: &[u8]) -> Result<EventHeader, DecodeError> {
    if bytes.len() < std::mem::size_of::<EventHeader>() {
        return Err(DecodeError::Short(bytes.len()));
    }
    Ok(read::<EventHeader>(bytes))
}

/// Size of the record at the start of `bytes` (from its kind).
pub(crate) fn record_len(bytes: &[u8]) -> Result<usize, DecodeError> {
    let k = peek_kind(bytes)?;
    record_size(k).ok_or(DecodeError::UnknownKind(k))
}

/// Hands `f` the records a ring-buffer record stands for, as byte images: the record
/// itself, or the whole records a short ring form stands for ([`CallPairRecord`],
/// [`CallReturnRecord`], [`FutexPairRecord`], [`SwitchPairRecord`]). Userspace expands
/// them as it reads the ring: nothing after that (recordings, the analysis) sees one. A
/// [`kind::SLOTS_NUDGE`] stands for no record.
pub fn unpair<E>(bytes: &[u8], mut f: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    let sized = |n: usize| bytes.len() == n;
    match peek_kind(bytes) {
        Ok(kind::CALL_PAIR) if sized(size_of::<CallPairRecord>()) => {
            let p: CallPairRecord = read(bytes);
            let entry = CallRecord {
                comm: p.comm,
                handle: p.handle,
                bytes: p.bytes,
                peer: p.peer,
                tag: p.tag,
                count: p.count,
                elem_size: p.elem_size,
                ..CallRecord::unset(EventHeader {
                    kind: kind::CALL_ENTER,
                    ..p.header
                })
            };
            f(image(&entry))?;
            let exit = EventHeader {
                ts_ns: p.exit_ts_ns,
                cpu_ns: p.exit_cpu_ns,
                ..p.header
            };
            f(image(&call_exit(exit, &p.result)))
        }
        Ok(kind::SLOTS_NUDGE) => Ok(()),
        Ok(kind::CALL_RETURN) if sized(size_of::<CallReturnRecord>()) => {
            let r: CallReturnRecord = read(bytes);
            f(image(&call_exit(r.header, &r.result)))
        }
        Ok(kind::FUTEX_PAIR) if sized(size_of::<FutexPairRecord>()) => {
            let p: FutexPairRecord = read(bytes);
            let mut enter = p.enter;
            enter.header.kind = kind::FUTEX_ENTER;
            f(image(&enter))?;
            let exit = FutexRecord {
                header: EventHeader {
                    ts_ns: p.exit_ts_ns,
                    cpu_ns: p.exit_cpu_ns,
                    kind: kind::FUTEX_EXIT,
                    cpu: p.exit_cpu,
                    ..p.enter.header
                },
                ret: p.ret,
                ..Default::default()
            };
            f(image(&exit))
        }
        Ok(kind::SWITCH_PAIR) if sized(size_of::<SwitchPairRecord>()) => {
            let p: SwitchPairRecord = read(bytes);
            let mut out = p.out;
            out.header.kind = kind::SWITCH_OUT;
            f(image(&out))?;
            let switch_in = SwitchRecord {
                header: EventHeader {
                    cpu_ns: p.in_cpu_ns,
                    tgid: p.in_tgid,
                    tid: p.in_tid,
                    kind: kind::SWITCH_IN,
                    ..out.header
                },
                prev_state: 0,
            };
            f(image(&switch_in))
        }
        _ => f(bytes),
    }
}

/// The record at the start of a probe's slot (`tracer_common::SLOT_BYTES`; the rest of
/// the slot is left over from older records): the whole slot if its kind is unknown, so
/// that decoding it says so.
pub fn in_slot(slot: &[u8]) -> &[u8] {
    match record_len(slot) {
        Ok(n) if n <= slot.len() => &slot[..n],
        _ => slot,
    }
}

/// Hands `f` the records of several streams, each in timestamp order (or nearly: the
/// ring's), as one stream in timestamp order; ties go to the earlier stream. The probes
/// write one stream per CPU and the ring; the reorder window after this only has to
/// mend small differences, where a whole read of each stream in turn would put up to a
/// read interval's worth of records out of order.
pub fn merge_by_time<'a, E>(
    streams: Vec<Box<dyn Iterator<Item = &'a [u8]> + 'a>>,
    mut f: impl FnMut(&'a [u8]) -> Result<(), E>,
) -> Result<(), E> {
    use std::cmp::Reverse;
    let ts = |r: &[u8]| {
        r.get(..8)
            .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()))
    };
    let mut streams: Vec<_> = streams.into_iter().map(Iterator::peekable).collect();
    let mut next = std::collections::BinaryHeap::with_capacity(streams.len());
    for (i, s) in streams.iter_mut().enumerate() {
        if let Some(r) = s.peek() {
            next.push(Reverse((ts(r), i)));
        }
    }
    while let Some(Reverse((_, i))) = next.pop() {
        let r = streams[i]
            .next()
            .expect("a stream in the heap has a record");
        f(r)?;
        if let Some(r) = streams[i].peek() {
            next.push(Reverse((ts(r), i)));
        }
    }
    Ok(())
}

/// The `CALL_EXIT` record of a call whose exit header (time, thread, call) is `h`.
fn call_exit(h: EventHeader, r: &CallResult) -> CallRecord {
    CallRecord {
        handle: r.handle,
        bytes: r.bytes,
        ret: r.ret as i64,
        out: if r.out == UNSET32 {
            UNSET
        } else {
            r.out as i64
        },
        peer: r.peer,
        tag: r.tag,
        site: r.site,
        ..CallRecord::unset(EventHeader {
            kind: kind::CALL_EXIT,
            cpu: r.cpu,
            ..h
        })
    }
}

/// The byte image of a record, as the probes write it and recordings store it.
fn image<T>(v: &T) -> &[u8] {
    // SAFETY: record types are plain old data without padding (tracer-common checks
    // their sizes); the slice borrows `v`.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

/// Decode exactly one record; `bytes` must be exactly its size.
pub fn decode(bytes: &[u8]) -> Result<Record, DecodeError> {
    let k = peek_kind(bytes)?;
    let kind = RecordKind::from_id(k).ok_or(DecodeError::UnknownKind(k))?;
    let want = kind.size();
    if bytes.len() != want {
        return Err(DecodeError::WrongSize {
            kind: k,
            got: bytes.len(),
            want,
        });
    }
    Ok(match kind {
        RecordKind::CallEnter => Record::CallEnter(read(bytes)),
        RecordKind::CallExit => Record::CallExit(read(bytes)),
        RecordKind::HandleArray => Record::HandleArray(Box::new(read(bytes))),
        RecordKind::StatusArray => Record::StatusArray(Box::new(read(bytes))),
        RecordKind::FuncEnter => Record::FuncEnter(read(bytes)),
        RecordKind::FuncExit => Record::FuncExit(read(bytes)),
        RecordKind::FutexEnter => Record::FutexEnter(read(bytes)),
        RecordKind::FutexExit => Record::FutexExit(read(bytes)),
        RecordKind::SwitchOut => Record::SwitchOut(read(bytes)),
        RecordKind::SwitchIn => Record::SwitchIn(read(bytes)),
        RecordKind::Wakeup => Record::Wakeup(read(bytes)),
        RecordKind::WakeupNew => Record::WakeupNew(read(bytes)),
        RecordKind::Fork => Record::Fork(read(bytes)),
        RecordKind::Exec => Record::Exec(Box::new(read(bytes))),
        RecordKind::Exit => Record::Exit(read(bytes)),
        RecordKind::ProcessEnd => Record::ProcessEnd(read(bytes)),
        RecordKind::CallsUnwound => Record::CallsUnwound(read(bytes)),
        RecordKind::Sample => Record::Sample(Box::new(read(bytes))),
        // Ring-only forms: `unpair` expands them before anything decodes, and recordings
        // never hold them.
        RecordKind::CallPair
        | RecordKind::CallReturn
        | RecordKind::FutexPair
        | RecordKind::SwitchPair
        | RecordKind::RawSample
        | RecordKind::SlotsNudge
        | RecordKind::LibraryLoaded => return Err(DecodeError::UnknownKind(k)),
    })
}

impl Record {
    pub fn header(&self) -> &EventHeader {
        match self {
            Record::CallEnter(r) | Record::CallExit(r) => &r.header,
            Record::HandleArray(r) => &r.header,
            Record::StatusArray(r) => &r.header,
            Record::FuncEnter(h) | Record::FuncExit(h) => h,
            Record::FutexEnter(r) | Record::FutexExit(r) => &r.header,
            Record::SwitchOut(r) | Record::SwitchIn(r) => &r.header,
            Record::Wakeup(r) | Record::WakeupNew(r) => &r.header,
            Record::Fork(r) => &r.header,
            Record::Exec(r) => &r.header,
            Record::Exit(r) => &r.header,
            Record::ProcessEnd(r) => &r.header,
            Record::CallsUnwound(r) => &r.header,
            Record::Sample(r) => &r.header,
        }
    }

    pub fn header_mut(&mut self) -> &mut EventHeader {
        match self {
            Record::CallEnter(r) | Record::CallExit(r) => &mut r.header,
            Record::HandleArray(r) => &mut r.header,
            Record::StatusArray(r) => &mut r.header,
            Record::FuncEnter(h) | Record::FuncExit(h) => h,
            Record::FutexEnter(r) | Record::FutexExit(r) => &mut r.header,
            Record::SwitchOut(r) | Record::SwitchIn(r) => &mut r.header,
            Record::Wakeup(r) | Record::WakeupNew(r) => &mut r.header,
            Record::Fork(r) => &mut r.header,
            Record::Exec(r) => &mut r.header,
            Record::Exit(r) => &mut r.header,
            Record::ProcessEnd(r) => &mut r.header,
            Record::CallsUnwound(r) => &mut r.header,
            Record::Sample(r) => &mut r.header,
        }
    }

    /// The raw bytes of the record, as the probes wrote them.
    #[cfg(test)]
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }

    /// The record's byte image (what [`decode`] reads back), without a copy.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Record::CallEnter(r) | Record::CallExit(r) => image(r),
            Record::HandleArray(r) => image(&**r),
            Record::StatusArray(r) => image(&**r),
            Record::FuncEnter(h) | Record::FuncExit(h) => image(h),
            Record::FutexEnter(r) | Record::FutexExit(r) => image(r),
            Record::SwitchOut(r) | Record::SwitchIn(r) => image(r),
            Record::Wakeup(r) | Record::WakeupNew(r) => image(r),
            Record::Fork(r) => image(r),
            Record::Exec(r) => image(&**r),
            Record::Exit(r) => image(r),
            Record::ProcessEnd(r) => image(r),
            Record::CallsUnwound(r) => image(r),
            Record::Sample(r) => image(&**r),
        }
    }
}

/// Human name of a record kind ([`RecordKind::name`]), or "unknown".
pub fn kind_name(k: u16) -> &'static str {
    RecordKind::from_id(k).map_or("unknown", RecordKind::name)
}

/// The executable path of an exec record.
pub fn exec_filename(r: &ExecRecord) -> String {
    let n = (r.filename_len as usize).min(r.filename.len());
    String::from_utf8_lossy(&r.filename[..n]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_merge_in_time_order_and_slots_trim_to_their_record() {
        let rec = |ts: u64, tid: u32| {
            let mut f = ForkRecord::default();
            f.header.kind = kind::FORK;
            f.header.ts_ns = ts;
            f.header.tid = tid;
            Record::Fork(f).to_bytes()
        };
        // Stream 0 (the ring) is a little out of order; streams 1 and 2 are CPUs.
        let ring = [rec(5, 0), rec(3, 0), rec(9, 0)];
        let cpu1 = [rec(1, 1), rec(5, 1), rec(8, 1)];
        let cpu2 = [rec(2, 2), rec(10, 2)];
        let streams: Vec<Box<dyn Iterator<Item = &[u8]>>> = vec![
            Box::new(ring.iter().map(|r| r.as_slice())),
            Box::new(cpu1.iter().map(|r| r.as_slice())),
            Box::new(cpu2.iter().map(|r| r.as_slice())),
            Box::new(std::iter::empty()),
        ];
        let mut got = Vec::new();
        merge_by_time(streams, |r| {
            let h = *decode(r)?.header();
            got.push((h.ts_ns, h.tid));
            Ok::<(), DecodeError>(())
        })
        .unwrap();
        assert_eq!(
            got,
            [
                (1, 1),
                (2, 2),
                (5, 0),
                (3, 0),
                (5, 1),
                (8, 1),
                (9, 0),
                (10, 2)
            ]
        );

        let mut slot = rec(4, 7);
        slot.resize(tracer_common::SLOT_BYTES, 0xee);
        assert_eq!(in_slot(&slot), rec(4, 7).as_slice());
        let junk = [0xffu8; tracer_common::SLOT_BYTES];
        assert_eq!(
            decode(in_slot(&junk)),
            Err(DecodeError::UnknownKind(0xffff))
        );
    }

    #[test]
    fn round_trip_and_errors() {
        let mut f = ForkRecord::default();
        f.header.kind = kind::FORK;
        f.header.tid = 7;
        f.child_tid = 8;
        let bytes = Record::Fork(f).to_bytes();
        assert_eq!(decode(&bytes), Ok(Record::Fork(f)));
        assert_eq!(record_len(&bytes), Ok(40));
        assert_eq!(
            decode(&bytes[..39]),
            Err(DecodeError::WrongSize {
                kind: kind::FORK,
                got: 39,
                want: 40
            })
        );
        let mut bad = bytes.clone();
        bad[24] = 99;
        assert_eq!(decode(&bad), Err(DecodeError::UnknownKind(99)));
        assert_eq!(decode(&bytes[..10]), Err(DecodeError::Short(10)));
    }

    fn unpaired(bytes: &[u8]) -> Vec<Record> {
        let mut out = Vec::new();
        unpair(bytes, |b| decode(b).map(|r| out.push(r))).unwrap();
        out
    }

    #[test]
    fn short_ring_forms_expand_into_whole_records() {
        let header = |kind, ts_ns| EventHeader {
            ts_ns,
            cpu_ns: ts_ns / 2,
            tgid: 7,
            tid: 8,
            kind,
            call: 3,
            cpu: 1,
        };
        let result = CallResult {
            handle: 0x55,
            bytes: 64,
            site: 0x1234,
            ret: -1,
            peer: 2,
            tag: 9,
            cpu: 0,
            out: 4,
            _reserved: 0,
        };
        let pair = CallPairRecord {
            header: header(kind::CALL_PAIR, 10),
            comm: 0x99,
            handle: 0x11,
            bytes: 8,
            peer: 1,
            tag: 5,
            count: 2,
            elem_size: 4,
            exit_ts_ns: 20,
            exit_cpu_ns: 11,
            result,
        };
        let bytes = image(&pair).to_vec();
        assert_eq!(record_len(&bytes), Ok(136));
        let entry = CallRecord {
            comm: 0x99,
            handle: 0x11,
            bytes: 8,
            peer: 1,
            tag: 5,
            count: 2,
            elem_size: 4,
            ..CallRecord::unset(header(kind::CALL_ENTER, 10))
        };
        let exit = CallRecord {
            handle: 0x55,
            bytes: 64,
            ret: -1,
            out: 4,
            peer: 2,
            tag: 9,
            site: 0x1234,
            ..CallRecord::unset(EventHeader {
                cpu_ns: 11,
                cpu: 0,
                ..header(kind::CALL_EXIT, 20)
            })
        };
        assert_eq!(
            unpaired(&bytes),
            [Record::CallEnter(entry), Record::CallExit(exit)]
        );
        // A short form is not a record of its own.
        assert_eq!(
            decode(&bytes),
            Err(DecodeError::UnknownKind(kind::CALL_PAIR))
        );

        let ret = CallReturnRecord {
            header: EventHeader {
                cpu_ns: 11,
                ..header(kind::CALL_RETURN, 20)
            },
            result,
        };
        assert_eq!(unpaired(image(&ret)), [Record::CallExit(exit)]);

        let enter = FutexRecord {
            header: header(kind::FUTEX_PAIR, 30),
            uaddr: 0x1000,
            op: 1,
            val: 1,
            ..Default::default()
        };
        let pair = FutexPairRecord {
            enter,
            exit_ts_ns: 31,
            exit_cpu_ns: 16,
            ret: 1,
            exit_cpu: 0,
            _reserved: 0,
        };
        let exit = FutexRecord {
            header: EventHeader {
                ts_ns: 31,
                cpu_ns: 16,
                tgid: 7,
                tid: 8,
                kind: kind::FUTEX_EXIT,
                call: 3,
                cpu: 0,
            },
            ret: 1,
            ..Default::default()
        };
        let mut want = enter;
        want.header.kind = kind::FUTEX_ENTER;
        assert_eq!(
            unpaired(image(&pair)),
            [Record::FutexEnter(want), Record::FutexExit(exit)]
        );
        // Anything else passes through.
        assert_eq!(unpaired(image(&exit)), [Record::FutexExit(exit)]);

        // A switch between two traced threads: thread 8 of process 7 leaves CPU 1
        // (preempted), thread 12 of process 11 comes, at one stamp.
        let out = SwitchRecord {
            header: EventHeader {
                cpu_ns: 15,
                ..header(kind::SWITCH_OUT, 40)
            },
            prev_state: 0x100,
        };
        let pair = SwitchPairRecord {
            out: SwitchRecord {
                header: EventHeader {
                    kind: kind::SWITCH_PAIR,
                    ..out.header
                },
                ..out
            },
            in_cpu_ns: 33,
            in_tgid: 11,
            in_tid: 12,
        };
        let switch_in = SwitchRecord {
            header: EventHeader {
                ts_ns: 40,
                cpu_ns: 33,
                tgid: 11,
                tid: 12,
                kind: kind::SWITCH_IN,
                call: 3,
                cpu: 1,
            },
            prev_state: 0,
        };
        assert_eq!(record_len(image(&pair)), Ok(56));
        assert_eq!(
            unpaired(image(&pair)),
            [Record::SwitchOut(out), Record::SwitchIn(switch_in)]
        );
    }
}
